"""A real, deliberately configurable OpenAI-compatible HTTP server for tests and benchmarks.

It listens on 127.0.0.1 (random free port) with the standard library's
``ThreadingHTTPServer`` and speaks ``/v1/chat/completions``,
``/v1/completions`` (plain JSON and SSE streaming), ``/v1/models`` and
``/health``.  Answers are deterministic:

* a ``script`` (list of strings used in turn, or a callable ``body -> str``), or
* by default an echo: ``"Echo: <last user message or last prompt line>"``.

"Tokens" are whitespace-delimited words.  ``max_tokens`` truncates (finish
reason ``length``); stop strings are honoured unless the fault says otherwise.
Usage reports ``prompt_tokens``, ``completion_tokens`` and
``prompt_tokens_details.cached_tokens`` from a one-slot prefix cache model
(the common prefix with the previous prompt), plus llama.cpp-style
``timings`` when ``llamacpp_timings=True``.

Faults, chosen per instance (``fault=``), queued for the next requests
(``server.push_faults("429", "500")``) or per request (body field ``"fault"``):

``ok``, ``429`` (with ``Retry-After`` = ``retry_after``), ``429-no-retry-after``,
``429-date`` (Retry-After as an HTTP date), ``500``, ``502``, ``503``, ``401``,
``400``, ``slow`` (sleep ``slow_s`` before answering), ``malformed`` (not JSON),
``truncated`` (JSON cut in half), ``no-choices``, ``empty`` (empty completion),
``disconnect`` (close the connection mid-answer / mid-stream), ``ignore-stop``,
``endless`` (never stops by itself: runs to ``max_tokens``), ``stall`` (sends half of
the answer - half the body, or half the stream events - then stalls ``slow_s``
before the rest: a client read timeout mid-answer / mid-stream).

Capacity model for throughput work: ``slots`` parallel generations (excess
requests queue), ``token_latency_s`` per generated token,
``prompt_token_latency_s`` per uncached prompt token and ``request_latency_s``
once per request (a fixed time to first token; default 0).  ``stats.busy_s``
sums the seconds generations held a slot, so ``busy_s / (slots * wall)`` is the
share of the offered capacity a client used.  ``backlog`` raises the listen
backlog (the standard library's default of 5 refuses bursts of new connections
from many concurrent clients).

Usage::

    with FakeOpenAIServer(token_latency_s=0.01, slots=2) as srv:
        llm = OpenAICompatLLM(srv.base_url, "fake")
        ...
        srv.requests[-1]["body"]  # what the client sent
"""

from __future__ import annotations

import email.utils
import json
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FAULTS", "FakeOpenAIServer", "ServerStats"]

FAULTS = frozenset(
    {
        "ok", "429", "429-no-retry-after", "429-date", "500", "502", "503", "401", "400", "slow",
        "malformed", "truncated", "no-choices", "empty", "disconnect", "ignore-stop", "endless", "stall",
    }
)  # fmt: skip

_TOKEN_RE = re.compile(r"\S+\s*|\s+")


def tokens(text: str) -> list[str]:
    """The fake server's tokenisation: a word plus its trailing whitespace."""
    return _TOKEN_RE.findall(text)


@dataclass
class ServerStats:
    requests: int = 0
    completed: int = 0
    faults: dict[str, int] = field(default_factory=dict)
    in_flight: int = 0
    max_in_flight: int = 0
    #: generations running at once (bounded by ``slots``)
    max_generating: int = 0
    client_disconnects: int = 0
    generated_tokens: int = 0
    #: seconds that generations held a slot (sum over requests)
    busy_s: float = 0.0


class FakeOpenAIServer:
    """See the module docstring.  Start with ``with`` or :meth:`start` / :meth:`stop`."""

    def __init__(
        self,
        *,
        script: list[str] | Callable[[dict[str, Any]], str] | None = None,
        fault: str = "ok",
        retry_after: float | str = 1,
        slow_s: float = 2.0,
        slots: int | None = None,
        token_latency_s: float = 0.0,
        prompt_token_latency_s: float = 0.0,
        request_latency_s: float = 0.0,
        backlog: int | None = None,
        api_key: str | None = None,
        model: str = "fake-model",
        llamacpp_timings: bool = False,
        endless_word: str = "more",
    ) -> None:
        if fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}")
        self.script = script
        self.fault = fault
        self.retry_after = retry_after
        self.slow_s = slow_s
        self.token_latency_s = token_latency_s
        self.prompt_token_latency_s = prompt_token_latency_s
        self.request_latency_s = request_latency_s
        #: listen backlog (``None``: the standard library's 5; raise it for many concurrent clients)
        self.backlog = backlog
        self.api_key = api_key
        self.model = model
        self.llamacpp_timings = llamacpp_timings
        self.endless_word = endless_word
        self.requests: list[dict[str, Any]] = []
        self.stats = ServerStats()
        self._queued: deque[str] = deque()
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(slots) if slots else None
        self._generating = 0
        self._script_i = 0
        self._last_prompt: list[str] = []
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------ lifecycle
    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (no ``/v1``)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``, what OpenAI-style clients expect."""
        return self.url + "/v1"

    def start(self) -> FakeOpenAIServer:
        if self._httpd is not None:
            return self
        handler = type("Handler", (_Handler,), {"fake": self})
        server_cls: type[ThreadingHTTPServer] = _QuietServer
        if self.backlog is not None:
            server_cls = type("Server", (_QuietServer,), {"request_queue_size": int(self.backlog)})
        self._httpd = server_cls(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --------------------------------------------------------------- control
    def push_faults(self, *faults: str) -> None:
        """Faults for the next requests, in order (then back to ``self.fault``)."""
        for f in faults:
            if f not in FAULTS:
                raise ValueError(f"unknown fault {f!r}")
        with self._lock:
            self._queued.extend(faults)

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.stats = ServerStats()
            self._queued.clear()
            self._script_i = 0
            self._last_prompt = []

    def _next_fault(self, body: dict[str, Any]) -> str:
        f = body.get("fault")
        if isinstance(f, str) and f in FAULTS:
            return f
        with self._lock:
            if self._queued:
                return self._queued.popleft()
        return self.fault

    def _answer_text(self, body: dict[str, Any], kind: str) -> str:
        if callable(self.script):
            return str(self.script(body))
        if self.script:
            with self._lock:
                t = self.script[self._script_i % len(self.script)]
                self._script_i += 1
            return t
        if kind == "chat":
            msgs = body.get("messages") or []
            last = next((m.get("content", "") for m in reversed(msgs) if m.get("role") == "user"), "")
        else:
            prompt = str(body.get("prompt", ""))
            lines = [ln for ln in prompt.splitlines() if ln.strip()]
            last = lines[-1] if lines else ""
        return f"Echo: {last}"

    @staticmethod
    def _prompt_text(body: dict[str, Any], kind: str) -> str:
        if kind == "chat":
            return "".join(f"<{m.get('role')}>{m.get('content', '')}\n" for m in body.get("messages") or [])
        return str(body.get("prompt", ""))

    def _plan(self, body: dict[str, Any], kind: str, fault: str) -> tuple[list[str], str, dict[str, Any]]:
        """The tokens to send, the finish reason and the usage block."""
        max_tokens = int(body.get("max_tokens") or 16)
        if fault == "endless":
            toks = [f"{self.endless_word} "] * max_tokens
            finish = "length"
        elif fault == "empty":
            toks, finish = [], "stop"
        else:
            text = self._answer_text(body, kind)
            stops = body.get("stop") or []
            if isinstance(stops, str):
                stops = [stops]
            finish = "stop"
            if fault != "ignore-stop":
                cut = min((i for i in (text.find(s) for s in stops if s) if i >= 0), default=-1)
                if cut >= 0:
                    text = text[:cut]
            toks = tokens(text)
            if len(toks) > max_tokens:
                toks, finish = toks[:max_tokens], "length"
        ptoks = tokens(self._prompt_text(body, kind))
        with self._lock:
            cached = 0
            for a, b in zip(ptoks, self._last_prompt, strict=False):
                if a != b:
                    break
                cached += 1
            cached = min(cached, max(0, len(ptoks) - 1))
            self._last_prompt = ptoks
        usage: dict[str, Any] = {
            "prompt_tokens": len(ptoks),
            "completion_tokens": len(toks),
            "total_tokens": len(ptoks) + len(toks),
            "prompt_tokens_details": {"cached_tokens": cached},
        }
        return toks, finish, usage


class _QuietServer(ThreadingHTTPServer):
    """Clients that hang up (timeouts, cancellations) are expected here: no traceback on stderr."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError, TimeoutError)):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    fake: FakeOpenAIServer
    protocol_version = "HTTP/1.1"
    timeout = 30
    #: headers and body are separate writes: without TCP_NODELAY each answer waits ~40 ms (Nagle + delayed ACK)
    disable_nagle_algorithm = True
    #: this request still counts in ``stats.in_flight`` (see :meth:`_leaves_flight`)
    _in_flight = False

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    # -------------------------------------------------------------- helpers
    def _send_json(self, code: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(obj).encode()
        self._send_raw(code, data, headers)

    def _send_raw(
        self, code: int, data: bytes, headers: dict[str, str] | None = None, ctype: str = "application/json"
    ) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self._leaves_flight()
        self.wfile.write(data)
        self.wfile.flush()

    def _leaves_flight(self) -> None:
        """The request stops counting as in flight (once), just before its last bytes go out: a
        client that reads the whole response and sends its next request must never find this one
        still counted (counting it down after the write raced the client on a loaded machine, and
        a concurrency limit of 2 measured 3)."""
        if self._in_flight:
            self._in_flight = False
            with self.fake._lock:
                self.fake.stats.in_flight -= 1

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _abort(self) -> None:
        """Close the TCP connection abruptly (RST)."""
        self.close_connection = True
        try:
            self.wfile.flush()
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # --------------------------------------------------------------- routes
    def do_GET(self) -> None:
        path = self.path.split("?")[0].rstrip("/")
        if path in ("/health", "/v1/health"):
            self._send_json(200, {"status": "ok"})
        elif path in ("/v1/models", "/models"):
            self._send_json(200, {"object": "list", "data": [{"id": self.fake.model, "object": "model"}]})
        else:
            self._send_json(404, {"error": {"message": f"no route {path}"}})

    def do_POST(self) -> None:
        fake = self.fake
        path = self.path.split("?")[0].rstrip("/")
        if path.endswith("/chat/completions"):
            kind = "chat"
        elif path.endswith("/completions"):
            kind = "complete"
        else:
            self._send_json(404, {"error": {"message": f"no route {path}"}})
            return
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._send_json(400, {"error": {"message": "request body is not JSON"}})
            return
        with fake._lock:
            fake.stats.requests += 1
            fake.stats.in_flight += 1
            fake.stats.max_in_flight = max(fake.stats.max_in_flight, fake.stats.in_flight)
            self._in_flight = True
            fake.requests.append({"path": path, "body": body, "auth": self.headers.get("Authorization")})
        try:
            self._handle(kind, body)
        finally:
            self._leaves_flight()

    def _handle(self, kind: str, body: dict[str, Any]) -> None:
        fake = self.fake
        if fake.api_key is not None and self.headers.get("Authorization") != f"Bearer {fake.api_key}":
            self._send_json(401, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}})
            return
        fault = fake._next_fault(body)
        with fake._lock:
            fake.stats.faults[fault] = fake.stats.faults.get(fault, 0) + 1
        if fault in ("429", "429-no-retry-after", "429-date"):
            headers = {}
            if fault == "429":
                headers["Retry-After"] = str(fake.retry_after)
            elif fault == "429-date":
                headers["Retry-After"] = email.utils.formatdate(time.time() + float(fake.retry_after), usegmt=True)
            self._send_json(429, {"error": {"message": "Rate limit reached", "type": "rate_limit"}}, headers)
            return
        if fault in ("500", "502", "503", "401", "400"):
            self._send_json(int(fault), {"error": {"message": f"fake fault {fault}"}})
            return
        if fault == "slow":
            time.sleep(fake.slow_s)
        if fault == "disconnect" and not body.get("stream"):
            self._abort()
            return

        toks, finish, usage = fake._plan(body, kind, fault)
        stream = bool(body.get("stream"))
        if fake._slots is not None:
            fake._slots.acquire()
        t_slot = time.perf_counter()
        try:
            with fake._lock:
                fake._generating += 1
                fake.stats.max_generating = max(fake.stats.max_generating, fake._generating)
            uncached = usage["prompt_tokens"] - usage["prompt_tokens_details"]["cached_tokens"]
            if fake.request_latency_s:
                time.sleep(fake.request_latency_s)
            if fake.prompt_token_latency_s:
                time.sleep(fake.prompt_token_latency_s * uncached)
            if stream:
                self._stream(kind, toks, finish, fault)
            else:
                if fake.token_latency_s:
                    time.sleep(fake.token_latency_s * len(toks))
                self._complete(kind, toks, finish, usage, fault)
            with fake._lock:
                fake.stats.generated_tokens += len(toks)
        finally:
            with fake._lock:
                fake._generating -= 1
                fake.stats.busy_s += time.perf_counter() - t_slot
            if fake._slots is not None:
                fake._slots.release()

    def _complete(self, kind: str, toks: list[str], finish: str, usage: dict[str, Any], fault: str) -> None:
        fake = self.fake
        text = "".join(toks)
        if kind == "chat":
            choice: dict[str, Any] = {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": finish,
            }
            obj = "chat.completion"
        else:
            choice = {"index": 0, "text": text, "finish_reason": finish, "logprobs": None}
            obj = "text_completion"
        resp: dict[str, Any] = {
            "id": f"fake-{fake.stats.requests}",
            "object": obj,
            "created": int(time.time()),
            "model": fake.model,
            "choices": [] if fault == "no-choices" else [choice],
            "usage": usage,
        }
        if fake.llamacpp_timings:
            cached = usage["prompt_tokens_details"]["cached_tokens"]
            resp["timings"] = {
                "cache_n": cached,
                "prompt_n": usage["prompt_tokens"] - cached,
                "predicted_n": usage["completion_tokens"],
                # llama.cpp's model time: a fake 0.5 ms a prompt token evaluated, 2 ms a generated one
                "prompt_ms": 0.5 * (usage["prompt_tokens"] - cached),
                "predicted_ms": 2.0 * usage["completion_tokens"],
            }
        data = json.dumps(resp).encode()
        if fault == "malformed":
            data = b"<html><body>502 Bad Gateway (not JSON)</body></html>"
        elif fault == "truncated":
            data = data[: len(data) // 2]
        if fault == "stall":
            self._send_stalled(data)
            return
        self._send_raw(200, data)
        with fake._lock:
            fake.stats.completed += 1

    def _send_stalled(self, data: bytes) -> None:
        """Declare the whole body, send half of it, stall, then send the rest (if the client is still there)."""
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        half = len(data) // 2
        try:
            self.wfile.write(data[:half])
            self.wfile.flush()
            time.sleep(self.fake.slow_s)
            self._leaves_flight()
            self.wfile.write(data[half:])
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            with self.fake._lock:
                self.fake.stats.client_disconnects += 1
            self.close_connection = True

    def _stream(self, kind: str, toks: list[str], finish: str, fault: str) -> None:
        fake = self.fake
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def event(delta: str | None, fin: str | None) -> bytes:
            if kind == "chat":
                ch: dict[str, Any] = {
                    "index": 0,
                    "delta": {"content": delta} if delta is not None else {},
                    "finish_reason": fin,
                }
            else:
                ch = {"index": 0, "text": delta or "", "finish_reason": fin}
            return b"data: " + json.dumps({"object": "chunk", "model": fake.model, "choices": [ch]}).encode() + b"\n\n"

        try:
            events: Iterable[bytes] = [event(t, None) for t in toks]
            for i, ev in enumerate(events):
                if fault == "disconnect" and i >= max(1, len(toks) // 2):
                    self._abort()
                    return
                if fault == "malformed" and i == 1:
                    ev = b"data: {not json\n\n"
                if fault == "stall" and i == max(1, len(toks) // 2):
                    time.sleep(fake.slow_s)
                if fake.token_latency_s:
                    time.sleep(fake.token_latency_s)
                self._chunk(ev)
            if fault == "disconnect":
                self._abort()
                return
            self._chunk(event(None, finish))
            self._leaves_flight()
            self._chunk(b"data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            with fake._lock:
                fake.stats.completed += 1
        except (BrokenPipeError, ConnectionResetError):
            with fake._lock:
                fake.stats.client_disconnects += 1
            self.close_connection = True
