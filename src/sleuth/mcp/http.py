"""``/mcp`` in ``sleuth serve``: the MCP server over Streamable HTTP, behind the REST routes' auth.

Each HTTP request to ``/mcp`` is authenticated exactly as a ``/v1`` route is (the same
:func:`~sleuth.server.errors.authenticate` over the ``Authorization: Bearer`` header and the
server's principals; 401 in the same JSON shape), and each tool call runs as the principal
of the request that carries it, with that principal's widest scope."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import FastAPI
from mcp.server.mcpserver import Context
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from starlette.requests import Request
from starlette.routing import Route

from sleuth.server.encoding import SafeJSONResponse
from sleuth.server.errors import ApiError, authenticate, bearer, principal_of
from sleuth.server.principals import Principal
from sleuth.server.runtime import Runtime

from .server import build_server

PATH = "/mcp"


def caller(ctx: Context) -> Principal:
    """The principal :class:`Authenticated` resolved for the HTTP request carrying this call."""
    request = ctx.request_context.request
    if not isinstance(request, Request):
        raise RuntimeError("an MCP call over HTTP without its HTTP request")
    return principal_of(request)


class Authenticated:
    """ASGI app: authenticate the request (401 as on /v1), then hand it to the MCP transport."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        request = Request(scope, receive)
        try:
            await authenticate(request, await bearer(request))
        except ApiError as e:
            response = SafeJSONResponse(e.body(), status_code=e.status, headers=e.headers)
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


def mount_mcp(app: FastAPI, rt: Runtime) -> Callable[[], contextlib.AbstractAsyncContextManager[None]]:
    """Add ``/mcp`` to ``app``; returns what the app's lifespan must enter (the session manager)."""
    server = build_server(rt, caller, endpoint=PATH, local=False)
    # builds the SDK's session manager (with DNS-rebinding protection on a loopback host);
    # its own Starlette app is not used: /mcp is a route of the FastAPI app, behind Authenticated
    server.streamable_http_app(streamable_http_path=PATH, host=rt.settings.host,
                               max_request_body_size=rt.settings.max_body_bytes)  # fmt: skip
    manager = server.session_manager
    app.router.routes.append(
        Route(PATH, endpoint=Authenticated(StreamableHTTPASGIApp(manager)), include_in_schema=False)
    )

    @contextlib.asynccontextmanager
    async def running() -> AsyncIterator[None]:
        async with manager.run():
            yield

    return running
