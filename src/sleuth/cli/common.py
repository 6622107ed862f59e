"""Helpers shared by the CLI command modules."""

from __future__ import annotations

import typer
from rich.console import Console

#: the ``sleuth`` command; each command module registers its commands on it
app = typer.Typer(
    name="sleuth",
    help="Answer hard, multi-hop questions by interleaving LLM reasoning with search.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
console = Console()
console_err = Console(stderr=True)


class UserError(Exception):
    """A mistake the user can fix: printed as one sentence, exit code 2."""
