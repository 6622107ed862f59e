"""A persistent response cache wrapped around any LLM (:class:`CachedLLM`, SQLite via :class:`sleuth.kvcache.KVCache`).

The key covers base URL, model, kind of call, messages or prompt, every sampling parameter and the JSON schema; only
``temperature == 0`` calls are cached unless ``all_temperatures=True``.  Semantics of hits, ``refresh`` and
streaming: docs/llm.md.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sleuth.config import cache_dir
from sleuth.kvcache import KVCache, make_key
from sleuth.llm.base import DEFAULT_PARAMS, LLM, Completion, GenParams, Message, OnDelta, Usage

__all__ = ["CACHE_VERSION", "CachedLLM"]

CACHE_VERSION = "llm-cache-v1"


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
        self.path = Path(path) if path is not None else cache_dir() / "llm_cache.sqlite"
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
        return d.over(DEFAULT_PARAMS) if isinstance(d, GenParams) else DEFAULT_PARAMS

    def _key(self, kind: str, payload: Any, params: GenParams | None) -> str | None:
        """Cache key, or ``None`` when this call must not be cached."""
        p = (params or GenParams()).over(self._defaults())
        if p.temperature != 0 and not self.all_temperatures:
            return None
        if kind == "chat":
            payload = [dict(m) for m in payload]
        return make_key(
            CACHE_VERSION,
            self.backend,
            self.model,
            kind,
            payload,
            {"max_tokens": p.max_tokens, "temperature": p.temperature, "stop": list(p.stop or ()), "seed": p.seed},
            # formerly per-call body fields, now the schema of a structured call: a call without one keeps its old key
            {"response_format": p.schema} if p.schema else {},
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
    def _cached(self, kind: str, payload: Any, params: GenParams | None, on_delta: OnDelta | None) -> Completion:
        key = self._key(kind, payload, params)
        hit = self._lookup(key)
        if hit is not None:
            if on_delta is not None and hit.text:
                on_delta(hit.text)  # a hit streams as one piece
            return hit
        if kind == "chat":
            return self._store(key, self.inner.chat(payload, params, on_delta=on_delta))
        return self._store(key, self.inner.complete(payload, params, on_delta=on_delta))

    def complete(self, prompt: str, params: GenParams | None = None, *, on_delta: OnDelta | None = None) -> Completion:
        return self._cached("complete", prompt, params, on_delta)

    def chat(
        self, messages: Sequence[Message], params: GenParams | None = None, *, on_delta: OnDelta | None = None
    ) -> Completion:
        return self._cached("chat", messages, params, on_delta)

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if callable(close):
            close()
        self.store.close()
