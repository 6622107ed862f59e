"""``sleuth serve``: the HTTP API, the OpenAI-compatible endpoint and the web page."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from sleuth.cli import flags
from sleuth.cli.ask import QUICKSTART, data_dir, quickstart_corpus
from sleuth.cli.common import UserError, app, comma_list, console_err, require_llm, rerank_option, user_errors


def served_sources(index: list[str], corpus: list[str]) -> tuple[list[tuple[str, str]], str | None]:
    """The named sources of a server (serve, mcp) and the name of the quick-start corpus among them: the
    ``--index``/``--corpus`` given, else ``$SLEUTH_INDEX``/``$SLEUTH_CORPUS``, else the quick-start corpus."""
    from sleuth.config import env
    from sleuth.server.settings import source_entry

    sources = [source_entry(spec) for spec in [*index, *corpus]]
    sources = sources or [source_entry(env(v) or "") for v in ("SLEUTH_INDEX", "SLEUTH_CORPUS") if env(v)]
    if sources:
        return sources, None
    qs = quickstart_corpus()
    if qs is None:
        raise UserError(
            "no --index or --corpus was given and the quick-start corpus was not found at "
            f"{data_dir() / QUICKSTART} (set SLEUTH_DATA_DIR, or give --index DIR)"
        )
    return [("quickstart", str(qs))], "quickstart"


def open_runtime(
    rt: Any,
    default_strategy: str,
    sources: list[tuple[str, str]],
    quickstart: str | None,
    quiet: Callable[[], contextlib.AbstractContextManager[None]] = contextlib.nullcontext,
) -> None:
    """Check the default strategy, say what is served (the quick-start corpus once the settings are known to be
    good) and open the model and the sources (under ``quiet()``), or one line."""
    from sleuth.server.settings import QUICKSTART_NOTE

    if default_strategy not in rt.strategy_factories():
        raise UserError(f"unknown strategy {default_strategy!r}; choose one of: {', '.join(rt.strategy_factories())}")
    if quickstart:
        note = QUICKSTART_NOTE.split(", served")[0]
        console_err.print(f"no --index given: serving {note} ({dict(sources)[quickstart]})", soft_wrap=True)
    console_err.print(f"opening the model and {len(sources)} source(s)…")
    try:
        with quiet():
            rt.open()
    except Exception as e:
        raise UserError(f"could not start: {e}") from None


@app.command("serve")
def serve(
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind (a non-loopback one needs --api-key)."),
    port: int = typer.Option(8000, "--port", help="TCP port."),
    index: list[str] = typer.Option([], "--index", help="Index folder (or NAME=DIR); repeatable, first is default."),
    corpus: list[str] = typer.Option([], "--corpus", help="Corpus file (or NAME=FILE); repeatable."),
    model: flags.Model = None,
    allow_model: list[str] = typer.Option([], "--allow-model", help="Another model a request may pick; repeatable."),
    base_url: flags.BaseURL = None,
    api_key: str = typer.Option(
        None,
        "--api-key",
        help="Bearer token clients must send (default: $SLEUTH_SERVER_KEY; comma-separated for several).",
    ),
    max_concurrency: int = typer.Option(4, "--max-concurrency", help="Runs at once; more get 429 with Retry-After."),
    timeout: float = typer.Option(
        120.0, "--timeout", help="Seconds a run may take (then 504 / finish_reason timeout)."
    ),
    max_body: int = typer.Option(256 * 1024, "--max-body", help="Largest request body in bytes (then 413)."),
    read_timeout: float = typer.Option(
        15.0, "--read-timeout", help="Seconds a client has to send a request's headers, and its body (then 408)."
    ),
    default_strategy: str = typer.Option("self-ask", "--strategy", help="Strategy when a request names none."),
    traces: Path = typer.Option(
        None, "--traces", help="Keep run traces in this SQLite file (they survive a restart); default: in memory."
    ),
    principals: Path = typer.Option(
        None, "--principals", help="Principals file (TOML/JSON): each key or JWT bound to its scope (docs/server.md)."
    ),
    audit_log: Path = typer.Option(None, "--audit-log", help="Write an audit log here (JSON lines, rotated)."),
    audit_questions: bool = typer.Option(False, "--audit-questions", help="Put each run's question in the audit log."),
    embed_model: flags.EmbedModel = None,
    embed_base_url: flags.EmbedURL = None,
    rerank: flags.Rerank = None,
    rerank_base_url: flags.RerankURL = None,
    rerank_model: flags.RerankModel = None,
    rerank_depth: flags.RerankDepth = 20,
    log_level: str = typer.Option("info", "--log-level", help="uvicorn log level."),
) -> None:
    """Serve Sleuth over HTTP: POST /v1/ask, POST /v1/chat/completions, the web page at /, MCP at /mcp.

    With no --index or --corpus (and no $SLEUTH_INDEX/$SLEUTH_CORPUS) it serves the bundled
    quick-start corpus, as `sleuth ask` does, and says so at start and in GET /v1/sources."""
    from sleuth.config import env
    from sleuth.config import settings as env_settings
    from sleuth.extras import require

    require("server", "sleuth serve")
    require_llm(model, base_url, "sleuth serve")
    env_settings.set_default("OMP_WAIT_POLICY", "PASSIVE")  # llama.cpp must not spin on a small machine
    import uvicorn

    from sleuth.server import ServerConfigError, ServerSettings, create_app

    keys_raw = api_key if api_key is not None else (env("SLEUTH_SERVER_KEY") or "")
    keys = tuple(comma_list(keys_raw))
    sources, quickstart = served_sources(index, corpus)
    with user_errors(ServerConfigError):
        settings = ServerSettings(
            host=host,
            port=port,
            sources=tuple(sources),
            quickstart_source=quickstart,
            model=model,
            allowed_models=tuple(allow_model),
            base_url=base_url,
            api_keys=keys,
            max_concurrency=max_concurrency,
            timeout_s=timeout,
            max_body_bytes=max_body,
            read_timeout_s=read_timeout,
            default_strategy=default_strategy,
            trace_db=str(traces) if traces else None,
            principals=str(principals) if principals else None,
            audit_log=str(audit_log) if audit_log else None,
            audit_questions=audit_questions,
            embed_model=embed_model,
            embed_base_url=embed_base_url,
            rerank=rerank_option(rerank, rerank_base_url),
            rerank_model=rerank_model,
            rerank_depth=rerank_depth,
        )
        application = create_app(settings)
    rt = application.state.runtime
    open_runtime(rt, default_strategy, sources, quickstart)
    if quickstart:
        console_err.print(
            "the page and GET /v1/sources mark it as the quick-start corpus; "
            "`sleuth serve --index DIR` serves your own documents",
            soft_wrap=True,
        )
    where = f"http://{'[' + host + ']' if ':' in host else host}:{port}"
    console_err.print(
        f"Sleuth on {where}  (page: {where}/, OpenAI base URL: {where}/v1"
        + (f", MCP: {where}/mcp)" if any(getattr(r, "path", "") == "/mcp" for r in application.routes) else ")")
        + (
            "  auth: principals file"
            if principals
            else "  auth: bearer key (scope: whatever the request asks)"
            if keys
            else "  auth: none (loopback only)"
        )
    )
    from sleuth.server.protocol import header_timeout_protocol

    # uvicorn's own keep-alive timeout closes idle kept-alive connections; the protocol adds a
    # deadline on request headers, BodyLimit one on bodies (docs/server.md, "Limits")
    uvicorn.run(application, host=host, port=port, log_level=log_level, timeout_graceful_shutdown=5,
                timeout_keep_alive=5, http=header_timeout_protocol(settings.read_timeout_s))  # fmt: skip
