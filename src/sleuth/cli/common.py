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


EMBED_MODEL_HELP = "Embedding model on an OpenAI-compatible /v1/embeddings server (default $SLEUTH_EMBED_MODEL)."
EMBED_URL_HELP = (
    "Embedding server URL, or several comma-separated (a pool); key from $SLEUTH_EMBED_API_KEY "
    "(default $SLEUTH_EMBED_BASE_URL; an index embedded through a server remembers its URL)."
)
RERANK_HELP = (
    "Rerank stage after fusion: none, llm (the LLM orders the candidates) or a rerank server URL "
    "(/v1/rerank or /rerank, Jina/Cohere/TEI; key from $SLEUTH_RERANK_API_KEY). Default: $SLEUTH_RERANK_BASE_URL, else none."
)


def rerank_option(rerank: str | None, rerank_base_url: str | None, *, allow_llm: bool = True) -> str | None:
    """The rerank choice of ``--rerank`` / ``--rerank-base-url`` (one of them), checked."""
    if rerank is not None and rerank_base_url is not None:
        raise UserError("give either --rerank or --rerank-base-url, not both")
    choice = rerank_base_url if rerank_base_url is not None else rerank
    if choice is None or (choice in ("none", "llm") and (allow_llm or choice == "none")):
        return choice
    if choice == "llm":
        raise UserError("--rerank llm needs an LLM: use it with sleuth ask, serve or mcp")
    if not choice.startswith(("http://", "https://")):
        raise UserError(f"--rerank must be none, llm or a rerank server's http(s) URL, not {choice!r}")
    return choice
