"""The probe behind :func:`sleuth.eval.fingerprint.code_fingerprint`: run a strategy on a
fixed suite in one language and return what it did, as plain JSON-able data.

The suite is split by language, so that what a run in one language does is probed apart
from the other: :data:`QUESTIONS`, :data:`BATCH` and :data:`BATCH_ONLY` hold each language's questions, and
``corpus/<lang>.jsonl`` beside this file each language's passages, indexed on their own
(a change to how Chinese text is tokenised or embedded never touches the English index).

Everything goes through public, stable APIs only: :class:`OpenAICompatLLM` against the
scripted server of :mod:`sleuth.eval.probe.server`, ``get_strategy`` (or the
``module:Class`` itself), :meth:`Index.build` / :meth:`Index.open` on the probe corpus
(lexical search), :class:`Filters`, ``Strategy.run`` and, where a strategy has one,
``run_batch``.  This module is the one place to adapt when those APIs change; what it
returns must then stay the same.
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

#: the languages the probe covers (those of Sleuth's prompt templates)
LANGS = ("en", "zh")
#: each language's probe passages (with ACL and version fields), indexed apart
CORPUS = {lang: Path(__file__).resolve().parent / "corpus" / f"{lang}.jsonl" for lang in LANGS}

#: (question, filters) per language: single- and multi-hop, one under an ACL and a version,
#: one the model gives up on (server.GIVE_UP_MARK), one whose filters leave nothing to retrieve,
#: one whose short answer repeats the question (server.RESTATED_SHORT_MARK, English)
QUESTIONS: dict[str, tuple[tuple[str, Filters], ...]] = {
    "en": (
        ("Who was the father of the director of Jaws?", Filters()),
        ("When was the Eiffel Tower completed?", Filters()),
        ("How many days of annual leave are there each year?", Filters.make(acl=["hr"], equals={"version": "2025"})),
        ("What is the top speed of a Zorblax swamp eel?", Filters()),
        ("Who founded the Hanseatic League?", Filters.make(acl=["nobody"])),
        # chat replies without an answer line, a short-answer call that repeats the subject (server.RESTATED_SHORT_MARK)
        ("What type of combat does Pak Sao train for?", Filters()),
    ),
    "zh": (
        ("《大白鲨》导演的父亲是做什么工作的？", Filters()),
        ("差旅费用应在行程结束后多少天内报销？", Filters.make(equals={"version": "2025"})),
        # a long clause whose title names the topic beside a short FAQ and an annex (policy_zh's shape):
        # a change of how Chinese titles and sections weigh in ranking shows in the ids returned
        ("因公取消行程的退票费用应在多少天内提交报销？", Filters.make(equals={"version": "2025"})),
        ("年假每年有几天？", Filters.make(acl=["hr"], equals={"version": "2025"})),
        # a question asking for several parts (answer_type's `list`: its $expected and short-answer fitting)
        ("差旅费用的报销期限和退票费用的提交期限分别是多少天？", Filters.make(equals={"version": "2025"})),
        ("Zorblax沼泽鳗的最高速度是多少？", Filters()),
        ("汉萨同盟是谁创立的？", Filters.make(acl=["nobody"])),
    ),
}
#: per language, the questions of a batch run (where the strategy has ``run_batch``)
BATCH: dict[str, tuple[int, ...]] = {"en": (0, 1, 3), "zh": (0, 2, 3)}
#: per language, questions asked only in the batch run, so that only batch strategies (Search-o1) meet
#: them: two searches one character apart (server.NEAR_QUERY_MARK), a second part, not a repeat;
#: facts that only restate the query, their words spread over two passages (server.RESTATE_MARK)
BATCH_ONLY: dict[str, tuple[str, ...]] = {
    "en": ("Which is a comedy film, The Million Dollar Duck or Don Quixote?",),  # server.RESTATE_MARK
    "zh": ("北京冬奥会和冬残奥会的开幕日期分别是什么时候？",),  # server.NEAR_QUERY_MARK
}


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


_INDEX_DIRS: dict[str, tempfile.TemporaryDirectory[str]] = {}


def check_lang(lang: str) -> str:
    """``lang`` if the probe covers it (raises ValueError naming the languages otherwise)."""
    if lang not in LANGS:
        raise ValueError(f"the probe has no language {lang!r}; it has {', '.join(LANGS)}")
    return lang


@lru_cache(maxsize=len(LANGS))
def probe_index(lang: str) -> Retriever:
    """Language ``lang``'s probe corpus in Sleuth's embedded index (lexical), built once per process."""
    from sleuth.search import Index

    tmp = _INDEX_DIRS[check_lang(lang)] = tempfile.TemporaryDirectory(prefix=f"sleuth-probe-{lang}-")
    target = Path(tmp.name) / "index"
    Index.build([CORPUS[lang]], target, format="auto", dense=False)
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
    default counts even where the short probe never reaches it (a threshold, a limit);
    a field at its ``neutral`` value (an opt-in option switched off: the behaviour before
    it existed, :func:`sleuth.strategies.options.option`) is left out, so adding one does
    not make older records stale.
    """
    opts = getattr(strategy, "opts", None)
    typed = None
    neutral: dict[str, Any] = {}
    if dataclasses.is_dataclass(opts) and not isinstance(opts, type):
        neutral = {f.name: f.metadata["neutral"] for f in dataclasses.fields(opts) if "neutral" in f.metadata}
        typed = {k: v for k, v in dataclasses.asdict(opts).items() if k not in neutral or v != neutral[k]}
    given = {k: v for k, v in dict(strategy.options).items() if k not in neutral or v != neutral[k]}
    return {
        "k": strategy.k,
        "max_steps": strategy.max_steps,
        "max_tokens": strategy.max_tokens,
        "lang": strategy.lang,
        "options": given,
        "typed": typed,
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


def run_probe(name: str, lang: str) -> dict[str, Any]:
    """Run strategy ``name`` over language ``lang``'s :data:`QUESTIONS` against its own probe
    index (and its :data:`BATCH`, if the strategy has ``run_batch``).

    One probe at a time per process (worker threads may ask for fingerprints together).
    """
    check_lang(lang)
    with _PROBE_LOCK:
        return _run_probe(name, lang)


def _run_probe(name: str, lang: str) -> dict[str, Any]:
    from sleuth.llm.openai_compat import OpenAICompatLLM

    retriever = RecordingRetriever(probe_index(lang))
    with ProbeServer() as server:
        llm = OpenAICompatLLM(server.base_url, "probe", max_retries=0, timeout=30.0)
        try:
            try:
                strategy = build_strategy(name, llm, retriever)
            except Exception as e:  # a strategy that cannot be built with defaults: that is its behaviour
                return {"build": raised(e)}
            runs = []
            for question, filters in QUESTIONS[lang]:
                try:
                    done = outcome(strategy.run(question, filters=filters))
                except Exception as e:
                    done = {"raised": raised(e)}
                requests = [{"path": p, "body": b} for p, b in server.take()]
                runs.append({"question": question, "requests": requests, "searches": retriever.take(), **done})
            batch = None
            if callable(getattr(strategy, "run_batch", None)):
                try:
                    questions = [QUESTIONS[lang][i][0] for i in BATCH[lang]] + list(BATCH_ONLY[lang])
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
