"""Helpers shared by the CLI command modules."""

from __future__ import annotations

import re
from typing import Any

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


class user_errors:
    """Turn an error of the ``kinds`` raised in the block into a :class:`UserError` with its message."""

    def __init__(self, *kinds: type[Exception]) -> None:
        self.kinds = kinds

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, e: BaseException | None, tb: object) -> None:
        if isinstance(e, self.kinds):
            raise UserError(str(e)) from None


def checked(value: str, what: str) -> str:
    """Command-line text checked by :mod:`sleuth.text_input` (bytes that are not UTF-8 reach
    Python as lone surrogates): ``value`` unchanged, or a :class:`UserError` naming ``what``."""
    from sleuth.text_input import BadText, check_text

    with user_errors(BadText):
        value = check_text(value, what)
    return value


def comma_list(text: str) -> list[str]:
    """The items of a comma-separated option ("a, b,,c" -> ["a", "b", "c"]); a comma inside brackets separates
    nothing ("rag,self-ask[mode=paper,k=3]" is two items)."""
    return [x.strip() for x in re.split(r",(?![^\[]*\])", text) if x.strip()]


def require_llm(model: str | None, base_url: str | None, what: str) -> None:
    """Before any work: the ``local`` extra when the run would use the embedded model (the
    model's weights are checked when it starts, with their own pip command)."""
    from sleuth.extras import require
    from sleuth.llm.base import LLMError
    from sleuth.llm.settings import resolve_llm_settings

    with user_errors(LLMError, ValueError):
        s = resolve_llm_settings(model, base_url=base_url)
    if not s.embedded:
        return
    require("local", f"{what} with the embedded model")


def rerank_option(rerank: str | None, rerank_base_url: str | None, *, allow_llm: bool = True) -> str | None:
    """The rerank choice of ``--rerank`` / ``--rerank-base-url`` (one of them), checked."""
    if rerank is not None and rerank_base_url is not None:
        raise UserError("give either --rerank or --rerank-base-url, not both")
    choice = rerank_base_url if rerank_base_url is not None else rerank
    if choice is None or (choice in ("none", "llm") and (allow_llm or choice == "none")):
        return choice
    if choice == "llm":
        raise UserError("--rerank llm needs an LLM: use it with sleuth ask, chat, serve or mcp")
    if not choice.startswith(("http://", "https://")):
        raise UserError(f"--rerank must be none, llm or a rerank server's http(s) URL, not {choice!r}")
    return choice


def source_options(
    embed_model: str | None,
    embed_base_url: str | None,
    choice: str | None,
    rerank_model: str | None,
    rerank_depth: int,
) -> dict[str, Any]:
    """:func:`~sleuth.search.open_retriever`'s options of the embed and rerank flags (``choice``: of
    :func:`rerank_option`; ``llm`` opens the source without a reranker: the caller wraps it once the LLM is open)."""
    from sleuth.search.base import SearchError
    from sleuth.search.remote import RerankServer

    opts: dict[str, Any] = {"embed_model": embed_model, "embed_base_url": embed_base_url, "rerank_depth": rerank_depth}
    with user_errors(SearchError):
        if choice is not None:
            opts["rerank"] = choice if choice in ("none", "llm") else RerankServer.resolve(choice, rerank_model)
    if opts.get("rerank") == "llm":
        opts["rerank"] = "none"
    return opts
