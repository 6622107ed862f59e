"""``/mcp`` in ``sleuth serve``: the MCP server over Streamable HTTP, authenticated exactly as a ``/v1`` route.

Each tool call runs as the principal of its request; a session belongs to the principal that opened it, and
any other caller naming its id gets 404 (:func:`session_user`).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import FastAPI
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.mcpserver import Context
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
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


def session_user(principal: Principal) -> AuthenticatedUser:
    """The identity the SDK's session manager binds a session to (``scope["user"]``): the
    principal's stable id, never its key or token.  A request naming a session that another
    principal opened is then answered 404, exactly as an unknown session, for every method
    (a tool call, ``notifications/cancelled``, the GET stream, DELETE)."""
    return AuthenticatedUser(AccessToken(token="", client_id=principal.id, scopes=[], subject=principal.id))


class Authenticated:
    """ASGI app: authenticate the request (401 as on /v1), bind it to its principal, then hand it
    to the MCP transport.  A 404 for a session id the request names is audited."""

    def __init__(self, app: Any, rt: Runtime | None = None) -> None:
        self.app = app
        self.rt = rt

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        request = Request(scope, receive)
        try:
            await authenticate(request, await bearer(request))
        except ApiError as e:
            response = SafeJSONResponse(e.body(), status_code=e.status, headers=e.headers)
            await response(scope, receive, send)
            return
        principal = principal_of(request)
        scope["user"] = session_user(principal)
        named = request.headers.get(MCP_SESSION_ID_HEADER)
        audit = self.rt.audit if self.rt is not None else None
        if named is None or audit is None:
            await self.app(scope, receive, send)
            return

        async def watching(message: Any) -> None:
            if message["type"] == "http.response.start" and message["status"] == 404:
                audit.denied(status=404, path=PATH, principal=principal,
                             reason=f"{scope.get('method')} for an MCP session this caller did not open (or none)")  # fmt: skip
            await send(message)

        await self.app(scope, receive, watching)


def mount_mcp(app: FastAPI, rt: Runtime) -> Callable[[], contextlib.AbstractAsyncContextManager[None]]:
    """Add ``/mcp`` to ``app``; returns what the app's lifespan must enter (the session manager)."""
    server = build_server(rt, caller, endpoint=PATH, local=False)
    # builds the SDK's session manager (with DNS-rebinding protection on a loopback host);
    # its own Starlette app is not used: /mcp is a route of the FastAPI app, behind Authenticated
    server.streamable_http_app(streamable_http_path=PATH, host=rt.settings.host,
                               max_request_body_size=rt.settings.max_body_bytes)  # fmt: skip
    manager = server.session_manager
    app.router.routes.append(
        Route(PATH, endpoint=Authenticated(StreamableHTTPASGIApp(manager), rt), include_in_schema=False)
    )

    @contextlib.asynccontextmanager
    async def running() -> AsyncIterator[None]:
        async with manager.run():
            yield

    return running
