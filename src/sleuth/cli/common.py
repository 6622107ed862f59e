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


def checked(value: str, what: str) -> str:
    """Command-line text checked by :mod:`sleuth.text_input` (bytes that are not UTF-8 reach
    Python as lone surrogates): ``value`` unchanged, or a :class:`UserError` naming ``what``."""
    from sleuth.text_input import BadText, check_text

    try:
        return check_text(value, what)
    except BadText as e:
        raise UserError(str(e)) from None


def comma_list(text: str) -> list[str]:
    """The items of a comma-separated option ("a, b,,c" -> ["a", "b", "c"])."""
    return [x.strip() for x in text.split(",") if x.strip()]


def require_llm(model: str | None, base_url: str | None, what: str) -> None:
    """Before any work: the ``local`` extra when the run would use the embedded model (the
    model's weights are checked when it starts, with their own pip command)."""
    from sleuth.extras import require
    from sleuth.llm.base import LLMError
    from sleuth.llm.settings import resolve_llm_settings

    try:
        s = resolve_llm_settings(model, base_url=base_url)
    except (LLMError, ValueError) as e:
        raise UserError(str(e)) from None
    if not s.embedded:
        return
    require("local", f"{what} with the embedded model")
