"""A persistent search cache around any retriever (``<cache dir>/search_cache.sqlite``), for reproducible reruns.

The key holds the source's identity (an index's live generation), query, ``k``, mode and the caller's scope
(:meth:`Filters.cache_key`), so one user's results are never served to another.  Off with ``cache=False`` or
``SLEUTH_SEARCH_CACHE=0``; ``refresh=True`` recomputes.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sleuth.config import settings
from sleuth.kvcache import KVCache, default_cache_dir, make_key
from sleuth.search.base import Filters, Passage, Retriever

__all__ = ["CACHE_VERSION", "CachedRetriever", "cache_enabled", "source_identity"]

CACHE_VERSION = 1


def cache_enabled() -> bool:
    """False when ``SLEUTH_SEARCH_CACHE`` is 0/false/no/off."""
    return settings.search_cache()


def source_identity(r: Retriever) -> str:
    """A string naming the source and its content version."""
    ident = getattr(r, "cache_identity", None)
    if callable(ident):
        return str(ident())
    return str(getattr(r, "name", type(r).__name__))


class CachedRetriever:
    """Wraps a retriever; answers repeated searches from a :class:`KVCache`."""

    def __init__(
        self,
        inner: Retriever,
        *,
        cache: KVCache | None = None,
        path: str | Path | None = None,
        refresh: bool = False,
    ) -> None:
        self.inner = inner
        self.name = getattr(inner, "name", type(inner).__name__)
        if cache is None:
            cache = KVCache(Path(path) if path else default_cache_dir() / "search_cache.sqlite", table="search")
        self.kv = cache
        self.refresh = refresh
        self.enabled = cache_enabled()
        self.hits = 0
        self.misses = 0

    def key(self, query: str, k: int, filters: Filters | None, mode: str | None = None) -> str:
        f = filters if filters is not None else Filters()
        mode = mode or getattr(self.inner, "mode", None) or getattr(self.inner, "default_mode", None)
        return make_key("search", CACHE_VERSION, source_identity(self.inner), query, int(k), mode, f.cache_key())

    def search(self, query: str, k: int = 5, filters: Filters | None = None, **kw: Any) -> list[Passage]:
        return self.search_batch([query], k, filters, **kw)[0]

    def search_batch(
        self, queries: Sequence[str], k: int = 5, filters: Filters | None = None, **kw: Any
    ) -> list[list[Passage]]:
        mode = kw.get("mode")
        out: list[list[Passage] | None] = [None] * len(queries)
        keys = [self.key(q, k, filters, mode) for q in queries]
        if self.enabled and not self.refresh:
            for i, key in enumerate(keys):
                got = self.kv.get(key)
                if isinstance(got, list):
                    out[i] = [Passage.from_dict(d) for d in got]
                    self.hits += 1
        todo = [i for i, r in enumerate(out) if r is None]
        if todo:
            fresh = self.inner.search_batch([queries[i] for i in todo], k, filters, **kw)
            for i, res in zip(todo, fresh, strict=True):
                self.misses += 1
                out[i] = res
                if self.enabled:
                    self.kv.set(keys[i], [p.to_dict() for p in res])
        return [[Passage.from_dict(p.to_dict()) for p in r or []] for r in out]

    def __getattr__(self, name: str) -> Any:
        # stats(), count(), mode... of the wrapped source
        return getattr(self.inner, name)
