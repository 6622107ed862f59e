"""The app factory: ``create_app(settings)`` -> a FastAPI app serving the API and the page."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from sleuth import __version__
from sleuth.llm.base import LLM
from sleuth.search.base import Retriever

from . import ask, openai_compat
from .encoding import SafeJSONResponse as JSONResponse  # every JSON answer can be encoded
from .errors import (
    ApiError,
    BodyLimit,
    CatchAll,
    NoCredentialsInURL,
    authenticate,
    checked_param,
    error_responses,
    principal_of,
)
from .principals import ANONYMOUS, principals_for
from .runtime import Runtime, StrategyFactory, owner_of
from .schemas import FIELD_LIMITS, AskResult, Health, SourceList, StrategyList
from .service import scoped
from .settings import QUICKSTART_NOTE, ServerSettings

log = logging.getLogger("sleuth.server")
STATIC = Path(__file__).with_name("static")
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def create_app(
    settings: ServerSettings | None = None,
    *,
    llm: LLM | None = None,
    retrievers: Mapping[str, Retriever] | None = None,
    strategies: Mapping[str, StrategyFactory] | None = None,
    open_on_startup: bool = True,
) -> FastAPI:
    """Build the app.  ``llm``/``retrievers``/``strategies`` replace what the settings would open
    (an embedding program that already has them); by default everything comes from the settings.

    Raises :class:`~sleuth.server.settings.ServerConfigError` for a configuration it refuses
    (a non-loopback host without an API key)."""
    settings = settings or ServerSettings()
    settings.check_bind()
    principals = principals_for(settings)
    if settings.api_keys:
        log.warning("API keys without a principals file carry no scope: each request states its own (--principals)")
    rt = Runtime(settings, llm=llm, retrievers=retrievers, strategies=strategies)
    mcp_running: list[Any] = []

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if open_on_startup and not rt.opened:
            try:
                await asyncio.to_thread(rt.open)
            except Exception as e:  # kept for /healthz; requests report it as a finish reason
                log.error("could not open every resource: %s", e)
        async with contextlib.AsyncExitStack() as stack:
            for running in mcp_running:
                await stack.enter_async_context(running())
            yield
        rt.shutdown()

    app = FastAPI(
        title="Sleuth",
        version=__version__,
        description="Multi-hop question answering by interleaving LLM reasoning with search. "
        "All /v1 routes need `Authorization: Bearer <key or JWT>` when the server has keys or principals; "
        "each key or token reads only its principal's scope.",
        lifespan=lifespan,
        docs_url=None,  # Swagger UI loads from a CDN; the spec is at /openapi.json
        redoc_url=None,
        default_response_class=JSONResponse,
    )
    app.state.runtime = rt
    app.state.principals = principals

    def refused(status: int, path: str, reason: str) -> None:  # what the middlewares refuse, audited
        if rt.audit is not None:
            rt.audit.denied(status=status, path=path, reason=reason)

    app.add_middleware(
        BodyLimit, max_bytes=settings.max_body_bytes, read_timeout_s=settings.read_timeout_s, on_refuse=refused
    )
    app.add_middleware(NoCredentialsInURL, on_refuse=refused)
    app.add_middleware(CatchAll)  # added last: the outermost
    _errors(app)

    guarded = [Depends(authenticate)]
    app.include_router(ask.router, dependencies=guarded, tags=["sleuth"])
    app.include_router(openai_compat.router, dependencies=guarded, tags=["openai"])

    @app.get(
        "/v1/strategies",
        response_model=StrategyList,
        tags=["sleuth"],
        dependencies=guarded,
        responses=error_responses(401),
    )
    async def strategies_route() -> dict[str, Any]:
        return {"default": settings.default_strategy, "strategies": rt.strategy_info()}

    @app.get(
        "/v1/sources", response_model=SourceList, tags=["sleuth"], dependencies=guarded, responses=error_responses(401)
    )
    async def sources_route(request: Request) -> dict[str, Any]:
        principal = principal_of(request)
        names = [n for n in rt.sources() if principal.may_use(n)]
        qs = settings.quickstart_source
        return {
            "sources": [
                {
                    "name": n,
                    "kind": rt.source_kind(n),
                    "default": i == 0,
                    "lang": _lang(rt, n),
                    "quickstart": n == qs,
                    "note": QUICKSTART_NOTE if n == qs else "",
                }
                for i, n in enumerate(names)
            ]
        }

    @app.get(
        "/v1/traces/{trace_id}",
        response_model=AskResult,
        tags=["sleuth"],
        dependencies=guarded,
        summary="A finished run, for the same principal and the same scope only",
        responses=error_responses(401, 403, 404, 422),
    )
    async def trace_route(
        trace_id: str,
        request: Request,
        filters: list[str] = Query(
            default=[], description="the scope the run was asked with, as expressions (filters=acl=all)"
        ),
    ) -> Any:
        checked_param(trace_id, "trace_id")
        for expr in filters:
            checked_param(expr, "filters")
        scope = scoped(rt, request, filters or None)
        principal = principal_of(request)
        found = rt.traces.get(trace_id, owner_of(principal, scope))
        if found is None:
            why = " (runs of callers without a key are not kept)" if principal.kind == ANONYMOUS else ""
            raise ApiError(
                404, f"no trace {trace_id!r} for this key and scope{why}", "not_found_error", code="not_found"
            )
        return JSONResponse(found)

    @app.get("/healthz", response_model=Health, tags=["meta"])
    async def healthz() -> dict[str, Any]:
        status = "starting" if open_on_startup and not rt.opened else ("degraded" if rt.errors else "ok")
        return {
            "status": status,
            "version": __version__,
            "model": rt.model_name,
            "active": rt.active,
            "max_concurrency": settings.max_concurrency,
            "errors": rt.errors,
        }

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC / "index.html", headers=PAGE_HEADERS)

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    mcp_running.extend(_mcp(app, rt))
    return app


def _mcp(app: FastAPI, rt: Runtime) -> list[Any]:
    """``/mcp`` (the MCP server over Streamable HTTP) when the ``mcp`` extra is installed."""
    import importlib.util

    if importlib.util.find_spec("mcp") is None:
        log.info("no /mcp: the mcp package is not installed (pip install 'sleuth[mcp]')")
        return []
    from sleuth.mcp.http import mount_mcp

    return [mount_mcp(app, rt)]


def _lang(rt: Runtime, name: str) -> str:
    """The language of a source's documents (``en``/``zh``, from up to 200 passages; "" when it cannot
    be told, e.g. a web or remote source), so the page can greet in it.  Read once per source."""
    langs: dict[str, str] = rt.__dict__.setdefault("_source_langs", {})
    if name not in langs:
        from sleuth.lang import detect_lang

        text = ""
        try:
            r = rt.retriever(name)
        except Exception:  # a source that cannot be opened reports itself elsewhere (/healthz)
            r = None
        r = getattr(r, "inner", r)
        if hasattr(r, "store"):
            try:
                text = "".join(p.text[:200] for _, p in itertools.islice(r.store.iter_live(batch=200), 200))
            except Exception:  # a damaged store: the page just keeps its default language
                text = ""
        langs[name] = detect_lang(text) if text else ""
    return langs[name]


def _errors(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(_: Request, e: ApiError) -> JSONResponse:
        return JSONResponse(e.body(), status_code=e.status, headers=e.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, e: RequestValidationError) -> JSONResponse:
        errs = e.errors()
        first = errs[0] if errs else {}
        loc = [str(x) for x in first.get("loc", ()) if x != "body"]
        where = ".".join(loc) or "body"
        msg = str(first.get("msg", "invalid request")).removeprefix("Value error, ")
        if first.get("type") == "extra_forbidden":
            msg += ' (a strategy\'s own options go in "options")'
        limit = FIELD_LIMITS.get(where)
        if limit:
            msg += f" ({where} takes {limit})"
        more = f" (and {len(errs) - 1} more problems)" if len(errs) > 1 else ""
        err = ApiError(422, f"{where}: {msg}{more}", param=where)
        return JSONResponse(err.body(), status_code=422)

    @app.exception_handler(Exception)
    async def crashed(_: Request, e: Exception) -> JSONResponse:
        log.exception("unhandled error", exc_info=e)
        return JSONResponse(ApiError(500, "internal error; see the server log", "server_error").body(), status_code=500)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, e: StarletteHTTPException) -> JSONResponse:
        kind = "not_found_error" if e.status_code == 404 else "invalid_request_error"
        return JSONResponse(
            ApiError(e.status_code, str(e.detail), kind).body(),
            status_code=e.status_code,
            headers=getattr(e, "headers", None),
        )
