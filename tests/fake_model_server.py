"""A real embedding / rerank HTTP server on 127.0.0.1 for tests and benchmarks.

``/v1/embeddings`` (OpenAI body: ``model``, ``input``) answers with vectors from

* ``embedder=`` an embedder object (``embed(texts, is_query=...)``), e.g. Sleuth's bundled
  all-MiniLM-L6-v2 or multilingual-e5-small: the bundled models served over HTTP. A text
  sent with e5's ``query: `` / ``passage: `` prefix is embedded as that kind (the prefix is
  the engine's own);
* else a deterministic bag-of-words vector of ``dim`` numbers (hashed words), so that texts
  sharing words are close.

``/v1/rerank`` and ``/rerank`` answer in the Jina/Cohere shape (``documents`` ->
``results[].relevance_score``); with ``rerank_shape="tei"`` only ``/rerank`` answers, in
TEI's shape (``texts`` -> ``[{index, score}]``). The score is the share of the query's
words found in the document.

Capacity model: ``slots`` requests are served at once (others wait), each holds its
slot ``batch_latency_s`` (plus ``text_latency_s`` per text): the server's capacity is
``slots * batch / batch_latency_s`` texts per second, and ``stats.busy_s`` sums the
slot time used.

Faults, queued with ``push_faults(...)`` (one per request) or for every request with
``fault=``: ``429`` (``Retry-After: 0``), ``500``, ``401``, ``404``, ``slow`` (sleeps
``slow_s``), ``wrong-dim`` (vectors one number short), ``short`` (one embedding
missing), ``malformed`` (not JSON).  ``GET /stats`` returns the counters.  ``cheap=True``
makes each vector one hash of its text (at most 64 numbers), for throughput runs where the
server itself must cost next to nothing.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

_WORD = re.compile(r"\w+", re.UNICODE)


def bow_vector(text: str, dim: int) -> np.ndarray:
    v = np.zeros(dim, dtype=np.float32)
    for w in _WORD.findall(text.lower()):
        h = int.from_bytes(hashlib.blake2b(w.encode(), digest_size=8).digest(), "little")
        v[h % dim] += 1.0 if (h >> 32) & 1 else -1.0
    n = float(np.linalg.norm(v))
    if n == 0:
        v[0] = 1.0
        return v
    return v / n


@dataclass
class Stats:
    requests: int = 0
    texts: int = 0
    busy_s: float = 0.0
    inputs: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    auth: list[str] = field(default_factory=list)


class ModelServer:
    def __init__(
        self,
        *,
        embedder: Any = None,
        dim: int = 64,
        slots: int = 64,
        batch_latency_s: float = 0.0,
        text_latency_s: float = 0.0,
        fault: str = "ok",
        slow_s: float = 3.0,
        rerank_shape: str = "jina",
        keep_inputs: bool = True,
        model: str = "fake-embed",
        cheap: bool = False,
    ) -> None:
        self.embedder = embedder
        self.dim = int(getattr(embedder, "dim", dim))
        self.slots = threading.Semaphore(slots)
        self.n_slots = slots
        self.batch_latency_s = batch_latency_s
        self.text_latency_s = text_latency_s
        self.fault = fault
        self.slow_s = slow_s
        self.rerank_shape = rerank_shape
        self.keep_inputs = keep_inputs
        self.model = model
        self.cheap = cheap
        self.stats = Stats()
        self._faults: deque[str] = deque()
        self._lock = threading.Lock()
        self._embed_lock = threading.Lock()  # an in-process model runs one batch at a time
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                pass

            def do_GET(self) -> None:
                if self.path.rstrip("/") == "/stats":
                    st = server.stats
                    self._json(200, {"requests": st.requests, "texts": st.texts, "busy_s": st.busy_s})
                elif self.path.rstrip("/") in ("/v1/models", "/models"):
                    self._json(200, {"object": "list", "data": [{"id": server.model, "object": "model"}]})
                else:
                    self._json(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                n = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(n)
                server.stats.paths.append(self.path)
                server.stats.auth.append(self.headers.get("authorization") or "")
                fault = server._next_fault()
                if fault == "slow":
                    time.sleep(server.slow_s)
                if fault in ("429", "500", "401", "404"):
                    code = int(fault)
                    extra = {"Retry-After": "0"} if code == 429 else {}
                    return self._json(code, {"error": {"message": f"fault {fault}"}}, extra)
                if fault == "malformed":
                    return self._raw(200, b"<html>not json")
                try:
                    body = json.loads(raw)
                except ValueError:
                    return self._json(400, {"error": {"message": "bad json"}})
                path = self.path.rstrip("/")
                if path in ("/v1/embeddings", "/embeddings"):
                    return self._embeddings(body, fault)
                if path == "/v1/rerank" and server.rerank_shape != "tei":
                    return self._rerank(body, "jina")
                if path == "/rerank":
                    return self._rerank(body, server.rerank_shape)
                return self._json(404, {"error": {"message": f"no route {path}"}})

            def _embeddings(self, body: dict[str, Any], fault: str) -> None:
                texts = body.get("input")
                if isinstance(texts, str):
                    texts = [texts]
                if not isinstance(texts, list) or not texts or not all(isinstance(t, str) and t for t in texts):
                    return self._json(400, {"error": {"message": "input must be non-empty strings"}})
                with server.slots:
                    t0 = time.perf_counter()
                    vecs = server._embed(texts)
                    rest = server.batch_latency_s + server.text_latency_s * len(texts) - (time.perf_counter() - t0)
                    if rest > 0:
                        time.sleep(rest)
                    with server._lock:
                        server.stats.busy_s += time.perf_counter() - t0
                with server._lock:
                    server.stats.requests += 1
                    server.stats.texts += len(texts)
                    if server.keep_inputs:
                        server.stats.inputs.extend(texts)
                if fault == "wrong-dim":
                    vecs = vecs[:, :-1]
                data = [{"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vecs)]
                if fault == "short":
                    data = data[:-1]
                self._json(200, {"object": "list", "data": data, "model": body.get("model", "")})

            def _rerank(self, body: dict[str, Any], shape: str) -> None:
                query = str(body.get("query", ""))
                docs = body.get("texts") if shape == "tei" else body.get("documents")
                if not isinstance(docs, list):
                    return self._json(422, {"error": {"message": "documents missing"}})
                with server._lock:
                    server.stats.requests += 1
                    server.stats.texts += len(docs)
                    if server.keep_inputs:
                        server.stats.inputs.extend(str(d) for d in docs)
                q = set(_WORD.findall(query.lower()))
                scores = [len(q & set(_WORD.findall(str(d).lower()))) / max(1, len(q)) for d in docs]
                order = sorted(range(len(docs)), key=lambda i: -scores[i])
                if shape == "tei":
                    return self._json(200, [{"index": i, "score": scores[i]} for i in order])
                top = int(body.get("top_n") or len(docs))
                self._json(200, {"results": [{"index": i, "relevance_score": scores[i]} for i in order[:top]]})

            def _json(self, code: int, obj: Any, headers: dict[str, str] | None = None) -> None:
                self._raw(code, json.dumps(obj).encode(), headers)

            def _raw(self, code: int, data: bytes, headers: dict[str, str] | None = None) -> None:
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        class Quiet(ThreadingHTTPServer):
            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # a client that gave up (timeout tests) closes its end: nothing to report

        self.httpd = Quiet(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.request_queue_size = 256
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def _next_fault(self) -> str:
        with self._lock:
            return self._faults.popleft() if self._faults else self.fault

    def push_faults(self, *faults: str) -> None:
        with self._lock:
            self._faults.extend(faults)

    def _embed(self, texts: list[str]) -> np.ndarray:
        if self.embedder is None and self.cheap:  # one hash per text: a server that costs ~nothing
            raw = b"".join(hashlib.blake2b(t.encode(), digest_size=self.dim).digest() for t in texts)
            return (np.frombuffer(raw, dtype=np.uint8).reshape(len(texts), self.dim).astype(np.float32) - 127.5) / 128
        if self.embedder is None:
            return np.stack([bow_vector(t, self.dim) for t in texts])
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        queries = [i for i, t in enumerate(texts) if t.startswith("query: ")]
        passages = [i for i, t in enumerate(texts) if not t.startswith("query: ")]
        for idx, is_query in ((queries, True), (passages, False)):
            if idx:
                part = [texts[i].removeprefix("query: ").removeprefix("passage: ") for i in idx]
                with self._embed_lock:
                    out[idx] = self.embedder.embed(part, is_query=is_query)
        return out

    def capacity(self, batch: int) -> float:
        """Texts per second the server can embed with batches of ``batch`` texts."""
        per = self.batch_latency_s + self.text_latency_s * batch
        return self.n_slots * batch / per if per > 0 else float("inf")

    def start(self) -> ModelServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, *a: object) -> None:
        self.stop()
