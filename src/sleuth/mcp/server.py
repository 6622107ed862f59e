"""The MCP server: Sleuth's tools and the ``trace://`` resource on the official SDK's ``MCPServer``.

The same server object serves stdio (``sleuth mcp``) and Streamable HTTP (``/mcp`` inside
``sleuth serve``); only how a call's principal is found differs (``principal_of``)."""

# no "from __future__ import annotations": the SDK reads the tools' annotations at run time

import json
import logging
from collections.abc import Callable
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations
from pydantic import Field

from sleuth import __version__
from sleuth.server.principals import Principal
from sleuth.server.runtime import Runtime
from sleuth.server.schemas import K_MAX, K_MIN, STEPS_MAX, STEPS_MIN

from .tools import Tools

PrincipalOf = Callable[[Context], Principal]

FILTERS_DOC = (
    "Narrows the caller's scope, never widens it (asking for more is an error): a list of expressions "
    '(["acl=all", "version=2025", "year>=2001"]) or an object of field to value(s) ({"version": "2025"}). '
    "Omitted: everything the caller may read."
)
SOURCE_DOC = "A source name from the sources tool (default: the first the caller may use)."
INSTRUCTIONS = (
    "Sleuth answers hard, multi-hop questions from a document collection by interleaving LLM reasoning "
    "with search. Use `search` to look up passages, `ask` for a grounded answer with numbered citations "
    "(slower: it reports each step as progress), `sources` for what can be searched, and read "
    "`trace://<trace_id>` for every step of a finished ask."
)

Filters = Annotated[dict[str, Any] | list[Any] | None, Field(description=FILTERS_DOC)]  # checked by parse_filters
Source = Annotated[str | None, Field(description=SOURCE_DOC)]


def _quietly(make: Callable[[], MCPServer]) -> MCPServer:
    """``make()`` without the SDK's ``logging.basicConfig`` taking over a process whose root logger
    has no handler yet (a program embedding ``create_app``; ``sleuth serve``): its logging is its own."""
    root = logging.getLogger()
    placeholder = None if root.handlers else logging.NullHandler()
    if placeholder is not None:
        root.addHandler(placeholder)
    try:
        return make()
    finally:
        if placeholder is not None:
            root.removeHandler(placeholder)


def build_server(rt: Runtime, principal_of: PrincipalOf, *, endpoint: str, local: bool) -> MCPServer:
    """An ``MCPServer`` whose tools run on ``rt``; ``principal_of(ctx)`` names each call's caller."""
    tools = Tools(rt, endpoint=endpoint, local=local)
    mcp = _quietly(lambda: MCPServer("sleuth", version=__version__, instructions=INSTRUCTIONS))
    strategies = ", ".join(rt.strategy_factories())

    @mcp.tool(
        description="Search the document collection: the best passages for a query, each with its provenance "
        "(id, title, source, section, version) and text. Fast; no LLM involved.",
        annotations=ToolAnnotations(readOnlyHint=True, openWorldHint=False),
    )
    async def search(
        query: Annotated[str, Field(description="what to look for (keywords or a question)")],
        ctx: Context,
        k: Annotated[int, Field(ge=K_MIN, le=K_MAX, description="how many passages")] = 5,
        filters: Filters = None,
        mode: Annotated[
            Literal["lexical", "dense", "hybrid"] | None,
            Field(description="lexical (BM25), dense (vectors) or hybrid; default: the index's own"),
        ] = None,
        source: Source = None,
    ) -> dict[str, Any]:
        return await tools.search(principal_of(ctx), query, k, filters, source, mode)

    @mcp.tool(
        description="Answer a question with an LLM that searches the collection step by step. Returns the "
        "answer, a short answer, numbered citations with provenance (id, title, source, section, version, "
        "found_by: the queries that found it), the finish reason (finished, step_limit, llm_unavailable, "
        "search_unavailable, timeout, cancelled, ...) and a trace id (read trace://ID for every step). "
        "Sends a progress notification per step; cancelling the request stops the run.",
        annotations=ToolAnnotations(readOnlyHint=True, openWorldHint=False),
    )
    async def ask(
        question: Annotated[str, Field(description="the question, 1 to 4000 characters")],
        ctx: Context,
        strategy: Annotated[
            str | None, Field(description=f"one of: {strategies} (default: {rt.settings.default_strategy})")
        ] = None,
        filters: Filters = None,
        k: Annotated[int | None, Field(ge=K_MIN, le=K_MAX, description="passages per search")] = None,
        max_steps: Annotated[int | None, Field(ge=STEPS_MIN, le=STEPS_MAX, description="most search steps")] = None,
        source: Source = None,
        mode: Annotated[
            Literal["default", "paper"] | None,
            Field(description="paper: the strategy exactly as published, no repair; default: with the repairs"),
        ] = None,
        options: Annotated[
            dict[str, Any] | None,
            Field(description='the strategy\'s own options, e.g. {"k_stepback": 3} for step-back'),
        ] = None,
        history: Annotated[
            list[dict[str, str]] | None,
            Field(
                description="the conversation so far, oldest first: [{role: user|assistant, content}]; a "
                "follow-up such as 'and the year after?' is first rewritten to stand alone from it (one short "
                'LLM call; options {"rewrite": false} turns it off). It never changes the scope.'
            ),
        ] = None,
    ) -> dict[str, Any]:
        async def on_step(n: int, message: str) -> None:
            await ctx.report_progress(n, None, message)

        return await tools.ask(principal_of(ctx), question, strategy=strategy, filters=filters, k=k,
                               max_steps=max_steps, source=source, options=options, on_step=on_step,
                               history=history, mode=mode)  # fmt: skip

    @mcp.tool(
        description="What this server can search: its sources (with index statistics within your scope) "
        "and the strategies ask accepts.",
        annotations=ToolAnnotations(readOnlyHint=True, openWorldHint=False),
    )
    async def sources(ctx: Context) -> dict[str, Any]:
        return tools.sources(principal_of(ctx))

    @mcp.resource(
        "trace://{trace_id}",
        name="trace",
        description="A finished ask: its answer, citations and every step (only for the caller who asked).",
        mime_type="application/json",
    )
    async def trace(trace_id: str, ctx: Context) -> str:
        return json.dumps(tools.trace(principal_of(ctx), trace_id), ensure_ascii=False)

    return mcp
