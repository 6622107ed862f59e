"""The :class:`Strategy` base class that records LLM calls and searches, and the per-run :class:`RunState`; what a run
returns is in :mod:`sleuth.strategies.result`.

A strategy only talks to the outside world through :meth:`Strategy.generate`, :meth:`Strategy.chat` and
:meth:`Strategy.retrieve`; those record each step in the trace, emit it to listeners (CLI, SSE) and turn backend
failures into finish reasons instead of tracebacks.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from sleuth.lang.question import Question, analyze
from sleuth.llm.base import LLM, Completion, GenParams, LLMError, Message, prompt_chars
from sleuth.search.base import Filters, Passage, Retriever, SearchError
from sleuth.strategies.conversation import (
    REWRITE_MAX_TOKENS,
    Turn,
    fit,
    kept_entity,
    parse_history,
    parse_rewrite,
    render_history,
    resolved_nothing,
    with_context,
)
from sleuth.strategies.grounding import Claim, ground, renumber
from sleuth.strategies.options import StrategyOptions
from sleuth.strategies.prompts import render
from sleuth.strategies.repairs import fired
from sleuth.strategies.repairs.support import seen_passages, unsupported_note
from sleuth.strategies.result import ERROR, LLM_UNAVAILABLE, SEARCH_UNAVAILABLE, Event, Listener, Result
from sleuth.strategies.text import strip_scaffold
from sleuth.text_input import BadText, check_text


class StrategyAbort(Exception):
    """Raised inside a run to stop it with a finish reason (caught by :meth:`Strategy.run`)."""

    def __init__(self, reason: str, message: str = "") -> None:
        super().__init__(message or reason)
        self.reason = reason


@dataclass
class RunState:
    """Mutable per-run bookkeeping (one per question; strategies stay stateless)."""

    result: Result
    filters: Filters
    listeners: list[Listener]
    q: Question = None  # type: ignore[assignment]  # the question's analysis, computed once (begin)
    t0: float = field(default_factory=time.perf_counter)
    claims: list[Claim] = field(default_factory=list)  # what the answer rests on (strategies.grounding)

    def __post_init__(self) -> None:
        if self.q is None:
            self.q = analyze(self.result.question, self.result.lang or "auto")

    def emit(self, kind: str, duration_s: float = 0.0, **data: Any) -> Event:
        ev = Event(kind, data, round(time.perf_counter() - self.t0, 4), round(duration_s, 4))
        self.result.trace.events.append(ev)
        for fn in self.listeners:
            try:
                fn(ev)
            except Exception:  # a broken listener must never break a run
                pass
        return ev

    def cite(
        self, passages: Sequence[Passage], claim: str | None = None, query: str = "", marks: Sequence[int] = ()
    ) -> None:
        """Record that ``claim`` was drawn from ``passages`` (without a claim: cite them as given)."""
        self.claims.append(Claim(claim or "", list(passages), query, list(marks), asserted=claim is None))


class Strategy:
    """Base class: subclasses implement :meth:`solve`.

    ``llm`` is any :class:`~sleuth.llm.base.LLM`; ``retriever`` is any :class:`~sleuth.search.base.Retriever` (or
    ``None`` for strategies that do not search).  ``options`` are the strategy's :attr:`Options` (``lang``, ``k``,
    ``max_steps``, ``max_tokens``, ... see :mod:`sleuth.strategies.options`); an unknown key or a bad value raises
    :class:`~sleuth.strategies.options.OptionsError`.
    """

    name = "base"
    needs_retriever = False
    #: the typed options this strategy takes (a subclass of StrategyOptions)
    Options: type[StrategyOptions] = StrategyOptions

    def __init__(self, llm: LLM, retriever: Retriever | None = None, **options: Any) -> None:
        self.opts = self.Options.parse(options, strategy=self.name)
        self.options: Mapping[str, Any] = MappingProxyType(dict(options))  # as given; read values from opts
        self.llm = llm
        self.retriever = retriever
        self.lang = self.opts.lang
        self.k = self.opts.k
        self.max_steps = self.opts.max_steps
        self.max_tokens = self.opts.max_tokens

    # -- public API ---------------------------------------------------------
    def run(
        self,
        question: str,
        *,
        filters: Filters | None = None,
        listeners: Sequence[Listener] = (),
        history: Sequence[Any] | None = None,
    ) -> Result:
        """Answer ``question``; ``history``: the conversation's earlier turns (``{role, content}``,
        roles ``user``/``assistant``), from which the question is first made to stand alone
        (:meth:`standalone`).  The filters are the same whatever the history says."""
        turns = parse_history(history)  # a malformed history is the caller's mistake: BadHistory
        st = self.begin(question, filters=filters, listeners=listeners)
        try:
            if turns:
                self.standalone(st, turns)
            self.solve(st.result.question, st)
        except (StrategyAbort, LLMError, SearchError) as e:
            self.fail(st, e)
        return self.finish(st)

    # -- run lifecycle (shared with batch modes) ------------------------------
    def begin(self, question: str, *, filters: Filters | None = None, listeners: Sequence[Listener] = ()) -> RunState:
        """Validate the question, analyse it once (language, expected answer), emit ``start``."""
        question = validate_question(question)
        q = analyze(question, self.lang)
        result = Result(question=question, strategy=self.name, model=getattr(self.llm, "model", ""), lang=q.lang)
        st = RunState(result, filters or Filters(), list(listeners), q)
        st.emit(
            "start",
            question=question,
            strategy=self.name,
            lang=q.lang,
            filters=st.filters.to_dict(),
            mode=self.opts.mode,
            repairs=self.opts.repairs(),
        )
        return st

    def standalone(self, st: RunState, turns: Sequence[Turn]) -> None:
        """Rewrite the run's question so that it stands alone, from the earlier ``turns``: one short
        LLM call (``prompts/<lang>/rewrite.txt``), recorded as the run's first ``llm`` step and a
        ``rewrite`` event; the strategy then answers the rewritten question.  With the option
        ``rewrite=false`` no call is made and a note says the history went unused."""
        original = st.result.question
        if not self.opts.rewrite:
            st.emit("note", type="history_unused", turns=len(turns), message="rewrite is off: earlier turns unused")
            return
        win = fit(turns, self.opts.history_tokens)
        prompt = self.prompt(st, "rewrite", history=render_history(win.kept, st.result.lang), question=original)
        c = self.ask(st, prompt, step="rewrite", stop=("\n\n",), max_tokens=REWRITE_MAX_TOKENS)
        rewritten = parse_rewrite(c.text, original)
        try:
            rewritten = validate_question(rewritten)
        except BadQuestion:
            rewritten = original
        fallback: str | bool = False
        entity_fix = kept_entity(rewritten, original, win.kept) if self.opts.rewrite_check else None
        if entity_fix:  # the rewrite lost the previous answer the message refers to: put it in
            rewritten, fallback = validate_question(entity_fix[:MAX_QUESTION_CHARS]), "entity"
        elif resolved_nothing(rewritten, original, win.kept):
            # the model repeated a question: search with the one before and the message
            rewritten, fallback = validate_question(with_context(original, win.kept)[-MAX_QUESTION_CHARS:]), "context"
        st.result.question = rewritten
        st.q = analyze(rewritten, st.result.lang)
        st.emit(
            "rewrite",
            original=original,
            question=rewritten,
            turns=len(turns),
            turns_used=len(win.kept),
            dropped_turns=win.dropped_turns,
            dropped_tokens=win.dropped_tokens,
            trimmed=win.trimmed,
            history_tokens=self.opts.history_tokens,
            fallback=fallback,
        )

    @staticmethod
    def fail(st: RunState, e: Exception) -> None:
        """Turn an abort / backend error into the run's finish reason."""
        result = st.result
        if isinstance(e, StrategyAbort):
            result.finish_reason = e.reason
            result.error = str(e) if str(e) != e.reason else result.error
        elif isinstance(e, LLMError):
            result.finish_reason = e.reason if e.reason.startswith("llm_") else LLM_UNAVAILABLE
            result.error = str(e)
        elif isinstance(e, SearchError):
            result.finish_reason = SEARCH_UNAVAILABLE
            result.error = str(e)
        else:  # pragma: no cover - callers pass only the three kinds above
            result.finish_reason = ERROR
            result.error = f"{type(e).__name__}: {e}"

    def finish(self, st: RunState) -> Result:
        """Apply the finishing repairs (``short_support``, ``grounding``), emit ``error``/``answer``."""
        result = st.result
        if self.opts.short_support:
            seen = seen_passages(st.claims, result.trace.events)
            refused = unsupported_note(result.question, result.short_answer, result.answer, seen, st.q.yes_no)
            if refused is not None:  # a short answer nothing in the run states is not returned: the answer stands
                fired(st, "short_support", **refused)
                result.short_answer = ""
        if result.error:
            st.emit("error", reason=result.finish_reason, message=result.error)
        grounds: dict[str, Any] = {}
        if not result.citations and st.claims and not self.opts.grounding:  # every passage the claims drew on
            result.citations = list({p.key: p for c in st.claims for p in c.passages}.values())
        if not result.citations and st.claims:
            g = ground(st.claims, result.short_answer, result.question)
            result.citations, grounds = g.citations, {"grounds": g.picks, "final_grounded": g.final}
            result.answer = renumber(result.answer, st.claims, g.citations)  # [k] is citations[k-1]
            drew_on = len({p.key for c in st.claims for p in c.passages})
            fired(st, "grounding", cited=[p.id for p in g.citations], of=drew_on)
            if not g.citations:  # an honest empty list, not every passage retrieved
                st.emit("note", type="no_citations", message=g.message)
        if result.lang == "zh":  # the reader never sees "所以答案是：…" (English answers: see strip_scaffold)
            result.answer = strip_scaffold(result.answer)
        result.elapsed_s = time.perf_counter() - st.t0
        st.emit(
            "answer",
            answer=result.answer,
            short_answer=result.short_answer,
            finish_reason=result.finish_reason,
            citations=[p.id for p in result.citations],
            **grounds,
        )
        return result

    def solve(self, question: str, st: RunState) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- prompt helpers ---------------------------------------------------------
    def prompt(self, st: RunState, name: str, **fields: Any) -> str:
        """Render ``prompts/<lang>/<name>.txt`` in the run's language.

        A template may also use ``$expected``: the answer the question expects, in words
        (:meth:`~sleuth.lang.question.Question.expected`: "a date or a year", …).
        """
        if "expected" not in fields:
            fields["expected"] = st.q.expected()
        return render(name, st.result.lang, **fields)

    def context_chars(self, st: RunState) -> int:
        """Total characters of documents one prompt may carry (option ``context_chars``)."""
        return self.opts.context_budget(st.result.lang)

    def ask(
        self, st: RunState, text: str, *, step: str, stop: Sequence[str] | None = None, max_tokens: int | None = None
    ) -> Completion:
        """One user message through :meth:`chat` (instruction-style calls)."""
        return self.chat(st, [{"role": "user", "content": text}], step=step, stop=stop, max_tokens=max_tokens)

    # -- recorded primitives -------------------------------------------------
    def generate(
        self, st: RunState, prompt: str, *, step: str, stop: Sequence[str] | None = None, max_tokens: int | None = None
    ) -> Completion:
        """Raw completion, recorded as an ``llm`` event."""
        t = time.perf_counter()
        c = self.llm.complete(prompt, GenParams(max_tokens=max_tokens or self.max_tokens, stop=tuple(stop or ())))
        self._record(st, c, step, time.perf_counter() - t, prompt)
        return c

    def chat(
        self,
        st: RunState,
        messages: Sequence[Message],
        *,
        step: str,
        stop: Sequence[str] | None = None,
        max_tokens: int | None = None,
    ) -> Completion:
        t = time.perf_counter()
        c = self.llm.chat(messages, GenParams(max_tokens=max_tokens or self.max_tokens, stop=tuple(stop or ())))
        self._record(st, c, step, time.perf_counter() - t, messages)
        return c

    def retrieve(self, st: RunState, query: str, *, k: int | None = None, route: str = "query") -> list[Passage]:
        """Search within the run's filters (never widened), recorded as a ``search`` event."""
        if self.retriever is None:
            return []
        t = time.perf_counter()
        passages = self.retriever.search(query, k or self.k, st.filters)
        return _found(st, query, passages, route, time.perf_counter() - t)

    def retrieve_many(
        self, sts: Sequence[RunState], queries: Sequence[str], *, k: int | None = None, route: str = "query"
    ) -> list[list[Passage]]:
        """One ``search_batch`` for several runs that share the same filters.

        Each run gets its own ``search`` event; runs with different filters
        are searched separately (a scope is never shared or widened).
        """
        out: list[list[Passage]] = [[] for _ in queries]
        if self.retriever is None:
            return out
        groups: dict[str, list[int]] = {}
        for i, st in enumerate(sts):
            groups.setdefault(st.filters.cache_key(), []).append(i)
        for idx in groups.values():
            filters = sts[idx[0]].filters
            t = time.perf_counter()
            batch = self.retriever.search_batch([queries[i] for i in idx], k or self.k, filters)
            dt = (time.perf_counter() - t) / max(1, len(idx))
            for i, passages in zip(idx, batch, strict=False):
                out[i] = _found(sts[i], queries[i], passages, route, dt, batched=len(idx))
        return out

    def _record(self, st: RunState, c: Completion, step: str, dt: float, prompt: str | Sequence[Message]) -> None:
        r = st.result
        r.llm_calls, r.llm_seconds, r.usage = r.llm_calls + 1, r.llm_seconds + dt, r.usage + c.usage
        data = {"step": step, "completion": c.text, "finish_reason": c.finish_reason, "usage": c.usage.to_dict()}
        st.emit("llm", dt, **data, from_cache=c.from_cache, prompt_chars=prompt_chars(prompt))


def _found(st: RunState, query: str, passages: list[Passage], route: str, dt: float, **extra: Any) -> list[Passage]:
    """The passages within the run's filters (defence in depth), marked as found by ``route``, as a ``search`` event."""
    passages = [p for p in passages if st.filters.matches(p)]
    for p in passages:
        if route not in p.found_by:
            p.found_by = [*p.found_by, route]
    st.result.searches += 1
    st.result.search_seconds += dt
    st.emit("search", dt, query=query, route=route, passages=[_brief(p) for p in passages], **extra)
    return passages


def _brief(p: Passage) -> dict[str, Any]:
    brief = {k: getattr(p, k) for k in ("id", "doc_id", "title", "score", "source", "section", "version", "text")}
    return brief | {"score": round(p.score, 4), "text": p.text[:500], "found_by": p.found_by}


MAX_QUESTION_CHARS = 4000


class BadQuestion(ValueError):
    """The question is empty, too long, or holds characters :mod:`sleuth.text_input` refuses
    (lone surrogates, NUL, control characters): a user mistake, reported in one sentence."""


def validate_question(q: Any) -> str:
    try:
        check_text(q, "the question")  # lone surrogates, NUL, control characters: sleuth.text_input
    except BadText as e:
        raise BadQuestion(str(e)) from None
    q = q.strip()
    if not q:
        raise BadQuestion("the question is empty")
    if len(q) > MAX_QUESTION_CHARS:
        raise BadQuestion(f"the question is {len(q)} characters long; the limit is {MAX_QUESTION_CHARS}")
    return q
