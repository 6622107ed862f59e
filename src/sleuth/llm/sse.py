"""Server-sent events of a streamed completion: :class:`StreamReader` cuts pieces at stop strings, passes them to
``on_delta`` and builds the :class:`~sleuth.llm.base.Completion` (no I/O).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from sleuth.llm.base import Completion, LLMBadResponse, LLMUnavailable, Usage
from sleuth.llm.stops import StopCutter
from sleuth.llm.wire import usage_from

__all__ = ["StreamReader", "parse_event"]


def parse_event(line: str, chat: bool, where: str) -> tuple[str | None, str | None, bool, dict[str, Any] | None]:
    """One SSE line -> (text piece, finish reason, ``[DONE]`` seen, the event object)."""
    if not line.startswith("data:"):
        return None, None, False, None
    payload = line[5:].strip()
    if payload == "[DONE]":
        return None, None, True, None
    if not payload:
        return None, None, False, None
    try:
        d = json.loads(payload)
    except ValueError:
        raise LLMBadResponse(f"{where} sent a malformed stream event: {payload[:80]!r}") from None
    if not isinstance(d, dict):
        raise LLMBadResponse(f"{where} sent a stream event that is not an object")
    if d.get("error"):
        e = d["error"]
        raise LLMUnavailable(f"{where} reported an error mid-stream: {e.get('message') if isinstance(e, dict) else e}")
    choices = d.get("choices") or []
    if not choices:
        return None, None, False, d  # e.g. a trailing usage-only event
    ch = choices[0]
    text = (ch.get("delta") or {}).get("content") if chat else ch.get("text")
    return (text or None), ch.get("finish_reason"), False, d


class StreamReader:
    """The state of one streamed attempt: feed it lines until :meth:`feed` says the stream is over."""

    def __init__(self, chat: bool, stop: Sequence[str] | None, where: str, on_delta: Callable[[str], None]) -> None:
        self.chat = chat
        self.where = where
        self.on_delta = on_delta
        self.cutter = StopCutter(stop)
        self.parts: list[str] = []
        self.finish: str | None = None
        self.finished = False
        self.usage = Usage()
        self.model = ""

    @property
    def emitted(self) -> bool:
        """Whether any text reached ``on_delta`` (a retry would then duplicate it)."""
        return bool(self.parts)

    def _emit(self, text: str) -> None:
        if text:
            self.parts.append(text)
            self.on_delta(text)

    def feed(self, line: str) -> bool:
        """Take one line; ``True`` when nothing more needs reading."""
        text, fin, done, event = parse_event(line, self.chat, self.where)
        if event is not None:
            if "usage" in event or "timings" in event:
                self.usage = usage_from(event)
            self.model = self.model or str(event.get("model") or "")
        if text:
            self._emit(self.cutter.feed(text))
            if self.cutter.done:
                self.finish = "stop"
                self.finished = True
                return True
        if fin:
            self.finish = str(fin)
            self.finished = True
        if done:
            self.finished = True
            return True
        return False

    def completion(self, t0: float, model: str) -> Completion:
        """The whole answer, once the stream finished (releases the held-back tail)."""
        self._emit(self.cutter.flush())
        return Completion(
            text="".join(self.parts),
            finish_reason=self.finish or "stop",
            usage=self.usage,
            latency_s=time.perf_counter() - t0,
            model=model or self.model,
        )
