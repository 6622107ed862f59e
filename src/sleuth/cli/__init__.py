"""The ``sleuth`` command line.

Each command group lives in its own module and registers itself on :data:`app`.
User mistakes (bad flags, missing files, bad keys) end with one clear sentence
and exit code 2, never a traceback.
"""

from __future__ import annotations

import sys

# command modules (each adds its commands to ``app``)
from sleuth.cli import ask as _ask  # noqa: F401
from sleuth.cli import chat as _chat  # noqa: F401
from sleuth.cli import eval as _eval  # noqa: F401
from sleuth.cli import eval_check as _eval_check  # noqa: F401
from sleuth.cli import index as _index  # noqa: F401
from sleuth.cli import mcp as _mcp  # noqa: F401
from sleuth.cli import models as _models  # noqa: F401
from sleuth.cli import search as _search  # noqa: F401
from sleuth.cli import serve as _serve  # noqa: F401
from sleuth.cli.common import UserError, app, console_err

__all__ = ["app", "main"]


def _fail(message: str) -> None:
    """One line on stderr (never wrapped), exit status 2."""
    from rich.markup import escape  # a message may hold brackets ("[/v1]", paths, filters)

    console_err.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)
    sys.exit(2)


def main(argv: list[str] | None = None) -> None:
    try:
        app(args=argv, standalone_mode=True)
    except UserError as e:
        _fail(str(e))
    except ImportError as e:  # an optional extra missing on a path no command checked up front
        from sleuth.extras import hint_for

        hint = hint_for(e)
        if hint is None:
            raise
        _fail(hint)
    except KeyboardInterrupt:
        console_err.print("[yellow]interrupted[/]")
        sys.exit(130)
