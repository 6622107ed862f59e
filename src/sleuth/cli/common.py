"""Helpers shared by the CLI command modules."""

from __future__ import annotations

from rich.console import Console

console = Console()
console_err = Console(stderr=True)


class UserError(Exception):
    """A mistake the user can fix: printed as one sentence, exit code 2."""


def checked(value: str, what: str) -> str:
    """Command-line text checked by :mod:`sleuth.text_input` (bytes that are not UTF-8 reach
    Python as lone surrogates): ``value`` unchanged, or a :class:`UserError` naming ``what``."""
    from sleuth.text_input import BadText, check_text

    try:
        return check_text(value, what)
    except BadText as e:
        raise UserError(str(e)) from None
