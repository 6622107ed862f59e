"""``sleuth mcp``: Sleuth's MCP server over stdio, for an agent on this machine."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import typer

from sleuth.cli import flags
from sleuth.cli.common import UserError, app, console_err, require_llm, rerank_option, user_errors
from sleuth.cli.serve import open_runtime, served_sources

HELP = (
    "Serve Sleuth to an MCP client (an agent, an IDE) over stdio.\n\n"
    "Tools: ask (a grounded answer with citations; a progress notification per step; cancellable), "
    "search (passages with provenance), sources (sources, index statistics, strategies); "
    "resource: trace://ID (every step of a finished ask).\n\n"
    "The local user owns the index: every call may read every passage (a call's filters only narrow it). "
    "stdout carries the protocol; logs go to stderr. For a remote server use the /mcp endpoint of "
    "sleuth serve, with a bearer key or token (docs/server.md)."
)


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """While the model and sources open, whatever they print (even from C) goes to stderr:
    stdout belongs to the protocol."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


@app.command("mcp", help=HELP)
def mcp_cmd(
    index: list[str] = typer.Option([], "--index", help="Index folder (or NAME=DIR); repeatable, first is default."),
    corpus: list[str] = typer.Option([], "--corpus", help="Corpus file (or NAME=FILE); repeatable."),
    model: flags.Model = None,
    base_url: flags.BaseURL = None,
    default_strategy: str = typer.Option("self-ask", "--strategy", help="Strategy when a call names none."),
    max_concurrency: int = typer.Option(2, "--max-concurrency", help="Asks at once; more get an error result."),
    timeout: float = typer.Option(300.0, "--timeout", help="Seconds an ask may take (then finish_reason timeout)."),
    traces: Path = typer.Option(None, "--traces", help="Keep run traces in this SQLite file; default: in memory."),
    embed_model: flags.EmbedModel = None,
    embed_base_url: flags.EmbedURL = None,
    rerank: flags.Rerank = None,
    rerank_base_url: flags.RerankURL = None,
    rerank_model: flags.RerankModel = None,
    rerank_depth: flags.RerankDepth = 20,
    log_level: str = typer.Option("warning", "--log-level", help="Log level (logs go to stderr)."),
) -> None:
    from sleuth.config import settings as env_settings

    env_settings.set_default("OMP_WAIT_POLICY", "PASSIVE")
    level = getattr(logging, log_level.upper(), None)
    if not isinstance(level, int):
        raise UserError(f"unknown --log-level {log_level!r}; use debug, info, warning or error")
    logging.basicConfig(stream=sys.stderr, level=level, format="%(levelname)s %(name)s: %(message)s")
    from sleuth.extras import require

    require("mcp", "sleuth mcp")
    require("server", "sleuth mcp")
    require_llm(model, base_url, "sleuth mcp")
    from sleuth.mcp.server import build_server
    from sleuth.search.base import Filters
    from sleuth.server import ServerConfigError, ServerSettings
    from sleuth.server.principals import Principal
    from sleuth.server.runtime import Runtime

    if max_concurrency < 1 or timeout <= 0:
        raise UserError("--max-concurrency must be at least 1 and --timeout above 0")
    # as sleuth serve and sleuth ask: with no index, the quick-start corpus, said so
    sources, quickstart = served_sources(index, corpus)
    with user_errors(ServerConfigError):
        settings = ServerSettings(sources=tuple(sources), quickstart_source=quickstart, model=model,
                                  base_url=base_url, timeout_s=timeout,
                                  max_concurrency=max_concurrency, default_strategy=default_strategy,
                                  trace_db=str(traces) if traces else None, embed_model=embed_model,
                                  embed_base_url=embed_base_url, rerank=rerank_option(rerank, rerank_base_url),
                                  rerank_model=rerank_model, rerank_depth=rerank_depth)  # fmt: skip
        rt = Runtime(settings)
    open_runtime(rt, default_strategy, sources, quickstart, quiet=_stdout_to_stderr)
    local = Principal(id="local", name="local user", scope=Filters(), kind="local")
    server = build_server(rt, lambda ctx: local, endpoint="mcp:stdio", local=True)
    console_err.print("Sleuth MCP server on stdio (the local user reads every passage)")
    try:
        server.run("stdio")
    finally:
        rt.shutdown()
