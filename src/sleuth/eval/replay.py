"""A record's own model replies and search results, served again to the running code:
``sleuth eval verify DIR --replay``.

The code fingerprint (:mod:`sleuth.eval.fingerprint`) runs a short probe, so a change that only
shows on a reply the probe never writes (a reply cut at ``max_tokens`` inside its answer line, a
refusal worded with an adverb) keeps every record "current" although the running code would
answer some of them differently. Running the records again on the model finds them, at the
model's price. A replay finds them for free: :class:`Replay` hands the running strategy the
completions the record holds, in the order they were made (:attr:`Replay.llm`), and the passages
its searches returned (:meth:`Replay.serve`; whole, looked up by id in an index of the run's
corpus, so no embedding model is needed). If the code now asks what it asked then, the replay
walks the record's path and ends where the code now ends; the step-by-step comparison of
:mod:`sleuth.eval.verify` then shows whether the answer, the short answer or the steps changed.
If it asks something else (a prompt of another length, one call more, another query), the
record no longer answers it and the replay says where it parted: that record needs the model
(``sleuth eval ... --redo ID``).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from sleuth.llm.base import Completion, GenParams, LLMError, Message, OnDelta, Usage, prompt_chars, prompt_digest
from sleuth.search.base import Filters, Passage


class ReplayExhausted(LLMError):
    """The running code asks for more model calls than the record holds."""

    reason = "llm_replay_exhausted"


class Replay:
    """One record, served again: its ``llm`` events through :attr:`llm` (each call returns the next
    recorded completion, finish reason and usage, whatever it is asked) and its ``search`` events
    through :meth:`serve` (each search the passages the recorded one returned, with their
    recorded scores).

    ``parted`` names the first step at which the running code asked something the record does not
    answer: a prompt of another length than the recorded one (``prompt_chars``) or, where the record
    has its digest (``prompt_sha``, recorded since stop 43), of other text; another query,
    fewer passages than were returned, a search past the record's. From there on the replies
    answer another question. A model call past the recorded ones raises :class:`ReplayExhausted`.
    (A search that now asks for more passages than were returned cannot be told from one whose
    index had no more: the record's count is served.)
    """

    def __init__(self, record: Mapping[str, Any]) -> None:
        result = record.get("result") or {}
        trace = result.get("trace") or []
        self._calls = [ev.get("data") or {} for ev in trace if ev.get("kind") == "llm"]
        self._searches = [ev.get("data") or {} for ev in trace if ev.get("kind") == "search"]
        self._passages: Mapping[str, Passage] = {}
        self.calls_served = self.searches_served = 0
        self.parted = ""
        self.llm = _ReplayLLM(self, str(result.get("model") or "replay"))

    @property
    def calls_recorded(self) -> int:
        """How many model calls the record holds (:attr:`calls_served` says how many were asked for)."""
        return len(self._calls)

    def serve(self, passages: Mapping[str, Passage] | None) -> _ReplayRetriever | None:
        """The retriever that serves the record's searches, its passages looked up in ``passages``
        (the run's, by id: :func:`passages_of`); None for a run without retrieval."""
        if passages is None:
            return None
        self._passages = passages
        return _ReplayRetriever(self)

    def _part(self, why: str) -> None:
        if not self.parted:
            self.parted = why

    def parting(self, fresh: Mapping[str, Any]) -> str:
        """Where the replay of ``fresh`` (the task's new record) stopped telling what the model would
        do ("" when it never did). Code that now stops earlier is replayed faithfully: the
        comparison of the steps shows it."""
        if self.parted:
            return self.parted
        if fresh.get("reason") == ReplayExhausted.reason:
            n = self.calls_served
            return f"LLM call {n + 1}: the running code makes more model calls than the record's {n}"
        return ""

    # -- the model
    def complete_next(self, prompt: str | Sequence[Message]) -> Completion:
        if self.calls_served >= len(self._calls):
            raise ReplayExhausted(f"the running code makes more model calls than the record's {len(self._calls)}")
        d = self._calls[self.calls_served]
        self.calls_served += 1
        call = f"LLM call {self.calls_served} ({d.get('step') or 'unnamed'})"
        then, now = d.get("prompt_chars"), prompt_chars(prompt)
        if then is not None and int(then) != now:
            self._part(f"{call}: the prompt is {now} characters now, {then} then")
        elif d.get("prompt_sha") and d["prompt_sha"] != prompt_digest(prompt):
            self._part(f"{call}: the prompt has the same length but other text")
        u = d.get("usage") or {}
        usage = Usage(
            int(u.get("prompt_tokens") or 0),
            int(u.get("completion_tokens") or 0),
            int(u.get("cached_prompt_tokens") or 0),
            int(u.get("processed_prompt_tokens") or 0),
        )
        return Completion(str(d.get("completion") or ""), str(d.get("finish_reason") or "stop"), usage)

    # -- search
    def search_next(self, query: str, k: int) -> list[Passage]:
        n = self.searches_served = self.searches_served + 1
        if n > len(self._searches):
            self._part(f"search {n}: the running code searches more than the record's {len(self._searches)} times")
            return []
        d = self._searches[n - 1]
        then = d.get("passages") or []
        if str(d.get("query", "")) != query:
            self._part(f"search {n}: the query is {query!r} now, {d.get('query')!r} then")
        elif k < len(then):
            self._part(f"search {n}: {k} passages asked now, {len(then)} returned then")
        out = []
        for b in then:
            p = self._passages.get(str(b.get("id")))
            if p is None:
                self._part(f"search {n}: passage {b.get('id')} is not in the run's index")
                return []
            out.append(replace(p, score=float(b.get("score") or 0.0), found_by=[]))
        return out[:k]


class _ReplayLLM:
    """:class:`Replay`'s model (the LLM protocol)."""

    def __init__(self, replay: Replay, model: str) -> None:
        self._replay = replay
        self.model = model

    def complete(self, prompt: str, params: GenParams | None = None, *, on_delta: OnDelta | None = None) -> Completion:
        return _streamed(self._replay.complete_next(prompt), on_delta)

    def chat(
        self, messages: Sequence[Message], params: GenParams | None = None, *, on_delta: OnDelta | None = None
    ) -> Completion:
        return _streamed(self._replay.complete_next(messages), on_delta)


class _ReplayRetriever:
    """:class:`Replay`'s retriever (the retriever protocol)."""

    name = "replay"

    def __init__(self, replay: Replay) -> None:
        self._replay = replay

    def search(self, query: str, k: int = 5, filters: Filters | None = None) -> list[Passage]:
        return self._replay.search_next(query, k)

    def search_batch(self, queries: Sequence[str], k: int = 5, filters: Filters | None = None) -> list[list[Passage]]:
        return [self._replay.search_next(q, k) for q in queries]


def _streamed(c: Completion, on_delta: OnDelta | None) -> Completion:
    if on_delta is not None and c.text:
        on_delta(c.text)
    return c


_LOOKUPS: dict[int, tuple[Any, dict[str, Passage]]] = {}
_LOOKUPS_LOCK = threading.Lock()


def passages_of(index: Any) -> dict[str, Passage]:
    """Every live passage of ``index`` (an :class:`~sleuth.search.index.Index`) by id, read once
    per index (the index is held, so its id names it while the lookup lives)."""
    if not hasattr(index, "store"):
        raise TypeError(f"a replay looks passages up in a Sleuth index; {type(index).__name__} has no passage store")
    with _LOOKUPS_LOCK:
        got = _LOOKUPS.get(id(index))
        if got is None:
            got = _LOOKUPS[id(index)] = (index, {p.id: p for _, p in index.store.iter_live()})
        return got[1]
