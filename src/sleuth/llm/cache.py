"""A persistent response cache wrapped around any LLM.

:class:`CachedLLM` implements the LLM protocol on top of another LLM and stores
answers in SQLite (:class:`sleuth.kvcache.KVCache`, safe under concurrent
writers).  The key covers everything that changes an answer: the backend base
URL, the model, the kind of call (chat / completion), the messages or prompt and
every sampling parameter (``stop``, ``max_tokens``, ``temperature``, ``seed``
and any extra body fields).

* Only deterministic calls are cached by default (``temperature == 0``);
  ``all_temperatures=True`` caches every call.
* ``refresh=True`` recomputes every answer and overwrites the stored one.
* A hit returns ``Completion(from_cache=True)`` whose usage shows 0 processed
  prompt tokens (all prompt tokens count as cached) and the original
  completion-token count.
* Streams are served from the cache on a hit (one chunk) and stored after a
  complete stream on a miss.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

from sleuth.config import cache_dir
from sleuth.kvcache import KVCache, make_key
from sleuth.llm.base import LLM, Completion, GenParams, Message, Usage

__all__ = ["CACHE_VERSION", "CachedLLM", "default_cache_path"]

CACHE_VERSION = "llm-cache-v1"


def default_cache_path() -> Path:
    """``<cache dir>/llm_cache.sqlite``."""
    return cache_dir() / "llm_cache.sqlite"


class CachedLLM:
    """Response cache in front of ``inner`` (any :class:`~sleuth.llm.base.LLM`)."""

    def __init__(
        self,
        inner: LLM,
        path: str | Path | None = None,
        *,
        refresh: bool = False,
        all_temperatures: bool = False,
        backend: str | None = None,
    ) -> None:
        self.inner = inner
        self.path = Path(path) if path is not None else default_cache_path()
        self.store = KVCache(self.path, table="llm_responses")
        self.refresh = refresh
        self.all_temperatures = all_temperatures
        self.backend = backend or str(getattr(inner, "base_url", "") or type(inner).__name__)
        self.hits = 0
        self.misses = 0

    # the protocol's attribute, always the inner model's current name
    @property
    def model(self) -> str:
        return str(getattr(self.inner, "model", ""))

    def __getattr__(self, name: str) -> Any:  # base_url, stats, close(), ... of the inner client
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return f"CachedLLM({self.inner!r}, path={str(self.path)!r})"

    # ------------------------------------------------------------------ keys
    def _defaults(self) -> GenParams:
        d = getattr(self.inner, "defaults", None)
        return d if isinstance(d, GenParams) else GenParams()

    def _key(self, kind: str, payload: Any, kw: dict[str, Any]) -> str | None:
        """Cache key, or ``None`` when this call must not be cached."""
        stop = kw.get("stop")
        if isinstance(stop, str):
            stop = [stop]
        p = self._defaults().with_(
            stop=tuple(stop) if stop is not None else None,
            max_tokens=kw.get("max_tokens"),
            temperature=kw.get("temperature"),
            seed=kw.get("seed"),
        )
        if p.temperature != 0 and not self.all_temperatures:
            return None
        extra = {k: v for k, v in kw.items() if k not in ("stop", "max_tokens", "temperature", "seed", "timeout")}
        if kind == "chat":
            payload = [dict(m) for m in payload]
        return make_key(
            CACHE_VERSION,
            self.backend,
            self.model,
            kind,
            payload,
            {"max_tokens": p.max_tokens, "temperature": p.temperature, "stop": list(p.stop), "seed": p.seed},
            extra,
        )

    def _lookup(self, key: str | None) -> Completion | None:
        if key is None or self.refresh:
            return None
        t0 = time.perf_counter()
        d = self.store.get(key)
        if not isinstance(d, dict) or "text" not in d:
            return None
        u = d.get("usage") or {}
        prompt = int(u.get("prompt_tokens", 0))
        self.hits += 1
        return Completion(
            text=str(d["text"]),
            finish_reason=str(d.get("finish_reason", "stop")),
            usage=Usage(
                prompt_tokens=prompt,
                completion_tokens=int(u.get("completion_tokens", 0)),
                cached_prompt_tokens=prompt,
                processed_prompt_tokens=0,
            ),
            latency_s=time.perf_counter() - t0,
            model=str(d.get("model", self.model)),
            from_cache=True,
        )

    def _store(self, key: str | None, c: Completion) -> Completion:
        if key is not None and c.finish_reason != "error":
            self.store.set(key, c.to_dict())
        self.misses += 1
        return c

    # --------------------------------------------------------------- protocol
    def complete(self, prompt: str, **kw: Any) -> Completion:
        key = self._key("complete", prompt, kw)
        return self._lookup(key) or self._store(key, self.inner.complete(prompt, **kw))

    def chat(self, messages: Sequence[Message], **kw: Any) -> Completion:
        key = self._key("chat", messages, kw)
        return self._lookup(key) or self._store(key, self.inner.chat(messages, **kw))

    async def acomplete(self, prompt: str, **kw: Any) -> Completion:
        key = self._key("complete", prompt, kw)
        hit = self._lookup(key)
        return hit or self._store(key, await self.inner.acomplete(prompt, **kw))

    async def achat(self, messages: Sequence[Message], **kw: Any) -> Completion:
        key = self._key("chat", messages, kw)
        hit = self._lookup(key)
        return hit or self._store(key, await self.inner.achat(messages, **kw))

    def _stream(self, kind: str, payload: Any, it_factory: Any, kw: dict[str, Any]) -> Iterator[str]:
        key = self._key(kind, payload, kw)
        hit = self._lookup(key)
        if hit is not None:
            if hit.text:
                yield hit.text
            return
        parts: list[str] = []
        t0 = time.perf_counter()
        for d in it_factory():
            parts.append(d)
            yield d
        self._store(key, Completion(text="".join(parts), latency_s=time.perf_counter() - t0, model=self.model))

    def stream_complete(self, prompt: str, **kw: Any) -> Iterator[str]:
        return self._stream("complete", prompt, lambda: self.inner.stream_complete(prompt, **kw), kw)

    def stream_chat(self, messages: Sequence[Message], **kw: Any) -> Iterator[str]:
        return self._stream("chat", messages, lambda: self.inner.stream_chat(messages, **kw), kw)

    async def astream_chat(self, messages: Sequence[Message], **kw: Any) -> AsyncIterator[str]:
        key = self._key("chat", messages, kw)
        hit = self._lookup(key)
        if hit is not None:
            if hit.text:
                yield hit.text
            return
        parts: list[str] = []
        t0 = time.perf_counter()
        async for d in self.inner.astream_chat(messages, **kw):
            parts.append(d)
            yield d
        self._store(key, Completion(text="".join(parts), latency_s=time.perf_counter() - t0, model=self.model))

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if callable(close):
            close()
        self.store.close()
