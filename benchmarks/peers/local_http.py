"""A small HTTP service on an ephemeral port of 127.0.0.1, served by a daemon thread.

The harness's counting proxy and search endpoint are both one: a subclass builds its request
handler class in :meth:`LocalService.handler` and gets ``url``, ``start``/``stop`` and the
``with`` form from here.
"""

from __future__ import annotations

import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that left before its answer (a stopped peer adapter) is not an error worth a
        traceback; anything else is reported as the standard library does."""
        if isinstance(sys.exc_info()[1], ConnectionError):  # BrokenPipeError, ConnectionResetError, ...
            return
        super().handle_error(request, client_address)


class LocalService:
    #: what :attr:`url` calls the service in its "not started" message
    what = "service"

    def __init__(self) -> None:
        self._httpd: ThreadingHTTPServer | None = None

    def handler(self) -> type[BaseHTTPRequestHandler]:
        raise NotImplementedError

    @property
    def url(self) -> str:
        assert self._httpd is not None, f"{self.what} not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def start(self) -> Self:
        self._httpd = _Server(("127.0.0.1", 0), self.handler())
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
