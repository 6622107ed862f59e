"""The optional rerank stage, after a source's own ranking and before the top-k cut.

:class:`RerankedRetriever` asks the source for ``depth`` candidates within the caller's filters, orders them
by a reranker's ``scores(query, documents)`` (:class:`~sleuth.search.remote.HttpReranker` or
:class:`LLMReranker`, listwise) and keeps the top ``k``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any, Protocol

from sleuth.search.base import Filters, Passage, Retriever, SearchError

__all__ = ["DEFAULT_DEPTH", "LLMReranker", "RerankedRetriever", "Reranker", "make_reranker"]

log = logging.getLogger("sleuth.search")

#: candidates a reranker sees per search (at least k)
DEFAULT_DEPTH = 20


class Reranker(Protocol):
    name: str

    def scores(self, query: str, documents: Sequence[str]) -> list[float]: ...


_PROMPT_EN = (
    "Rank the {n} passages below by how useful they are for answering the search query.\n\n"
    "Query: {query}\n\n{passages}\n\n"
    "Answer with the passage numbers only, most useful first, separated by '>', e.g. [2] > [1] > [3]. "
    "Ranking:"
)
_PROMPT_ZH = (
    "按与检索问题的相关程度给下面 {n} 段文字排序。\n\n问题：{query}\n\n{passages}\n\n"
    "只回答段落编号，最相关的在前，用 '>' 分隔，例如 [2] > [1] > [3]。排序："
)


class LLMReranker:
    """The LLM orders the candidates in one call (each clipped to ``max_chars``)."""

    def __init__(self, llm: Any, *, max_chars: int = 300, max_tokens: int = 80) -> None:
        self.llm = llm
        self.max_chars = max_chars
        self.max_tokens = max_tokens
        self.name = f"llm-rerank:{getattr(llm, 'model', '') or type(llm).__name__}"
        self.unreadable = 0

    def prompt(self, query: str, documents: Sequence[str]) -> str:
        from sleuth.search.tokenize import has_cjk

        clip = [" ".join(d.split())[: self.max_chars] for d in documents]
        passages = "\n".join(f"[{i}] {d}" for i, d in enumerate(clip, 1))
        tpl = _PROMPT_ZH if has_cjk(query) else _PROMPT_EN
        return tpl.format(n=len(documents), query=" ".join(query.split()), passages=passages)

    def scores(self, query: str, documents: Sequence[str]) -> list[float]:
        if len(documents) < 2:
            return [1.0] * len(documents)
        from sleuth.llm.base import GenParams

        c = self.llm.chat(
            [{"role": "user", "content": self.prompt(query, documents)}],
            GenParams(max_tokens=self.max_tokens, temperature=0.0),
        )
        order = parse_ranking(c.text, len(documents))
        if not order:
            self.unreadable += 1
            log.warning("the LLM reranker's answer names no passage; the source's order is kept")
        ranked = order + [i for i in range(len(documents)) if i not in set(order)]
        n = len(documents)
        out = [0.0] * n
        for r, i in enumerate(ranked):
            out[i] = float(n - r)
        return out


def parse_ranking(text: str, n: int) -> list[int]:
    """Passage indexes (0-based) in the order an answer like ``[3] > [1] > 2`` names them;
    numbers out of range and repeats are dropped."""
    seen: list[int] = []
    for m in re.finditer(r"\[?(\d{1,3})\]?", text or ""):
        i = int(m.group(1)) - 1
        if 0 <= i < n and i not in seen:
            seen.append(i)
    return seen


def make_reranker(spec: Any, *, llm: Any = None) -> Reranker | None:
    """A reranker from ``None``/``"none"``, ``"llm"`` (needs ``llm``), a
    :class:`~sleuth.search.remote.RerankServer`, a URL, or an object with ``scores``."""
    from sleuth.search.remote import HttpReranker, RerankServer

    if spec is None or spec is False or spec == "none":
        return None
    if spec == "llm":
        if llm is None:
            raise SearchError("the LLM reranker needs the LLM (rerank='llm' with llm=...)")
        return LLMReranker(llm)
    if isinstance(spec, str):
        server = RerankServer.resolve(spec)
        assert server is not None
        return HttpReranker(server)
    if isinstance(spec, RerankServer):
        return HttpReranker(spec)
    if callable(getattr(spec, "scores", None)):
        return spec
    raise SearchError(f"{spec!r} is not a reranker (none, llm, a rerank server URL)")


class RerankedRetriever:
    """A retriever whose top ``k`` is chosen by ``reranker`` among the source's top ``depth``."""

    def __init__(self, inner: Retriever, reranker: Reranker, *, depth: int = DEFAULT_DEPTH) -> None:
        if depth < 1:
            raise SearchError(f"rerank depth must be at least 1, not {depth}")
        self.inner = inner
        self.reranker = reranker
        self.depth = depth
        self.name = getattr(inner, "name", type(inner).__name__)

    def cache_identity(self) -> str:
        from sleuth.search.cache import source_identity

        return f"{source_identity(self.inner)}|{self.reranker.name}@{self.depth}"

    def search(self, query: str, k: int = 5, filters: Filters | None = None, **kw: Any) -> list[Passage]:
        return self.search_batch([query], k, filters, **kw)[0]

    def search_batch(
        self, queries: Sequence[str], k: int = 5, filters: Filters | None = None, **kw: Any
    ) -> list[list[Passage]]:
        if k <= 0:
            return [[] for _ in queries]
        cands = self.inner.search_batch(list(queries), max(self.depth, k), filters, **kw)
        return [self._rerank(q, c, k, filters) for q, c in zip(queries, cands, strict=True)]

    def _rerank(self, query: str, cands: list[Passage], k: int, filters: Filters | None) -> list[Passage]:
        if filters is not None and not filters.is_empty():
            cands = [p for p in cands if filters.matches(p)]  # the source did this; never trust, check
        if len(cands) < 2:
            return cands[:k]
        scores = self.reranker.scores(query, [f"{p.title}\n{p.text}" if p.title else p.text for p in cands])
        order = sorted(range(len(cands)), key=lambda i: (-scores[i], i))
        out = []
        for i in order[:k]:
            p = cands[i]
            p.metadata = {**p.metadata, "first_stage_rank": i + 1}
            p.score = float(scores[i])
            out.append(p)
        return out

    def __getattr__(self, name: str) -> Any:
        # mode, stats(), count()... of the wrapped source
        if name == "inner":  # not set yet (unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)
