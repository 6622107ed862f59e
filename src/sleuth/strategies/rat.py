"""RAT: Retrieval-Augmented Thoughts (Wang et al., 2024).

1. Draft a step-by-step answer (zero-shot chain of thought) ending in "So the
   answer is:", so the draft has a short answer of its own (as CoT's: one short
   extraction call when the line is missing); the ``draft`` event records it, and
   the eval compares it with the final short answer ("RAT: draft and final").
2. Split the draft's reasoning into paragraphs T1..Tn (at most ``max_steps``).
3. For i = 1..n: from the question and the growing prefix (revised T1..T(i-1)
   plus the draft's Ti) write one search query, retrieve, and revise the
   prefix with at most ``n_passages`` passages, preferring passages no earlier
   step showed.  The revision replaces the prefix; its unified diff goes into
   the trace (``revision`` event).  A step whose LLM call or search fails or
   times out is skipped (recorded) and the unrevised paragraph is kept.
4. A final pass writes the answer from the revised notes *and* the passages the
   revisions saw (numbered once, in order of first use, as the revisions cite
   them; those the notes cite first, as many as the context budget gives about
   500 characters each, at least ``k``) and gives a short answer.  The paper stops at step 3; the last pass is
   Sleuth's, because a 1.5B model's revisions often shrink the prefix to one
   sentence and drop what an earlier step found (docs/strategies.md, "RAT").
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from sleuth.llm.base import LLMError
from sleuth.search.base import Passage, SearchError
from sleuth.strategies.answers import extract_short, last_line, short_answer
from sleuth.strategies.base import RunState, Strategy
from sleuth.strategies.options import RATOptions
from sleuth.strategies.parsing import parse_cot, parse_long_answer, parse_query, parse_revision, split_paragraphs
from sleuth.strategies.short_fit import fit_short
from sleuth.strategies.text import cited_numbers, format_passages

#: the final pass shows as many passages as the budget gives this many characters each (at least ``k``)
FINAL_CHARS_PER_PASSAGE = 500


def unified_diff(old: str, new: str) -> str:
    return "\n".join(difflib.unified_diff(old.splitlines(), new.splitlines(), "before", "after", lineterm="", n=1))


class Sources:
    """The passages a run has shown the model, each numbered once in order of first use."""

    def __init__(self) -> None:
        self.passages: list[Passage] = []
        self._number: dict[str, int] = {}

    def __contains__(self, p: Passage) -> bool:
        return p.id in self._number

    def add(self, passages: Sequence[Passage]) -> list[int]:
        """Number the new ones; the numbers of all of ``passages``."""
        for p in passages:
            if p.id not in self._number:
                self.passages.append(p)
                self._number[p.id] = len(self.passages)
        return [self._number[p.id] for p in passages]

    def chosen(self, cited: Sequence[int], limit: int) -> tuple[list[Passage], list[int]]:
        """At most ``limit`` passages and their numbers, in number order: the ones ``cited`` first
        (numbers the notes' ``[n]`` marks give), then the rest in order of first use."""
        order = [n for n in dict.fromkeys(cited) if 0 < n <= len(self.passages)]
        order += [n for n in range(1, len(self.passages) + 1) if n not in order]
        keep = sorted(order[: max(1, limit)])
        return [self.passages[n - 1] for n in keep], keep

    def prefer_new(self, found: Sequence[Passage], n: int) -> list[Passage]:
        """The first ``n`` passages of ``found`` no earlier step showed, topped up with shown ones."""
        fresh = [p for p in found if p not in self]
        return [*fresh, *(p for p in found if p in self)][:n]


class RAT(Strategy):
    """Options: :class:`~sleuth.strategies.options.RATOptions` (``n_passages`` per revision);
    ``max_steps`` caps paragraphs."""

    name = "rat"
    needs_retriever = True
    Options = RATOptions
    opts: RATOptions

    def solve(self, question: str, st: RunState) -> None:
        parts = self._draft(question, st)  # 1-2.
        sources = Sources()
        revised = ""
        for i, para in enumerate(parts, 1):  # 3.
            revised = self._revise(question, st, i, (revised + "\n\n" + para).strip(), sources)
        self._final(question, st, revised, sources)  # 4.

    def _draft(self, question: str, st: RunState) -> list[str]:
        c = self.ask(st, self.prompt(st, "rat_draft", question=question), step="draft", max_tokens=self.max_tokens)
        short = short_answer(self, st, question, c, last_resort=last_line)  # no call when the line is there
        short = fit_short(question, short)  # as the final short answer is fitted (finish)
        parts = split_paragraphs(parse_cot(c.text)[0], self.max_steps)
        st.emit("draft", text=c.text.strip(), paragraphs=parts, short_answer=short)
        if not parts:
            st.emit("note", type="empty_draft", message="the draft is empty; answering from retrieval alone")
            parts = [question]
        return parts

    def _revise(self, question: str, st: RunState, i: int, prefix: str, sources: Sources) -> str:
        """One step: query from the prefix, retrieve, revise; the prefix unrevised when the step fails."""
        n = self.opts.n_passages
        try:
            qc = self.ask(
                st, self.prompt(st, "rat_query", question=question, draft=prefix), step=f"query {i}", max_tokens=48
            )
            query = parse_query(qc.text) or prefix.split("\n\n")[-1][:200]
            passages = sources.prefer_new(self.retrieve(st, query, k=2 * n, route=f"rat_step_{i}"), n)
            if not passages:
                st.emit("revision", step=i, query=query, skipped=True, reason="no passages", diff="")
                return prefix
            numbers = sources.add(passages)
            docs = format_passages(passages, numbers=numbers, budget=self.context_chars(st) // 2)
            rc = self.ask(
                st,
                self.prompt(st, "rat_revise", question=question, draft=prefix, documents=docs),
                step=f"revise {i}",
                max_tokens=self.max_tokens,
            )
        except (LLMError, SearchError) as e:
            st.emit("revision", step=i, skipped=True, reason=f"{type(e).__name__}: {e}", diff="")
            return prefix
        new = parse_revision(rc.text, prefix)
        st.emit(
            "revision",
            step=i,
            query=query,
            passages=[p.id for p in passages],
            diff=unified_diff(prefix, new),
            changed=new != prefix,
        )
        return new

    def _final(self, question: str, st: RunState, notes: str, sources: Sources) -> None:
        budget = self.context_chars(st)
        shown, numbers = sources.chosen(cited_numbers(notes), max(self.k, budget // FINAL_CHARS_PER_PASSAGE))
        docs = format_passages(shown, numbers=numbers, budget=budget) if shown else "(no documents found)"
        fc = self.ask(
            st,
            self.prompt(st, "rat_final", question=question, draft=notes, documents=docs),
            step="final",
            max_tokens=self.max_tokens,
        )
        answer, short = parse_long_answer(fc.text)
        if not answer.strip():
            answer = notes
        if short is None:
            short = extract_short(self, st, question, answer)
        st.result.answer = answer.strip()
        st.result.short_answer = short
        st.cite(sources.passages, claim=answer, query=question, marks=cited_numbers(answer))  # grounded in finish
