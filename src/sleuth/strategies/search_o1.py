"""Search-o1 (Li et al., 2025): agentic search with Reason-in-Documents.

The algorithm, one question:

1. prompt = instructions, one worked example, ``Question: Q``, ``Reasoning:``
2. generate (append-only), stopping at ``<|end_search_query|>``
3. a completion that asks ``<|begin_search_query|> q <|end_search_query|>`` (the
   last query counts): search q, then Reason-in-Documents (a separate call that
   reads the previous reasoning, the query and the documents and writes only the
   useful facts); insert the facts between ``<|begin_search_result|>`` and
   ``<|end_search_result|>`` and go to 2.  The facts are checked against the
   passages (:mod:`sleuth.strategies.rid_support`): a sentence the documents do not
   support is dropped; when none is left (or the model found nothing) the passage
   sentence closest to the query is quoted, else "nothing found" is inserted
4. the final answer is read from ``\\boxed{...}`` (or "Final answer:"); at the turn
   limit, when the prompt is full, after ``max_refusals`` refused queries or when the
   model stops without either, it is forced by appending "... the final answer is
   \\boxed{".
5. (Sleuth's addition, option ``settle_comparison``; ``false`` is the paper's method) a
   comparison's answer is chosen once more, in one short call, from the search results the
   reasoning inserted (yes or no, or one of the options the question names).
6. (Sleuth's addition, option ``final_read``; ``false`` is the paper's method) answer once
   more from the question's own search and the passages the reasoning's searches found
   (:func:`~sleuth.strategies.reading.read_again`, as Self-Ask's final reading pass); the
   reasoning's answer is kept as the run's draft.

The repeat guard steers: a query that repeats an earlier one (same content words, or
a Jaccard overlap of at least 0.8) is not searched again; its earlier result is inserted
again with an instruction to search for something different or to answer.  A completion
that already gave a ``\\boxed{}`` answer and then repeats a query ends with that answer.
A boxed answer that cannot be what the question asks (no numeral for "when" or "how many")
is sent back once with a notice saying what is asked (``search_o1_kind.txt``) while searches
are left.
After ``max_refusals`` repeated queries the answer is forced (finish reason
``repeat_limit``); over the search limit the notice says so and the answer is forced
after ``max_refusals`` refusals (``step_limit``).

The steps are methods (:meth:`SearchO1.start_run`, :meth:`~SearchO1.reason`,
:meth:`~SearchO1.search_queries`, :meth:`~SearchO1.condense`), so that
:meth:`SearchO1.run_batch` can hand them to :mod:`sleuth.strategies.batch`, which runs
many questions step-synchronously as FlashRAG's reasoning pipeline does.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from sleuth.search.base import Filters, Passage, SearchError
from sleuth.strategies.answer_type import answer_type
from sleuth.strategies.base import RunState, Strategy
from sleuth.strategies.batch import StepBatch
from sleuth.strategies.options import SearchO1Options
from sleuth.strategies.parsing import (
    BEGIN_RESULT,
    END_QUERY,
    END_RESULT,
    parse_boxed,
    parse_reason_in_documents,
    parse_search_o1,
)
from sleuth.strategies.reading import read_again
from sleuth.strategies.result import FINISHED, REPEAT_LIMIT, STEP_LIMIT, Listener, Result
from sleuth.strategies.rid_support import closest_sentence, ground
from sleuth.strategies.self_ask_questions import find_comparison
from sleuth.strategies.settle import choose_option
from sleuth.strategies.text import clean_short, format_passages, normalize_query, query_similarity, sanitize, tail

STOPS = [END_QUERY, BEGIN_RESULT, "\nQuestion:", "\n问题："]
_NOTHING = re.compile(
    r"^\W*(?:no\s+(?:helpful|useful|relevant)\s+information|nothing\s+(?:(?:was|is)\s+)?found"
    r"|no\s+(?:relevant\s+|helpful\s+)?(?:information|documents?|facts?)\s+(?:(?:was|were)\s+)?found"
    r"|没有找到|未找到|没有有用的信息|无有用信息|没有相关)",
    re.I,
)
NEAR_DUPLICATE = 0.8  # content-word Jaccard overlap at which a query repeats an earlier one


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
    refused: int = 0  # queries answered with a notice instead of a search (repeats, over the limit)
    kind_steered: bool = False  # an answer of the wrong kind was sent back once
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

    # -- one question: reason, search, condense, until the answer ------------------
    def solve(self, question: str, st: RunState) -> None:
        run = self.start_run(question, st)
        while not run.done:
            self.reason(run)
            if run.pending is None:
                continue
            try:
                passages = self.retrieve(st, run.pending, route="search_o1")
            except SearchError as e:
                self.search_failed(run, e)
                continue
            self.condense(run, passages)

    # -- the steps ---------------------------------------------------------------------
    def start_run(self, question: str, st: RunState) -> O1Run:
        prompt = self.prompt(st, "search_o1", question=question, max_searches=self.max_searches)
        return O1Run(st=st, prompt=prompt, start=len(prompt))

    def reason(self, run: O1Run) -> None:
        """One reasoning turn: generate until a search query, an answer or the end."""
        if self._out_of_room(run):
            self.force_answer(run, STEP_LIMIT)
            return
        run.turns += 1
        c = self.generate(run.st, run.prompt, step=f"reason {run.turns}", stop=STOPS)
        step = parse_search_o1(c.text)
        if step.query is not None:
            run.prompt += step.consumed + END_QUERY + "\n"
            self._take_query(run, step.query, answered=parse_boxed(c.text))
            return
        run.prompt += step.consumed
        if step.answer is not None:
            if not self._answer_of_wrong_kind(run, step.answer):
                self.set_answer(run, step.answer, FINISHED)
            return
        if c.finish_reason == "length" and c.text.strip():
            return  # still reasoning: next turn continues the same text
        run.st.emit("note", type="no_answer", message="the model stopped without a query or an answer; forcing it")
        self.force_answer(run, FINISHED)

    def search_queries(self, runs: Sequence[O1Run]) -> list[list[Passage]]:
        """The pending queries of several questions, in one ``search_batch`` (batch mode)."""
        return self.retrieve_many([r.st for r in runs], [r.pending or "" for r in runs], route="search_o1")

    def condense(self, run: O1Run, passages: list[Passage]) -> None:
        """Reason-in-Documents, then insert the result block and resume."""
        st, query = run.st, run.pending or ""
        run.pending = None
        if self.retriever is None:
            run.results[query] = self.insert(
                run, self.prompt(st, "search_o1_unavailable"), note="no_retriever", query=query
            )
            return
        if not passages:
            run.results[query] = self.insert(
                run, self.prompt(st, "search_o1_rid_empty"), note="no_passages", query=query
            )
            return
        run.found.append(passages)
        docs = format_passages(passages, max_chars=self.opts.doc_chars, budget=self.context_chars(st))
        c = self.ask(
            st,
            self.prompt(
                st, "search_o1_rid", reasoning=tail(run.reasoning, 2000) or "(none yet)", query=query, documents=docs
            ),
            step=f"reason-in-documents {run.searches}",
            max_tokens=self.opts.rid_max_tokens,
        )
        info = self._grounded(run, parse_reason_in_documents(c.text), passages, query)
        helpful = not _NOTHING.search(info)
        if helpful:  # the facts are a claim its citations are grounded in; unhelpful ones are not
            st.cite(passages, claim=info, query=query)
        run.results[query] = info
        run.prompt += f"{BEGIN_RESULT} {info} {END_RESULT}\n"

    def _grounded(self, run: O1Run, raw: str, passages: list[Passage], query: str) -> str:
        """The sentences the passages support (:mod:`~sleuth.strategies.rid_support`); when none
        is left, the passage sentence closest to the query, quoted; else "nothing found"."""
        g = ground(raw, passages, query) if raw and not _NOTHING.search(raw) else None
        info = sanitize(g.text if g is not None else raw, 800)
        data: dict[str, object] = {}
        if g is not None:
            data = {
                "cited": [passages[n - 1].id for n in g.cited if 0 < n <= len(passages)],
                "dropped": [{"sentence": d, "why": w} for d, w in zip(g.dropped, g.why, strict=True)],
            }
        if not info or _NOTHING.search(info):
            quote = closest_sentence(query, passages)
            if quote is not None:
                info = self.prompt(run.st, "search_o1_rid_quote", quote=sanitize(quote, 400))
                data["quoted"] = True
        info = info or self.prompt(run.st, "search_o1_rid_empty")
        helpful = not _NOTHING.search(info)
        run.st.emit(
            "reason_in_documents", query=query, info=info, passages=[p.id for p in passages], helpful=helpful, **data
        )
        return info

    def search_failed(self, run: O1Run, e: Exception) -> None:
        run.results[run.pending or ""] = self.prompt(run.st, "search_o1_unavailable")
        run.pending = None
        self.insert(run, self.prompt(run.st, "search_o1_unavailable"), note="search_failed", query=str(e)[:200])

    # -- guards ------------------------------------------------------------------------
    def _out_of_room(self, run: O1Run) -> bool:
        """The turn limit is reached or the prompt is full: the answer must be forced now."""
        if run.turns >= self.max_turns:
            run.st.emit("note", type="step_limit", message=f"{run.turns} turns used; forcing the final answer")
            return True
        if len(run.prompt) > self.max_prompt_chars:
            run.st.emit(
                "note",
                type="context_full",
                message=f"prompt reached {len(run.prompt)} characters; forcing the final answer",
            )
            return True
        return False

    def _answer_of_wrong_kind(self, run: O1Run, answer: str) -> bool:
        """Steer, once, an answer that cannot be what the question asks (no numeral for "when"
        or "how many": a bridge entity, "\\boxed{Prague}" for "When was the clock in the city
        where … died built?"): a notice says what is asked and the reasoning goes on, with the
        searches left.  ``False`` (the answer stands) when it fits, was steered already, or no
        search or turn is left."""
        st = run.st
        t = answer_type(st.result.question)
        if run.kind_steered or t.holds(answer) is not False:
            return False
        if run.searches >= self.max_searches or run.turns >= self.max_turns:
            return False
        run.kind_steered = True
        notice = self.prompt(st, "search_o1_kind", answer=sanitize(answer, 200))
        st.emit("note", type="kind_guard", answer=answer[:300], expected=t.kind, message=notice)
        run.prompt += f"\n{notice}\n"
        return True

    def _take_query(self, run: O1Run, query: str, answered: str | None = None) -> None:
        """Queue the query for search, or answer it with a notice (search limit, repeated query).

        ``answered``: a ``\\boxed{}`` answer the same completion gave before the query.
        """
        earlier = self._earlier(run, query)
        if earlier is not None:
            self._repeated(run, query, earlier, answered)
            return
        if run.searches >= self.max_searches:
            self._refuse(run, query)
            return
        run.results[query] = ""
        run.searches += 1
        run.pending = query
        run.st.emit("follow_up", question=query, step=run.turns, type="search_query")

    def _earlier(self, run: O1Run, query: str) -> str | None:
        """The earlier query that ``query`` repeats: the same content words, or a near duplicate
        (:func:`~sleuth.strategies.text.query_similarity`: Chinese compared by character bigrams,
        so "北京 冬残奥会 开幕日期" after "北京 冬奥会 开幕日期" is a new query)."""
        key = normalize_query(query)
        same = next((q for q in run.results if normalize_query(q) == key), None)
        if same is not None:
            return same
        best = max(run.results, key=lambda q: query_similarity(query, q), default=None)
        return best if best is not None and query_similarity(query, best) >= NEAR_DUPLICATE else None

    def _repeated(self, run: O1Run, query: str, earlier: str, answered: str | None) -> None:
        """Steer a repeated query: its earlier result again and a push to something new; force after N."""
        st = run.st
        if answered is not None:  # "... \\boxed{X} <|begin_search_query|> (an old query)": X is the answer
            st.emit("note", type="answer_before_repeat", query=query, repeat_of=earlier, answer=answered)
            self.set_answer(run, answered, FINISHED)
            return
        run.refused += 1
        result = run.results[earlier]
        if run.refused >= self.opts.max_refusals:
            st.emit(
                "note",
                type="repeat_guard",
                query=query,
                repeat_of=earlier,
                message=f"{run.refused} repeated or refused queries; forcing the final answer",
            )
            run.prompt += f"{BEGIN_RESULT} {result} {END_RESULT}\n"
            self.force_answer(run, REPEAT_LIMIT)
            return
        notice = self.prompt(st, "search_o1_repeat", query=sanitize(earlier, 200), result=result)
        st.emit("note", type="repeated_query", query=query, repeat_of=earlier, message=notice)
        run.prompt += f"{BEGIN_RESULT} {notice} {END_RESULT}\n"

    def _refuse(self, run: O1Run, query: str) -> None:
        """Over the search limit: insert the notice; after ``max_refusals`` refusals, force the answer."""
        self.insert(run, self.prompt(run.st, "search_o1_limit"), note="search_limit", query=query)
        run.refused += 1
        if run.refused >= self.opts.max_refusals:
            run.st.emit(
                "note",
                type="repeat_guard",
                message=f"{run.refused} repeated or refused queries; forcing the final answer",
            )
            self.force_answer(run, STEP_LIMIT)

    # -- writing into the reasoning ----------------------------------------------------
    def insert(self, run: O1Run, notice: str, *, note: str, query: str) -> str:
        run.st.emit("note", type=note, query=query, message=notice)
        run.prompt += f"{BEGIN_RESULT} {notice} {END_RESULT}\n"
        return notice

    def force_answer(self, run: O1Run, reason: str) -> None:
        run.prompt += self.prompt(run.st, "search_o1_force")
        c = self.generate(run.st, run.prompt, step="final answer", stop=["}", "\n"], max_tokens=48)
        run.prompt += c.text + "}"
        self.set_answer(run, clean_short(c.text), reason)

    def set_answer(self, run: O1Run, answer: str, reason: str) -> None:
        """The run's answer: the reasoning's, or with ``final_read`` the reading pass's
        (:func:`~sleuth.strategies.reading.read_again`; the reasoning's answer is its draft)."""
        st = run.st
        short = clean_short(answer)
        st.emit("note", type="reasoning", text=tail(run.reasoning, 4000))
        if self.opts.settle_comparison:
            answer, short = self._settled(run, answer, short)
        if self.opts.final_read and self.retriever is not None:
            found_by = "the reasoning's searches'"
            reading = read_again(
                self, st, st.result.question, run.found, (answer, short), stage="reasoning", found_by=found_by
            )
            if reading is not None:
                answer, short = reading.answer, clean_short(reading.short)
        st.result.short_answer = short
        st.result.answer = answer
        st.result.finish_reason = reason
        run.done = True

    def _settled(self, run: O1Run, answer: str, short: str) -> tuple[str, str]:
        """Option ``settle_comparison``: a comparison's answer ("Are A and B both …?", "…, A or
        B?") is chosen once more, in one short call, from the search results the reasoning
        inserted (:func:`~sleuth.strategies.settle.choose_option`).  A small model's reasoning misstates one side of a
        comparison its Reason-in-Documents results have right ("Since Daniel Mann is not a director"
        after "Daniel Mann was an American film and television director"); the choice reads
        those results alone.  The reasoning's answer stands (and is the ``draft`` when it does
        not) for a question that is no comparison, when no result was helpful, or when the
        reply names no option."""
        st = run.st
        cmp = find_comparison(st.result.question)
        facts = [f"{q}: {info}" for q, info in run.results.items() if info and not _NOTHING.search(info)]
        if cmp is None or not (cmp.yes_no or cmp.choice) or not facts:
            return answer, short
        choice = choose_option(self, st, st.result.question, facts, cmp, both_orders=True)
        st.emit("note", type="option_settled", answer=answer[:300], chosen=choice.chosen, reply=choice.reply[:200])
        if choice.chosen is None:
            return answer, short
        if not self.opts.final_read:  # with the reading pass, the settled answer is its draft
            st.emit("draft", text=answer, short_answer=short, stage="reasoning")
        return choice.chosen, choice.chosen

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

        Each question steps turn -> search -> Reason-in-Documents -> turn ...
        (:class:`~sleuth.strategies.batch.StepBatch`): ``concurrency`` LLM calls
        stay in flight; the queries of the questions whose turn ended are searched
        together in one ``search_batch``, waiting at most ``batch_window_s``
        (option, default 0.05 s); finished questions leave the batch.
        """
        batch = StepBatch(self, questions, filters=filters, listeners=listeners)  # starts every question
        window = self.opts.batch_window_s
        return batch.run(concurrency=concurrency, window=window)
