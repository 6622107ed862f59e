"""Errors in one shape (OpenAI's), the request-size guard and bearer-token auth."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from sleuth.text_input import BadText, check_text

from .principals import AuthError, Principal
from .schemas import ErrorResponse

log = logging.getLogger("sleuth.server")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        type: str = "invalid_request_error",
        *,
        param: str | None = None,
        code: str | None = None,
        trace_id: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        self.trace_id = trace_id
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        err: dict[str, Any] = {"message": self.message, "type": self.type, "param": self.param, "code": self.code}
        if self.trace_id:
            err["trace_id"] = self.trace_id
        return {"error": err}


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the errors a route can answer with."""
    what = {
        401: "missing or wrong bearer token (unknown key, invalid, expired or wrongly signed token)",
        403: "the request asks for more than its principal's scope (the message names the part)",
        404: "no such resource (or not visible to this key and scope)",
        413: "request body too large",
        422: "invalid request (the message says which field and why)",
        429: "too many runs in progress; see Retry-After",
        503: "the server cannot run this now",
        504: "the run went past the server's timeout (its partial trace is kept)",
    }
    return {c: {"model": ErrorResponse, "description": what.get(c, "error")} for c in codes}


def checked_param(value: str, param: str) -> str:
    """A path or query parameter checked by :mod:`sleuth.text_input` (422 naming it when refused)."""
    try:
        return check_text(value, param)
    except BadText as e:
        raise ApiError(422, f"{param}: {e.reason}", param=param) from None


# -- auth --------------------------------------------------------------------------------
bearer = HTTPBearer(auto_error=False, description="an API key (--api-key or the principals file) or a JWT")


def unauthorized(message: str) -> ApiError:
    return ApiError(
        401, message, "authentication_error", code="invalid_api_key", headers={"WWW-Authenticate": "Bearer"}
    )


def forbidden(message: str, param: str | None = "filters") -> ApiError:
    return ApiError(403, message, "permission_error", code="outside_scope", param=param)


def principal_of(request: Request) -> Principal:
    return request.state.principal


async def authenticate(request: Request, creds: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:
    """Route dependency: the principal behind the bearer credential (401 when there is none)."""
    token = creds.credentials if creds is not None and creds.scheme.lower() == "bearer" else None
    try:
        request.state.principal = request.app.state.principals.resolve(token)
    except AuthError as e:
        audit = request.app.state.runtime.audit
        if audit is not None:
            audit.denied(status=401, path=request.url.path, reason=str(e))
        raise unauthorized(str(e)) from None


# -- body size -----------------------------------------------------------------------------
class _TooLarge(Exception):
    pass


class BodyLimit:
    """Pure ASGI middleware: a request body over ``max_bytes`` gets 413 (declared
    length checked up front, streamed length counted), before any parsing."""

    DRAIN_CAP = 16 * 1024 * 1024

    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = None
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = None
        if declared is not None and declared > self.max_bytes:
            await self._drain(receive, 0)
            await self._reject(send)
            return
        seen = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal seen
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > self.max_bytes:
                    if msg.get("more_body"):
                        await self._drain(receive, seen)
                    raise _TooLarge
            return msg

        async def tracking_send(msg: Message) -> None:
            nonlocal started
            if msg["type"] == "http.response.start":
                started = True
            await send(msg)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except _TooLarge:
            if not started:
                await self._reject(send)

    async def _drain(self, receive: Receive, seen: int) -> None:
        # read (and drop) the rest so the client sees the answer instead of a reset connection
        while seen < self.DRAIN_CAP:
            msg = await receive()
            if msg["type"] != "http.request":
                return
            seen += len(msg.get("body", b""))
            if not msg.get("more_body"):
                return

    async def _reject(self, send: Send) -> None:
        body = json.dumps(
            ApiError(
                413, f"the request body is larger than the server's limit of {self.max_bytes} bytes", code="too_large"
            ).body()
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


# -- the last resort -----------------------------------------------------------------------
class CatchAll:
    """Pure ASGI middleware: an exception no handler took becomes the JSON 500 answer, and the
    connection stays open for the client's next request.  (Starlette's own last resort answers
    500 too, but then lets the exception reach the server, which closes a kept-alive connection
    under the client's next request: a "connection reset by peer".)  An exception in the middle
    of a body still ends the connection: the client must not take half a body for a whole one."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = {"started": False, "done": False}

        async def tracking_send(msg: Message) -> None:
            if msg["type"] == "http.response.start":
                state["started"] = True
            elif msg["type"] == "http.response.body" and not msg.get("more_body", False):
                state["done"] = True
            await send(msg)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as e:
            if state["started"] and not state["done"]:
                raise
            log.exception("unhandled error", exc_info=e)
            if not state["started"]:
                body = json.dumps(ApiError(500, "internal error; see the server log", "server_error").body()).encode()
                headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
                await send({"type": "http.response.start", "status": 500, "headers": headers})
                await send({"type": "http.response.body", "body": body})
