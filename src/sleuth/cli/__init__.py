"""The ``sleuth`` command line.

Each command group lives in its own module and registers itself on :data:`app`.
User mistakes (bad flags, missing files, bad keys) end with one clear sentence
and exit code 2, never a traceback.
"""

from __future__ import annotations

import sys

import typer

from sleuth.cli.common import UserError, console_err

app = typer.Typer(
    name="sleuth",
    help="Answer hard, multi-hop questions by interleaving LLM reasoning with search.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

# command modules (each adds its commands to ``app``)
from sleuth.cli import ask as _ask  # noqa: E402,F401
from sleuth.cli import eval as _eval  # noqa: E402,F401
from sleuth.cli import index as _index  # noqa: E402,F401
from sleuth.cli import models as _models  # noqa: E402,F401
from sleuth.cli import search as _search  # noqa: E402,F401
from sleuth.cli import serve as _serve  # noqa: E402,F401


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
