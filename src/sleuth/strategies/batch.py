"""Step-synchronous batches for Search-o1, as FlashRAG's reasoning pipeline runs them.

:meth:`SearchO1.run_batch <sleuth.strategies.search_o1.SearchO1.run_batch>` runs many questions at once from the
steps that strategy exposes (``start_run``, ``reason``, ``search_queries``, ``condense``, ``search_failed``): a
*reasoning step* for each active question (``concurrency`` LLM calls in flight, fed from a queue, so one slow question
never idles the others); the queries those steps end on are searched together in one *search step*
(:meth:`_Schedule._search_due` says when); a *condense step* for each searched question; and again.  An invalid
question gets a ``bad_input`` result at once; a finished one leaves the batch (a ``batch`` note says after which of
its rounds); the results come in input order.

An LLM or search failure (or a :class:`~sleuth.strategies.base.StrategyAbort`) ends only the question it hit; a search
step that fails is reported to each of its questions, which then reason on.  Any other exception ends the whole batch.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING

from sleuth.llm.base import LLMError
from sleuth.search.base import Filters, SearchError
from sleuth.strategies.base import BadQuestion, StrategyAbort
from sleuth.strategies.result import BAD_INPUT, Listener, Result

if TYPE_CHECKING:
    from sleuth.strategies.search_o1 import O1Run, SearchO1


def run_batch(
    steps: SearchO1,
    questions: Sequence[str],
    *,
    filters: Filters | None,
    listeners: Sequence[Listener],
    concurrency: int,
) -> list[Result]:
    """Step every question to its end; results in input order, each with its finish reason."""
    results: list[Result] = []
    runs: list[O1Run] = []
    for q in questions:
        try:
            st = steps.begin(q, filters=filters, listeners=listeners)
        except BadQuestion as e:
            results.append(Result(question=str(q)[:200], strategy=steps.name, finish_reason=BAD_INPUT, error=str(e)))
            continue
        results.append(st.result)
        runs.append(steps.start_run(st.result.question, st))
    _Schedule(steps, width=max(1, concurrency), window=steps.opts.batch_window_s).drive(runs)
    for run in runs:
        steps.finish(run.st)
    return results


class _Schedule:
    """The queue, the LLM calls in flight and the queries waiting for the next search step."""

    def __init__(self, steps: SearchO1, *, width: int, window: float) -> None:
        self.steps = steps
        self.width = width
        self.window = window
        self.queue: deque[O1Run] = deque()  # active, ready for a reasoning step
        self.inflight: dict[Future[None], tuple[str, O1Run]] = {}  # LLM calls: "reason" or "condense"
        self.ready: list[O1Run] = []  # reasoning step done, query waiting for the next search step
        self.ready_since = 0.0
        self.rounds: dict[int, int] = {}

    def drive(self, runs: Sequence[O1Run]) -> None:
        self.queue.extend(runs)
        with ThreadPoolExecutor(max_workers=self.width) as pool:
            while self.queue or self.inflight or self.ready:
                self._fill(pool)
                now = time.perf_counter()
                if self._search_due(now):
                    self._search(pool)
                    continue
                timeout = max(0.0, self.ready_since + self.window - now) if self.ready else None
                done, _ = wait(self.inflight, timeout=timeout, return_when=FIRST_COMPLETED)
                self._collect(done)

    def _fill(self, pool: ThreadPoolExecutor) -> None:
        """Keep ``width`` LLM calls busy with reasoning steps from the queue."""
        while self.queue and len(self.inflight) < self.width:
            r = self.queue.popleft()
            self.rounds[id(r)] = self.rounds.get(id(r), 0) + 1
            self.inflight[pool.submit(self._guarded, self.steps.reason, r)] = ("reason", r)

    def _search_due(self, now: float) -> bool:
        """The waiting queries are searched when no reasoning step is in flight, when an LLM slot would
        otherwise stay idle, or ``window`` seconds (option ``batch_window_s``) after the first of them began to wait."""
        if not self.ready:
            return False
        reasoning = any(kind == "reason" for kind, _ in self.inflight.values())
        idle_slot = not self.queue and len(self.inflight) < self.width
        return not reasoning or idle_slot or now - self.ready_since >= self.window

    def _search(self, pool: ThreadPoolExecutor) -> None:
        """One search step for every waiting query; their condense steps join the calls in flight."""
        try:
            found = self.steps.search_queries(self.ready)
        except SearchError as e:
            for r in self.ready:
                self.steps.search_failed(r, e)
                self.queue.append(r)
        else:
            for r, passages in zip(self.ready, found, strict=True):
                self.inflight[pool.submit(self._guarded, self.steps.condense, r, passages)] = ("condense", r)
        self.ready.clear()

    def _collect(self, done: set[Future[None]]) -> None:
        """Route each finished call's question: out of the batch, to the next search, or back to the queue."""
        for fut in done:
            kind, r = self.inflight.pop(fut)
            fut.result()  # unexpected errors end the batch
            if r.done:
                r.st.emit("note", type="batch", message=f"left the batch after round {self.rounds[id(r)]}")
            elif kind == "reason" and r.pending is not None:
                if not self.ready:
                    self.ready_since = time.perf_counter()
                self.ready.append(r)
            else:
                self.queue.append(r)

    def _guarded(self, step: Callable[..., None], run: O1Run, *args: object) -> None:
        """Run one step; a backend failure ends only this question."""
        try:
            step(run, *args)
        except (StrategyAbort, LLMError, SearchError) as e:
            self.steps.fail(run.st, e)
            run.done = True
            run.pending = None
