"""The probe behind :func:`sleuth.eval.fingerprint.code_fingerprint`: run a strategy on a
fixed suite and return what it did, as plain JSON-able data.

Everything goes through public, stable APIs only: :class:`OpenAICompatLLM` against the
scripted server of :mod:`sleuth.eval.probe.server`, ``get_strategy`` (or the
``module:Class`` itself), :meth:`Index.build` / :meth:`Index.open` on the probe corpus
(``corpus.jsonl`` beside this file, lexical search), :class:`Filters`, ``Strategy.run``
and, where a strategy has one, ``run_batch``.  This module is the one place to adapt
when those APIs change; what it returns must then stay the same.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
import tempfile
import threading
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from sleuth.eval.probe.server import ProbeServer, canonical
from sleuth.search.base import Filters, Passage, Retriever

CORPUS = Path(__file__).resolve().parent / "corpus.jsonl"

#: (question, filters): English and Chinese, single- and multi-hop, one the model gives
#: up on (server.GIVE_UP_MARK), one whose filters leave nothing to retrieve
QUESTIONS: tuple[tuple[str, Filters], ...] = (
    ("Who was the father of the director of Jaws?", Filters()),
    ("When was the Eiffel Tower completed?", Filters()),
    ("年假每年有几天？", Filters.make(acl=["hr"], equals={"version": "2025"})),
    ("《大白鲨》导演的父亲是做什么工作的？", Filters()),
    ("What is the top speed of a Zorblax swamp eel?", Filters()),
    ("Who founded the Hanseatic League?", Filters.make(acl=["nobody"])),
)
#: the questions of a batch run (where the strategy has ``run_batch``)
BATCH = (0, 3, 4)


class RecordingRetriever:
    """A :class:`Retriever` that notes every search it passes on (query, k, filters, ids)."""

    def __init__(self, inner: Retriever) -> None:
        self.inner = inner
        self.calls: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def _note(self, query: str, k: int, filters: Filters | None, found: Sequence[Passage]) -> None:
        entry = {"query": query, "k": k, "filters": (filters or Filters()).to_dict(), "ids": [p.id for p in found]}
        with self._lock:
            self.calls.append(entry)

    def search(self, query: str, k: int = 5, filters: Filters | None = None) -> list[Passage]:
        found = self.inner.search(query, k, filters)
        self._note(query, k, filters, found)
        return found

    def search_batch(self, queries: Sequence[str], k: int = 5, filters: Filters | None = None) -> list[list[Passage]]:
        out = self.inner.search_batch(list(queries), k, filters)
        for q, found in zip(queries, out, strict=True):
            self._note(q, k, filters, found)
        return out

    def take(self) -> list[dict[str, Any]]:
        with self._lock:
            out, self.calls = self.calls, []
        return out


_INDEX_DIR: tempfile.TemporaryDirectory[str] | None = None


@lru_cache(maxsize=1)
def probe_index() -> Retriever:
    """The probe corpus in Sleuth's embedded index (lexical), built once per process."""
    global _INDEX_DIR
    from sleuth.search import Index

    _INDEX_DIR = tempfile.TemporaryDirectory(prefix="sleuth-probe-")
    target = Path(_INDEX_DIR.name) / "index"
    Index.build([CORPUS], target, format="auto", dense=False)
    return Index.open(target)


def strategy_class(name: str) -> type:
    """The class behind a strategy name: a built-in name or ``module:Class``."""
    if ":" in name:
        mod, _, cls = name.partition(":")
        return getattr(importlib.import_module(mod), cls)  # type: ignore[no-any-return]
    from sleuth.strategies import STRATEGIES, resolve_name

    return STRATEGIES[resolve_name(name)]


def build_strategy(name: str, llm: Any, retriever: Retriever) -> Any:
    if ":" in name:
        return strategy_class(name)(llm, retriever)
    from sleuth.strategies import get_strategy

    return get_strategy(name, llm, retriever)


def defaults(strategy: Any) -> dict[str, Any]:
    """The options a strategy runs with when the caller sets none.

    ``typed`` is every field of its typed options (``strategy.opts``), so a changed
    default counts even where the short probe never reaches it (a threshold, a limit).
    """
    opts = getattr(strategy, "opts", None)
    return {
        "k": strategy.k,
        "max_steps": strategy.max_steps,
        "max_tokens": strategy.max_tokens,
        "lang": strategy.lang,
        "options": dict(strategy.options),
        "typed": dataclasses.asdict(opts) if dataclasses.is_dataclass(opts) and not isinstance(opts, type) else None,
    }


def outcome(result: Any) -> dict[str, Any]:
    """What a run produced (no timings, ids or trace payloads)."""
    events = list(result.trace.events)
    return {
        "answer": result.answer,
        "short_answer": result.short_answer,
        "citations": [p.id for p in result.citations],
        "finish_reason": result.finish_reason,
        "events": [e.kind for e in events],
        "routes": [e.data.get("route") for e in events if e.kind == "search"],
    }


_PROBE_LOCK = threading.Lock()


def run_probe(name: str) -> dict[str, Any]:
    """Run strategy ``name`` over :data:`QUESTIONS` (and a batch, if it has ``run_batch``).

    One probe at a time per process (worker threads may ask for fingerprints together).
    """
    with _PROBE_LOCK:
        return _run_probe(name)


def _run_probe(name: str) -> dict[str, Any]:
    from sleuth.llm.openai_compat import OpenAICompatLLM

    retriever = RecordingRetriever(probe_index())
    with ProbeServer() as server:
        llm = OpenAICompatLLM(server.base_url, "probe", max_retries=0, timeout=30.0)
        try:
            try:
                strategy = build_strategy(name, llm, retriever)
            except Exception as e:  # a strategy that cannot be built with defaults: that is its behaviour
                return {"build": raised(e)}
            runs = []
            for question, filters in QUESTIONS:
                try:
                    done = outcome(strategy.run(question, filters=filters))
                except Exception as e:
                    done = {"raised": raised(e)}
                requests = [{"path": p, "body": b} for p, b in server.take()]
                runs.append({"question": question, "requests": requests, "searches": retriever.take(), **done})
            batch = None
            if callable(getattr(strategy, "run_batch", None)):
                try:
                    questions = [QUESTIONS[i][0] for i in BATCH]
                    results: Any = [outcome(r) for r in strategy.run_batch(questions, filters=Filters(), concurrency=2)]
                except Exception as e:
                    results = {"raised": raised(e)}
                # concurrent: arrival order varies, the multiset of requests and searches does not
                batch = {
                    "requests": sorted(canonical({"path": p, "body": b}) for p, b in server.take()),
                    "searches": sorted(canonical(c) for c in retriever.take()),
                    "results": results,
                }
        finally:
            llm.close()
    return {"defaults": defaults(strategy), "runs": runs, "batch": batch}


def raised(e: Exception) -> str:
    """An exception as behaviour: its type and message, without memory addresses."""
    return re.sub(r"0x[0-9a-fA-F]+", "0x", f"{type(e).__name__}: {e}")
