"""Helpers shared by the CLI command modules."""

from __future__ import annotations

from rich.console import Console

console = Console()
console_err = Console(stderr=True)


class UserError(Exception):
    """A mistake the user can fix: printed as one sentence, exit code 2."""
