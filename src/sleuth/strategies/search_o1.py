"""Search-o1 (Li et al., 2025): agentic search with Reason-in-Documents.

1. prompt = instructions, one worked example, ``Question: Q``, ``Reasoning:``
2. generate (append-only), stopping at ``<|end_search_query|>``
3. a query ``<|begin_search_query|> q <|end_search_query|>``: search q; Reason-in-Documents (a separate
   call over the reasoning so far, the query and the documents) writes the useful facts, inserted as
   ``<|begin_search_result|> … <|end_search_result|>``; go to 2.  Past ``max_searches``, the limit notice
4. the answer is read from ``\\boxed{...}``; at the turn limit or a full prompt it is forced ("\\boxed{").

Repairs (:mod:`sleuth.strategies.repairs`): ``repeat_guard`` (step 3), ``final_read`` (opt-in, after 4).
The steps are methods, so that :mod:`sleuth.strategies.batch` runs many questions step-synchronously.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import sleuth.strategies.parse_search_o1 as o1
from sleuth.lang import NOTHING
from sleuth.search.base import Filters, Passage, SearchError
from sleuth.strategies.base import RunState, Strategy
from sleuth.strategies.batch import run_batch
from sleuth.strategies.options import SearchO1Options
from sleuth.strategies.repairs import fired, repeat_of
from sleuth.strategies.repairs.reading import final_read
from sleuth.strategies.result import FINISHED, REPEAT_LIMIT, STEP_LIMIT, Listener, Result
from sleuth.strategies.text import clean_short, format_passages, sanitize, tail

STOPS = [o1.END_QUERY, o1.BEGIN_RESULT, "\nQuestion:", "\n问题："]


@dataclass
class O1Run:
    """Per-question state of a Search-o1 run."""

    st: RunState
    prompt: str
    start: int
    turns: int = 0
    searches: int = 0
    results: dict[str, str] = field(default_factory=dict)  # each query searched -> the result inserted for it
    found: list[list[Passage]] = field(default_factory=list)  # each search's passages, by rank
    pending: str | None = None  # a query waiting for search
    refused: int = 0  # queries answered with a notice instead of a search (over the limit, repeats)
    done: bool = False


class SearchO1(Strategy):
    """Options: :class:`~sleuth.strategies.options.SearchO1Options`."""

    name = "search-o1"
    needs_retriever = True
    Options = SearchO1Options
    opts: SearchO1Options

    def solve(self, question: str, st: RunState) -> None:
        run = self.start_run(question, st)  # 1.
        while not run.done:
            self.reason(run)  # 2., 4.
            if run.pending is not None:  # 3.
                try:
                    passages = self.retrieve(st, run.pending, route="search_o1")
                except SearchError as e:
                    self.search_failed(run, e)
                    continue
                self.condense(run, passages)

    def start_run(self, question: str, st: RunState) -> O1Run:
        prompt = self.prompt(st, "search_o1", question=question, max_searches=self.opts.max_searches)
        return O1Run(st=st, prompt=prompt, start=len(prompt))

    def reason(self, run: O1Run) -> None:  # one turn: until a search query, an answer or the end
        if run.turns >= self.opts.max_turns or len(run.prompt) > self.opts.max_prompt_chars:
            run.st.emit("note", type="step_limit", message=f"{run.turns} turns, {len(run.prompt)} characters")
            return self.force_answer(run, STEP_LIMIT)
        run.turns += 1
        c = self.generate(run.st, run.prompt, step=f"reason {run.turns}", stop=STOPS)
        step = o1.parse_search_o1(c.text)
        run.prompt += step.consumed
        if step.query is not None:
            run.prompt += o1.END_QUERY + "\n"
            return self._take_query(run, step.query)
        if step.answer is not None:
            return self.set_answer(run, step.answer, FINISHED)
        if not (c.finish_reason == "length" and c.text.strip()):  # else: still reasoning, the next turn goes on
            run.st.emit("note", type="no_answer", message="no query and no answer; forcing the answer")
            self.force_answer(run, FINISHED)

    def _take_query(self, run: O1Run, query: str) -> None:
        """Queue the query for search, or answer it with a notice (a repeat, the search limit)."""
        earlier = repeat_of(query, run.results) if self.opts.repeat_guard else None
        if earlier is None and run.searches < self.opts.max_searches:
            run.results[query], run.searches, run.pending = "", run.searches + 1, query
            run.st.emit("follow_up", question=query, step=run.turns, type="search_query")
            return
        run.refused += 1
        if earlier is not None:  # repair: a repeat gets its earlier result, with a push to something new
            fired(run.st, "repeat_guard", query=query, repeat_of=earlier, refused=run.refused)
            notice = self.prompt(run.st, "search_o1_repeat", query=sanitize(earlier, 200), result=run.results[earlier])
            self._insert(run, run.results[earlier] if run.refused >= self.opts.max_refusals else notice)
        else:
            self._notice(run, "search_o1_limit", note="search_limit", query=query)
        if run.refused >= self.opts.max_refusals:
            self.force_answer(run, STEP_LIMIT if earlier is None else REPEAT_LIMIT)

    def search_queries(self, runs: Sequence[O1Run]) -> list[list[Passage]]:  # batch mode: one search_batch
        return self.retrieve_many([r.st for r in runs], [r.pending or "" for r in runs], route="search_o1")

    def condense(self, run: O1Run, passages: list[Passage]) -> None:  # 3. Reason-in-Documents, insert, resume
        st, query = run.st, run.pending or ""
        run.pending = None
        if not passages:
            run.results[query] = self._notice(run, "search_o1_rid_empty", note="no_passages", query=query)
            return
        run.found.append(passages)
        docs = format_passages(passages, max_chars=self.opts.doc_chars, budget=self.context_chars(st))
        reasoning = tail(run.prompt[run.start :], 2000) or "(none yet)"
        prompt = self.prompt(st, "search_o1_rid", reasoning=reasoning, query=query, documents=docs)
        c = self.ask(st, prompt, step=f"reason-in-documents {run.searches}", max_tokens=self.opts.rid_max_tokens)
        info = sanitize(o1.parse_reason_in_documents(c.text), 800) or self.prompt(st, "search_o1_rid_empty")
        helpful = not NOTHING.search(info)
        if helpful:  # the facts are a claim its citations are grounded in
            st.cite(passages, claim=info, query=query)
        st.emit("reason_in_documents", query=query, info=info, passages=[p.id for p in passages], helpful=helpful)
        run.results[query] = self._insert(run, info)

    def search_failed(self, run: O1Run, e: Exception) -> None:
        run.results[run.pending or ""] = self._notice(run, "search_o1_unavailable", note="search_failed", query=str(e))
        run.pending = None

    def _notice(self, run: O1Run, template: str, *, note: str, query: str) -> str:
        run.st.emit("note", type=note, query=query[:200], message=self.prompt(run.st, template))
        return self._insert(run, self.prompt(run.st, template))

    @staticmethod
    def _insert(run: O1Run, text: str) -> str:
        run.prompt += f"{o1.BEGIN_RESULT} {text} {o1.END_RESULT}\n"
        return text

    def force_answer(self, run: O1Run, reason: str) -> None:
        run.prompt += self.prompt(run.st, "search_o1_force")
        c = self.generate(run.st, run.prompt, step="final answer", stop=["}", "\n"], max_tokens=48)
        run.prompt += c.text + "}"
        self.set_answer(run, clean_short(c.text), reason)

    def set_answer(self, run: O1Run, answer: str, reason: str) -> None:
        """4. The run's answer: the reasoning's, or with the repair ``final_read`` the reading pass's."""
        st = run.st
        st.emit("note", type="reasoning", text=tail(run.prompt[run.start :], 4000))
        found_by = "the reasoning's searches'"  # repair final_read (opt-in):
        answer, short = final_read(self, st, run.found, answer, stage="reasoning", found_by=found_by)
        st.result.short_answer, st.result.answer, st.result.finish_reason = short, answer, reason
        run.done = True

    def run_batch(self, questions: Sequence[str], *, filters: Filters | None = None, concurrency: int = 8,
                  listeners: Sequence[Listener] = ()) -> list[Result]:  # fmt: skip
        """Answer ``questions`` together, step-synchronously (:mod:`sleuth.strategies.batch`)."""
        return run_batch(self, questions, filters=filters, listeners=listeners, concurrency=concurrency)
