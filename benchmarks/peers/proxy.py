"""A counting proxy in front of the OpenAI-compatible LLM server.

Every row (Sleuth's and each peer's) talks to the model through this proxy, so LLM calls,
prompt tokens (processed and all), generated tokens and the model's own time are counted the
same way for all of them.  ``GET /_counters``
answers the running totals; a row reads them before and after each question.
Streamed answers are buffered and passed on whole (their last events carry the usage).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any

import httpx
from benchmarks.peers.local_http import LocalService

from sleuth.llm.wire import usage_from

__all__ = ["FIGURES", "CountingProxy", "figures_of", "usage_of"]

#: what the proxy sums over the answers, besides calls and errors
FIGURES = ("prompt_tokens", "processed_prompt_tokens", "completion_tokens", "model_ms")

_HOP_HEADERS = {"host", "content-length", "transfer-encoding", "connection", "accept-encoding"}


def figures_of(body: bytes, content_type: str) -> dict[str, float]:
    """What one answer reports: ``prompt_tokens``, ``processed_prompt_tokens``, ``completion_tokens``
    and ``model_ms`` (llama.cpp's ``timings``: prompt evaluation plus generation, the model's own
    time); zeros where it reports none.  A stream's last event that carries usage counts."""
    datas: list[dict[str, Any]] = []
    text = body.decode("utf-8", "replace")
    if "event-stream" in content_type:
        for line in text.splitlines():
            if line.startswith("data:") and line[5:].strip() not in ("", "[DONE]"):
                try:
                    datas.append(json.loads(line[5:]))
                except json.JSONDecodeError:
                    continue
    else:
        try:
            datas.append(json.loads(text))
        except json.JSONDecodeError:
            datas = []
    best = dict.fromkeys(FIGURES, 0.0)
    for d in datas:
        if isinstance(d, dict) and (d.get("usage") or d.get("timings")):
            u = usage_from(d)
            t = d.get("timings") if isinstance(d.get("timings"), dict) else {}
            try:
                ms = float(t.get("prompt_ms") or 0) + float(t.get("predicted_ms") or 0)
            except (TypeError, ValueError):
                ms = 0.0
            best = {
                "prompt_tokens": u.prompt_tokens,
                "processed_prompt_tokens": u.processed_prompt_tokens,
                "completion_tokens": u.completion_tokens,
                "model_ms": ms,
            }
    return best


def usage_of(body: bytes, content_type: str) -> tuple[int, int]:
    """(prompt tokens, processed prompt tokens) reported in one answer; (0, 0) when none is."""
    f = figures_of(body, content_type)
    return int(f["prompt_tokens"]), int(f["processed_prompt_tokens"])


class CountingProxy(LocalService):
    """Forwards every request to ``upstream`` and counts completions and their prompt tokens."""

    what = "proxy"

    def __init__(self, upstream: str, timeout: float = 900.0) -> None:
        super().__init__()
        self.upstream = upstream.rstrip("/")
        self.calls = 0
        self.errors = 0
        self.sums = dict.fromkeys(FIGURES, 0.0)
        self._lock = threading.Lock()
        self._client = httpx.Client(timeout=timeout)

    def retarget(self, upstream: str) -> None:
        """Forward to ``upstream`` from now on (a model server started afresh); the counts go on."""
        self.upstream = upstream.rstrip("/")

    def counters(self) -> dict[str, float]:
        with self._lock:
            out: dict[str, float] = {"llm_calls": self.calls, "llm_errors": self.errors}
            out.update((k, round(v, 1) if k == "model_ms" else int(v)) for k, v in self.sums.items())
            return out

    def _record(self, path: str, status: int, body: bytes, content_type: str) -> None:
        if not path.rstrip("/").endswith("completions"):
            return
        figures = figures_of(body, content_type)
        with self._lock:
            self.calls += 1
            self.errors += status >= 400
            for k, v in figures.items():
                self.sums[k] += v

    def handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _reply(self, status: int, body: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _forward(self, method: str) -> None:
                if self.path == "/_counters":
                    self._reply(200, json.dumps(proxy.counters()).encode(), "application/json")
                    return
                n = int(self.headers.get("Content-Length") or 0)
                data = self.rfile.read(n) if n else b""
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_HEADERS}
                try:
                    r = proxy._client.request(method, proxy.upstream + self.path, content=data, headers=headers)
                except httpx.HTTPError as e:
                    proxy._record(self.path, 502, b"", "")
                    self._reply(502, json.dumps({"error": f"proxy: {e}"}).encode(), "application/json")
                    return
                ctype = r.headers.get("content-type", "application/json")
                proxy._record(self.path, r.status_code, r.content, ctype)
                self._reply(r.status_code, r.content, ctype)

            def do_GET(self) -> None:
                self._forward("GET")

            def do_POST(self) -> None:
                self._forward("POST")

        return Handler

    def stop(self) -> None:
        super().stop()
        self._client.close()
