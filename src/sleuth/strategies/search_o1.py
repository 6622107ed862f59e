"""Search-o1 (Li et al., 2025): agentic search with Reason-in-Documents.

The model reasons in one growing, append-only completion prompt and may write
``<|begin_search_query|> q <|end_search_query|>``.  Generation stops at the
end tag; Sleuth takes the last query, searches, and runs Reason-in-Documents
(a separate call that reads the previous reasoning, the query and the
documents and writes only the useful facts).  The facts are inserted between
``<|begin_search_result|>`` and ``<|end_search_result|>`` and generation
resumes.  A per-question search limit and a repeated-query guard insert a
short notice instead of searching.  The final answer is read from
``\\boxed{...}`` (or "Final answer:"); at the turn limit it is forced by
appending "... the final answer is \\boxed{".

:meth:`SearchO1.run_batch` runs many questions step-synchronously (as
FlashRAG's reasoning pipeline does): generate for the active questions
concurrently, search their queries in batches (``search_batch``), condense
concurrently, continue; finished questions leave the batch.  Questions are
fed from a queue so that ``concurrency`` LLM calls stay in flight instead of
every round waiting for its slowest question.
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from sleuth.llm.base import LLMError
from sleuth.search.base import Filters, Passage, SearchError
from sleuth.strategies.base import (
    BAD_INPUT,
    FINISHED,
    STEP_LIMIT,
    BadQuestion,
    Listener,
    Result,
    RunState,
    Strategy,
    StrategyAbort,
)
from sleuth.strategies.options import SearchO1Options
from sleuth.strategies.parsing import (
    BEGIN_RESULT,
    END_QUERY,
    END_RESULT,
    parse_reason_in_documents,
    parse_search_o1,
)
from sleuth.strategies.text import clean_short, format_passages, normalize_query, sanitize, tail

STOPS = [END_QUERY, BEGIN_RESULT, "\nQuestion:", "\n问题："]
_NOTHING = re.compile(
    r"^\W*(?:no\s+(?:helpful|useful|relevant)\s+information|nothing\s+(?:(?:was|is)\s+)?found"
    r"|no\s+(?:relevant\s+|helpful\s+)?(?:information|documents?|facts?)\s+(?:(?:was|were)\s+)?found"
    r"|没有找到|未找到|没有有用的信息|无有用信息|没有相关)",
    re.I,
)


@dataclass
class O1Run:
    """Per-question state of a Search-o1 run."""

    st: RunState
    prompt: str
    start: int
    turns: int = 0
    searches: int = 0
    seen: set[str] = field(default_factory=set)
    pending: str | None = None  # a query waiting for search
    refused: int = 0  # consecutive queries answered with a notice instead of a search
    done: bool = False

    @property
    def reasoning(self) -> str:
        return self.prompt[self.start :]


class SearchO1(Strategy):
    """Options: :class:`~sleuth.strategies.options.SearchO1Options` (``max_searches``,
    ``max_turns``, ``rid_max_tokens``, ``doc_chars``, ``max_prompt_chars``, ``max_refusals``,
    ``batch_window_s``)."""

    name = "search-o1"
    needs_retriever = True
    Options = SearchO1Options
    opts: SearchO1Options

    @property
    def max_searches(self) -> int:
        return self.opts.max_searches

    @property
    def max_prompt_chars(self) -> int:
        """Force the answer before the growing prompt can overflow the model's window."""
        return self.opts.max_prompt_chars

    @property
    def max_turns(self) -> int:
        return self.opts.max_turns

    # -- one question -------------------------------------------------------------
    def solve(self, question: str, st: RunState) -> None:
        run = self.new_run(question, st)
        while not run.done:
            self.advance(run)
            if run.pending is not None:
                query = run.pending
                try:
                    passages = self.retrieve(st, query, route="search_o1")
                except SearchError as e:
                    self.search_failed(run, e)
                    continue
                self.condense(run, passages)

    def new_run(self, question: str, st: RunState) -> O1Run:
        prompt = self.prompt(st, "search_o1", question=question, max_searches=self.max_searches)
        return O1Run(st=st, prompt=prompt, start=len(prompt))

    def advance(self, run: O1Run) -> None:
        """One reasoning turn: generate until a query, an answer or the end."""
        st = run.st
        if run.turns >= self.max_turns:
            st.emit("note", type="step_limit", message=f"{run.turns} turns used; forcing the final answer")
            self.force_answer(run, STEP_LIMIT)
            return
        if len(run.prompt) > self.max_prompt_chars:
            st.emit(
                "note",
                type="context_full",
                message=f"prompt reached {len(run.prompt)} characters; forcing the final answer",
            )
            self.force_answer(run, STEP_LIMIT)
            return
        run.turns += 1
        c = self.generate(st, run.prompt, step=f"reason {run.turns}", stop=STOPS)
        step = parse_search_o1(c.text)
        if step.query is not None:
            run.prompt += step.consumed + END_QUERY + "\n"
            key = normalize_query(step.query)
            refusal = None
            if run.searches >= self.max_searches:
                refusal = ("search_o1_limit", "search_limit")
            elif key in run.seen:
                refusal = ("search_o1_repeat", "repeated_query")
            if refusal is not None:
                self.insert(run, self.prompt(st, refusal[0]), note=refusal[1], query=step.query)
                run.refused += 1
                if run.refused >= self.opts.max_refusals:
                    st.emit(
                        "note",
                        type="repeat_guard",
                        message=f"{run.refused} refused queries in a row; forcing the final answer",
                    )
                    self.force_answer(run, STEP_LIMIT)
            else:
                run.refused = 0
                run.seen.add(key)
                run.searches += 1
                run.pending = step.query
                st.emit("follow_up", question=step.query, step=run.turns, type="search_query")
            return
        run.prompt += step.consumed
        if step.answer is not None:
            self.set_answer(run, step.answer, FINISHED)
            return
        if c.finish_reason == "length" and c.text.strip():
            return  # still reasoning: next turn continues the same text
        st.emit("note", type="no_answer", message="the model stopped without a query or an answer; forcing it")
        self.force_answer(run, FINISHED)

    def condense(self, run: O1Run, passages: list[Passage]) -> None:
        """Reason-in-Documents, then insert the result block and resume."""
        st, query = run.st, run.pending or ""
        run.pending = None
        if self.retriever is None:
            self.insert(run, self.prompt(st, "search_o1_unavailable"), note="no_retriever", query=query)
            return
        if not passages:
            self.insert(run, self.prompt(st, "search_o1_rid_empty"), note="no_passages", query=query)
            return
        docs = format_passages(passages, max_chars=self.opts.doc_chars, budget=self.context_chars(st))
        c = self.ask(
            st,
            self.prompt(
                st, "search_o1_rid", reasoning=tail(run.reasoning, 2000) or "(none yet)", query=query, documents=docs
            ),
            step=f"reason-in-documents {run.searches}",
            max_tokens=self.opts.rid_max_tokens,
        )
        info = sanitize(parse_reason_in_documents(c.text), 800) or self.prompt(st, "search_o1_rid_empty")
        helpful = not _NOTHING.search(info)
        if helpful:  # passages the facts came from are citations; unhelpful ones are not
            st.cite(passages)
        st.emit("reason_in_documents", query=query, info=info, passages=[p.id for p in passages], helpful=helpful)
        run.prompt += f"{BEGIN_RESULT} {info} {END_RESULT}\n"

    def search_failed(self, run: O1Run, e: Exception) -> None:
        run.pending = None
        self.insert(run, self.prompt(run.st, "search_o1_unavailable"), note="search_failed", query=str(e)[:200])

    def insert(self, run: O1Run, notice: str, *, note: str, query: str) -> None:
        run.st.emit("note", type=note, query=query, message=notice)
        run.prompt += f"{BEGIN_RESULT} {notice} {END_RESULT}\n"

    def force_answer(self, run: O1Run, reason: str) -> None:
        run.prompt += self.prompt(run.st, "search_o1_force")
        c = self.generate(run.st, run.prompt, step="final answer", stop=["}", "\n"], max_tokens=48)
        run.prompt += c.text + "}"
        self.set_answer(run, clean_short(c.text), reason)

    def set_answer(self, run: O1Run, answer: str, reason: str) -> None:
        r = run.st.result
        r.short_answer = clean_short(answer)
        r.answer = answer
        r.finish_reason = reason
        run.st.emit("note", type="reasoning", text=tail(run.reasoning, 4000))
        run.done = True

    # -- many questions, step-synchronous --------------------------------------------
    def run_batch(
        self,
        questions: Sequence[str],
        *,
        filters: Filters | None = None,
        concurrency: int = 8,
        listeners: Sequence[Listener] = (),
    ) -> list[Result]:
        """Answer ``questions`` together; results in input order, each with its finish reason.

        Each question steps turn -> search -> Reason-in-Documents -> turn ...;
        ``concurrency`` LLM calls (turns and Reason-in-Documents) stay in flight,
        fed from a queue of active questions, so one slow question no longer
        idles the others.  The queries of the questions whose turn ended are
        searched together in one ``search_batch``, flushed when no turn is in
        flight, when a slot would otherwise stay idle, or ``batch_window_s``
        (option, default 0.05 s) after the first one waited; their Reason-in-
        Documents calls then join the in-flight calls.
        Finished questions leave the batch.
        """
        results: list[Result | None] = [None] * len(questions)
        runs: dict[int, O1Run] = {}
        for i, q in enumerate(questions):
            try:
                st = self.begin(q, filters=filters, listeners=listeners)
            except BadQuestion as e:
                results[i] = Result(question=str(q)[:200], strategy=self.name, finish_reason=BAD_INPUT, error=str(e))
                continue
            runs[i] = self.new_run(st.result.question, st)

        def guarded(fn: Callable[..., None], run: O1Run, *args: object) -> None:
            try:
                fn(run, *args)
            except (StrategyAbort, LLMError, SearchError) as e:
                self.fail(run.st, e)
                run.done = True
                run.pending = None

        window = self.opts.batch_window_s
        width = max(1, concurrency)
        queue: deque[O1Run] = deque(runs[i] for i in sorted(runs))  # active, ready for a reasoning turn
        inflight: dict[Future[None], tuple[str, O1Run]] = {}  # LLM calls: "gen" (turn) or "rid" (condense)
        ready: list[O1Run] = []  # turn done, query waiting for the next search batch
        ready_since = 0.0
        rounds: dict[int, int] = {}

        def flush() -> None:
            try:
                found = self.retrieve_many([r.st for r in ready], [r.pending or "" for r in ready], route="search_o1")
            except SearchError as e:
                for r in ready:
                    self.search_failed(r, e)
                    queue.append(r)
            else:
                for r, passages in zip(ready, found, strict=True):
                    inflight[pool.submit(guarded, self.condense, r, passages)] = ("rid", r)
            ready.clear()

        with ThreadPoolExecutor(max_workers=width) as pool:
            while queue or inflight or ready:
                while queue and len(inflight) < width:  # keep `concurrency` LLM calls busy
                    r = queue.popleft()
                    rounds[id(r)] = rounds.get(id(r), 0) + 1
                    inflight[pool.submit(guarded, self.advance, r)] = ("gen", r)
                generating = any(kind == "gen" for kind, _ in inflight.values())
                now = time.perf_counter()
                idle_slot = not queue and len(inflight) < width  # waiting would leave a slot unused
                if ready and (not generating or idle_slot or now - ready_since >= window):
                    flush()  # every turn of this wave is in, a slot is free, or the window is over
                    continue
                timeout = max(0.0, ready_since + window - now) if ready else None
                done, _ = wait(inflight, timeout=timeout, return_when=FIRST_COMPLETED)
                for fut in done:
                    kind, r = inflight.pop(fut)
                    fut.result()  # unexpected errors end the batch, as before
                    if r.done:
                        r.st.emit("note", type="batch", message=f"left the batch after round {rounds[id(r)]}")
                    elif kind == "gen" and r.pending is not None:
                        if not ready:
                            ready_since = time.perf_counter()
                        ready.append(r)
                    else:
                        queue.append(r)
        for i, run in runs.items():
            results[i] = self.finish(run.st)
        return [r for r in results if r is not None]
