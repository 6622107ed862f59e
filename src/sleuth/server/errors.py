"""Errors in one shape (OpenAI's), the request-size guard and bearer-token auth."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import KW_ONLY, dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from sleuth.text_input import BadText, check_text

from .principals import OPEN, AuthError, Principal
from .schemas import ErrorResponse

log = logging.getLogger("sleuth.server")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


@dataclass(eq=False)
class ApiError(Exception):
    status: int
    message: str
    type: str = "invalid_request_error"
    _: KW_ONLY
    param: str | None = None
    code: str | None = None
    trace_id: str | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__init__(self.message)

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


#: Authorization schemes other than Bearer that an error message may name
KNOWN_SCHEMES = frozenset({"basic", "digest", "token", "negotiate", "ntlm", "apikey", "api-key", "hoba", "mutual"})


def bearer_token(request: Request) -> str | None:
    """The bearer credential of a request, None without an ``Authorization`` header; raises
    :class:`AuthError` for a header that is there but is not ``Bearer <credential>`` (``Basic ...``,
    ``Token ...``, an empty ``Bearer``): a credential the server cannot read is refused, never
    taken for no credential (which could be the anonymous scope)."""
    raw = request.headers.get("authorization")
    if raw is None:
        return None
    scheme, _, credential = raw.strip().partition(" ")
    if scheme.lower() != "bearer":
        # name a known scheme; anything else may be a bare key, which must not be echoed or logged
        shown = f" {scheme!r}" if scheme.lower() in KNOWN_SCHEMES else ""
        raise AuthError(
            f"the Authorization scheme{shown} is not supported; send 'Authorization: Bearer <key or token>'"
        )
    credential = credential.strip()
    if not credential:
        raise AuthError("the Authorization header holds 'Bearer' and no credential")
    return credential


async def authenticate(request: Request, creds: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:
    """Route dependency: the principal behind the bearer credential (401 when there is none, or when
    the ``Authorization`` header is not a bearer credential).  ``creds`` is only there so that the
    OpenAPI spec shows the bearer scheme; the header is read by :func:`bearer_token`."""
    principals = request.app.state.principals
    try:
        token = bearer_token(request) if principals.anonymous is not OPEN else None
        request.state.principal = principals.resolve(token)
    except AuthError as e:
        audit = request.app.state.runtime.audit
        if audit is not None:
            audit.denied(status=401, path=request.url.path, reason=str(e))
        raise unauthorized(str(e)) from None


# -- body size and read timeout ----------------------------------------------------------------
OnRefuse = Callable[[int, str, str], None]


async def _send_error(send: Send, err: ApiError, *, close: bool = True) -> None:
    """Answer with ``err`` from a pure ASGI middleware (``close``: the connection ends with the answer)."""
    body = json.dumps(err.body()).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": err.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class BodyLimit:
    """Pure ASGI middleware: reads the whole body first, answering 413 past ``max_bytes`` (declared or chunked)
    and 408 when it does not arrive within ``read_timeout_s``; ``on_refuse(status, path, reason)`` hears of
    each refusal (docs/reliability.md).
    """

    DRAIN_CAP = 16 * 1024 * 1024
    DRAIN_S = 2.0

    def __init__(self, app: Any, max_bytes: int, read_timeout_s: float = 15.0, on_refuse: OnRefuse | None = None):
        self.app = app
        self.max_bytes = max_bytes
        self.read_timeout_s = read_timeout_s
        self.on_refuse = on_refuse

    async def _refuse(self, scope: Scope, send: Send, err: ApiError, reason: str) -> None:
        log.warning("refused %s %s: %s", scope.get("method"), scope.get("path"), reason)
        if self.on_refuse is not None:
            self.on_refuse(err.status, str(scope.get("path", "")), reason)
        await _send_error(send, err)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = None
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                with contextlib.suppress(ValueError):
                    declared = int(value)
        limit = f"the request body is larger than the server's limit of {self.max_bytes} bytes"
        too_large = ApiError(413, limit, code="too_large")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.read_timeout_s
        if declared is not None and declared > self.max_bytes:
            await self._drain(receive, 0, min(deadline, loop.time() + self.DRAIN_S))
            await self._refuse(scope, send, too_large, f"declared body of {declared} bytes")
            return
        chunks: list[bytes] = []
        seen = 0
        first: Message | None = None
        while True:
            try:
                msg = await asyncio.wait_for(receive(), timeout=max(0.0, deadline - loop.time()))
            except TimeoutError:
                message = f"the request body did not arrive within the server's {self.read_timeout_s:g} s read timeout"
                reason = f"body not received within {self.read_timeout_s:g} s ({seen} bytes)"
                await self._refuse(scope, send, ApiError(408, message, code="timeout"), reason)
                return
            if msg["type"] != "http.request":  # the client left before sending its body
                first = msg
                break
            body = msg.get("body", b"")
            seen += len(body)
            if seen > self.max_bytes:
                if msg.get("more_body"):
                    await self._drain(receive, seen, min(deadline, loop.time() + self.DRAIN_S))
                await self._refuse(scope, send, too_large, f"streamed body of more than {self.max_bytes} bytes")
                return
            chunks.append(body)
            if not msg.get("more_body"):
                break
        if first is None:
            first = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        pending: list[Message] = [first]

        async def replay() -> Message:
            if pending:
                return pending.pop()
            return await receive()

        await self.app(scope, replay, send)

    async def _drain(self, receive: Receive, seen: int, until: float) -> None:
        # read (and drop) what arrives, for a while, so an honest client that sends a big body sees
        # the answer instead of a reset connection; a silent one is answered when the time is up
        loop = asyncio.get_running_loop()
        while seen < self.DRAIN_CAP and loop.time() < until:
            try:
                msg = await asyncio.wait_for(receive(), timeout=until - loop.time())
            except TimeoutError:
                return
            if msg["type"] != "http.request":
                return
            seen += len(msg.get("body", b""))
            if not msg.get("more_body"):
                return


# -- credentials in the URL --------------------------------------------------------------------
#: query parameters that carry a credential (compared case-insensitively, "-" read as "_")
CREDENTIAL_PARAMS = frozenset(
    {"api_key", "apikey", "key", "token", "access_token", "id_token", "auth", "authorization", "bearer", "jwt",
     "password", "passwd", "secret", "client_secret", "sleuth_key", "x_api_key"}
)  # fmt: skip


def credential_params(query: bytes) -> list[str]:
    """The names of the credential parameters in a raw query string."""
    found = []
    for name, _ in parse_qsl(query.decode("latin-1"), keep_blank_values=True):
        if name.strip().lower().replace("-", "_") in CREDENTIAL_PARAMS:
            found.append(name)
    return found


class NoCredentialsInURL:
    """Pure ASGI middleware: a request carrying a credential in its query string gets 400 (a URL
    lands in access logs, proxies and browser history), and the query string is blanked before
    anything can log it (uvicorn's access log reads the same scope)."""

    def __init__(self, app: Any, on_refuse: OnRefuse | None = None) -> None:
        self.app = app
        self.on_refuse = on_refuse

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket") and scope.get("query_string"):
            names = credential_params(scope["query_string"])
            if names:
                scope["query_string"] = b"credentials-removed"
                if self.on_refuse is not None:
                    self.on_refuse(400, str(scope.get("path", "")), f"credential in the URL ({', '.join(names)})")
                if scope["type"] == "http":
                    message = (
                        f"credentials must not be sent in the URL (query parameter {names[0]!r}); send them in "
                        "the 'Authorization: Bearer <key>' header, and replace a key that was sent this way"
                    )
                    await _send_error(send, ApiError(400, message, code="credentials_in_url"))
                    return
        await self.app(scope, receive, send)


# -- the last resort -----------------------------------------------------------------------
class CatchAll:
    """Pure ASGI middleware: an exception no handler took becomes the JSON 500 answer and the kept-alive
    connection stays open (Starlette's last resort would reset it); one in the middle of a body still ends it.
    """

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
                err = ApiError(500, "internal error; see the server log", "server_error")
                await _send_error(send, err, close=False)
