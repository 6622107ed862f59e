"""A tiny local HTTP search endpoint over Sleuth's indexes, so every peer retrieves the same passages.

``GET /search/<name>?q=...&k=5`` answers ``{"passages": [{"id", "title", "text", "score"}, ...]}``
from ``retrievers[name].search(q, k)``; every peer's retriever adapter calls it over HTTP from its
own virtual environment.  Searches are counted per name.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from benchmarks.peers.local_http import LocalService

__all__ = ["SearchEndpoint"]


class SearchEndpoint(LocalService):
    """Serves ``retrievers`` (name -> anything with ``search(query, k)`` returning Passages)."""

    what = "search endpoint"

    def __init__(self, retrievers: dict[str, Any]) -> None:
        super().__init__()
        self.retrievers = retrievers
        self.searches: Counter[str] = Counter()
        self._lock = threading.Lock()

    def answer(self, name: str, query: str, k: int) -> dict[str, Any]:
        retriever = self.retrievers[name]
        with self._lock:  # one search at a time: the index is shared
            self.searches[name] += 1
            passages = retriever.search(query, k=k)
        return {"passages": [{"id": p.id, "title": p.title, "text": p.text, "score": float(p.score)} for p in passages]}

    def handler(self) -> type[BaseHTTPRequestHandler]:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def _reply(self, status: int, obj: Any) -> None:
                body = json.dumps(obj, ensure_ascii=False).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                segs = parts.path.strip("/").split("/")
                args = parse_qs(parts.query)
                if len(segs) != 2 or segs[0] != "search" or segs[1] not in endpoint.retrievers:
                    self._reply(
                        404, {"error": f"unknown path {parts.path}; use /search/<{'|'.join(endpoint.retrievers)}>"}
                    )
                    return
                query = (args.get("q") or [""])[0]
                try:
                    k = int((args.get("k") or ["5"])[0])
                except ValueError:
                    self._reply(400, {"error": "k must be an integer"})
                    return
                if not query.strip():
                    self._reply(400, {"error": "q must not be empty"})
                    return
                self._reply(200, endpoint.answer(segs[1], query, k))

        return Handler
