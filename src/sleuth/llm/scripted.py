"""Scripted models for tests, in-process: :class:`ScriptedLLM` (the LLM protocol directly) and
:class:`ScriptedServer` (the OpenAI wire format through ``httpx.MockTransport``).

A script is a list of replies or a callable; words are tokens, ``max_tokens`` truncates and stop strings cut
as the client cuts them.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from sleuth.llm.base import DEFAULT_PARAMS, Completion, GenParams, LLMUnavailable, Message, OnDelta, Usage
from sleuth.llm.client import OpenAICompatLLM
from sleuth.llm.stops import StopCutter, cut_at_stop

__all__ = ["ScriptExhausted", "ScriptedCall", "ScriptedLLM", "ScriptedServer", "generate", "tokens"]

#: a reply function: (prompt or messages, resolved parameters) -> text
ReplyFn = Callable[[str | list[Message], GenParams], str]

_TOKEN = re.compile(r"\s*\S+(?:\s+$)?|\s+$")


class ScriptExhausted(LLMUnavailable):
    """A scripted model was called more often than its script has replies."""


def tokens(text: str) -> list[str]:
    """``text`` as word pieces (each with its leading whitespace) that join back to ``text``."""
    return _TOKEN.findall(text)


def generate(text: str, params: GenParams) -> tuple[str, str, list[str]]:
    """What a model meaning to say ``text`` sends: (text, finish reason, the pieces before the cut).

    ``params`` must be resolved.  The pieces are capped at ``max_tokens``; the
    text is their concatenation cut at the first stop string.
    """
    pieces = tokens(text)
    limit = params.max_tokens if params.max_tokens is not None else len(pieces)
    kept = pieces[:limit]
    out, cut = cut_at_stop("".join(kept), params.stop)
    finish = "length" if len(pieces) > limit and not cut else "stop"
    return out, finish, kept


def _payload_words(payload: str | Sequence[Message]) -> int:
    if isinstance(payload, str):
        return len(payload.split())
    return sum(len(str(m.get("content") or "").split()) for m in payload)


class _Script:
    """Replies in turn, or from a function; thread-safe."""

    def __init__(self, replies: Sequence[str] | Callable[..., str]) -> None:
        self._fn = replies if callable(replies) else None
        self._replies = [] if callable(replies) else list(replies)
        self._next = 0
        self._lock = threading.Lock()

    def reply(self, *args: Any) -> str:
        """The next reply, or the function's answer to ``args``."""
        if self._fn is not None:
            return str(self._fn(*args))
        with self._lock:
            if self._next >= len(self._replies):
                raise ScriptExhausted(f"the scripted model has no reply left ({len(self._replies)} scripted)")
            self._next += 1
            return self._replies[self._next - 1]


@dataclass(frozen=True)
class ScriptedCall:
    """One call a :class:`ScriptedLLM` answered: kind, prompt or messages, resolved parameters."""

    kind: str  # "complete" | "chat"
    payload: str | list[Message]
    params: GenParams
    streamed: bool


class ScriptedLLM:
    """An in-process :class:`~sleuth.llm.base.LLM` answering from a script; records every call."""

    def __init__(
        self, replies: Sequence[str] | ReplyFn, *, model: str = "scripted", defaults: GenParams | None = None
    ) -> None:
        self.model = model
        self.defaults = defaults.over(DEFAULT_PARAMS) if defaults is not None else DEFAULT_PARAMS
        self.calls: list[ScriptedCall] = []
        self._script = _Script(replies)
        self._lock = threading.Lock()

    def complete(self, prompt: str, params: GenParams | None = None, *, on_delta: OnDelta | None = None) -> Completion:
        return self._answer("complete", prompt, params, on_delta)

    def chat(
        self, messages: Sequence[Message], params: GenParams | None = None, *, on_delta: OnDelta | None = None
    ) -> Completion:
        return self._answer("chat", [dict(m) for m in messages], params, on_delta)

    def _answer(
        self, kind: str, payload: str | list[Message], params: GenParams | None, on_delta: OnDelta | None
    ) -> Completion:
        t0 = time.perf_counter()
        p = (params or GenParams()).over(self.defaults)
        with self._lock:
            self.calls.append(ScriptedCall(kind, payload, p, on_delta is not None))
        text, finish, pieces = generate(self._script.reply(payload, p), p)
        if on_delta is not None:
            cutter = StopCutter(p.stop)
            for piece in [*(cutter.feed(x) for x in pieces), cutter.flush()]:
                if piece:
                    on_delta(piece)
        return Completion(
            text=text,
            finish_reason=finish,
            usage=Usage(_payload_words(payload), len(tokens(text)), 0, _payload_words(payload)),
            latency_s=time.perf_counter() - t0,
            model=self.model,
        )


class ScriptedServer:
    """An OpenAI-compatible server inside ``httpx.MockTransport``; records request bodies.

    The reply function gets the request body (``body -> str``), like
    ``tests/fake_openai_server.py``'s scripts.  ``client(**kw)`` is an
    :class:`OpenAICompatLLM` wired to it.
    """

    URL = "http://scripted.invalid/v1"

    def __init__(self, replies: Sequence[str] | Callable[[dict[str, Any]], str], *, model: str = "scripted") -> None:
        self.model = model
        self._script = _Script(replies)
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self.transport = httpx.MockTransport(self.handle)

    def client(self, **kw: Any) -> OpenAICompatLLM:
        """A real client talking to this server in-process."""
        kw.setdefault("backoff_base", 0.0)
        return OpenAICompatLLM(self.URL, kw.pop("model", self.model), transport=self.transport, **kw)

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if request.method == "GET" and path.endswith("/models"):
            return httpx.Response(200, json={"object": "list", "data": [{"id": self.model, "object": "model"}]})
        if request.method != "POST" or not path.endswith("completions"):
            return httpx.Response(404, json={"error": {"message": f"no route {request.method} {path}"}})
        body = json.loads(request.content)
        with self._lock:
            self.requests.append(body)
        chat = "messages" in body
        payload: str | list[Message] = body["messages"] if chat else str(body.get("prompt", ""))
        params = GenParams(max_tokens=body.get("max_tokens"), stop=tuple(body.get("stop") or ()))
        try:
            text, finish, _ = generate(self._script.reply(body), params)
        except ScriptExhausted as e:
            return httpx.Response(503, json={"error": {"message": str(e)}})
        if body.get("stream"):
            return self._sse(chat, text, finish)
        usage = {"prompt_tokens": _payload_words(payload), "completion_tokens": len(tokens(text))}
        choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
        choice.update({"message": {"role": "assistant", "content": text}} if chat else {"text": text})
        return httpx.Response(200, json={"model": self.model, "choices": [choice], "usage": usage})

    @staticmethod
    def _sse(chat: bool, text: str, finish: str) -> httpx.Response:
        def event(piece: str | None, fin: str | None) -> str:
            ch: dict[str, Any] = {"index": 0, "finish_reason": fin}
            ch.update({"delta": {"content": piece} if piece else {}} if chat else {"text": piece or ""})
            return f"data: {json.dumps({'choices': [ch]})}\n\n"

        events = [event(piece, None) for piece in tokens(text)] + [event(None, finish), "data: [DONE]\n\n"]
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content="".join(events).encode())
