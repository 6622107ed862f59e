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


def main(argv: list[str] | None = None) -> None:
    try:
        app(args=argv, standalone_mode=True)
    except UserError as e:
        from rich.markup import escape  # a message may hold brackets ("[/v1]", paths, filters)

        console_err.print(f"[bold red]error:[/] {escape(str(e))}")
        sys.exit(2)
    except KeyboardInterrupt:
        console_err.print("[yellow]interrupted[/]")
        sys.exit(130)
