"""uvicorn's HTTP/1.1 protocol with a deadline on request headers (:func:`header_timeout_protocol`).

uvicorn would hold a silent new connection open forever; here the next request's headers must be complete
within ``timeout_s`` or the connection is answered 408 and closed.  The body's deadline is
:class:`~sleuth.server.errors.BodyLimit`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger("sleuth.server")

_BODY = b'{"error": {"message": "the request headers did not arrive in time", "type": "invalid_request_error"}}'
TIMEOUT_RESPONSE = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
    + f"content-length: {len(_BODY)}\r\n\r\n".encode()
    + _BODY
)


class HeaderDeadline(H11Protocol):
    """:class:`H11Protocol` whose connections must send complete headers within ``header_timeout_s``."""

    header_timeout_s: float = 15.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def _arm(self) -> None:
        self._disarm()
        self._waiting_for = self.cycle  # a new request starts a new cycle: then the headers came
        self._header_timer: asyncio.TimerHandle | None = self.loop.call_later(self.header_timeout_s, self._expired)

    def _disarm(self) -> None:
        timer = getattr(self, "_header_timer", None)
        if timer is not None:
            timer.cancel()
            self._header_timer = None

    def _expired(self) -> None:
        self._header_timer = None
        if self.cycle is not self._waiting_for or self.transport.is_closing():
            return  # the headers arrived; the request's body has its own deadline
        log.warning("closed a connection from %s: no complete request headers within %g s",
                    self.client[0] if self.client else "?", self.header_timeout_s)  # fmt: skip
        try:
            self.transport.write(TIMEOUT_RESPONSE)
        finally:
            self.transport.close()

    def on_response_complete(self) -> None:
        self._arm()  # before a pipelined request (handled inside) starts its cycle
        super().on_response_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)


def header_timeout_protocol(timeout_s: float) -> type[Any]:
    """The protocol class for ``uvicorn.run(..., http=...)`` with this header deadline."""
    return type("SleuthHTTP", (HeaderDeadline,), {"header_timeout_s": float(timeout_s)})
