"""RAT: Retrieval-Augmented Thoughts (Wang et al., 2024).

1. Draft a step-by-step answer (zero-shot chain of thought) ending in "So the answer is:"; the
   ``draft`` event records it (the eval compares its short answer with the final one).
2. Split the draft into paragraphs T1..Tn (at most ``max_steps``).
3. For i = 1..n: from the question and the growing prefix (revised T1..T(i-1) plus the draft's Ti)
   write one search query, retrieve ``n_passages`` passages and revise the prefix with them.  The
   revision replaces the prefix; its unified diff goes into the trace (``revision`` event).  A step
   whose LLM call or search fails is skipped (recorded) and the unrevised paragraph kept.
4. The revised text is the answer; its "So the answer is:" line the short answer (without one, the
   repair ``extract_short`` reads it; :mod:`sleuth.strategies.repairs`).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from sleuth.llm.base import LLMError
from sleuth.search.base import Passage, SearchError
from sleuth.strategies.answers import extract_short, last_line, short_answer
from sleuth.strategies.base import RunState, Strategy
from sleuth.strategies.options import RATOptions
from sleuth.strategies.parsing import parse_cot, parse_query, parse_revision, split_paragraphs
from sleuth.strategies.text import cited_numbers, format_passages


def unified_diff(old: str, new: str) -> str:
    return "\n".join(difflib.unified_diff(old.splitlines(), new.splitlines(), "before", "after", lineterm="", n=1))


class Sources(dict[str, Passage]):
    """The passages a run has shown the model, by id, each numbered once in order of first use."""

    def add(self, passages: Sequence[Passage]) -> list[int]:
        """Number the new ones; the numbers of all of ``passages``."""
        for p in passages:
            self.setdefault(p.id, p)
        ids = list(self)
        return [ids.index(p.id) + 1 for p in passages]


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
        body, short = parse_cot(revised)  # 4. (the citations are grounded in finish)
        st.result.answer = revised.strip()
        st.result.short_answer = short or extract_short(self, st, question, body) or last_line(body)
        st.cite(list(sources.values()), claim=revised, query=question, marks=cited_numbers(revised))

    def _draft(self, question: str, st: RunState) -> list[str]:
        c = self.ask(st, self.prompt(st, "rat_draft", question=question), step="draft")
        short = short_answer(self, st, question, c)  # no call when the line is there
        parts = split_paragraphs(parse_cot(c.text)[0], self.max_steps)
        st.emit("draft", text=c.text.strip(), paragraphs=parts, short_answer=short)
        if not parts:
            st.emit("note", type="empty_draft", message="the draft is empty; answering from retrieval alone")
            parts = [question]
        return parts

    def _revise(self, question: str, st: RunState, i: int, prefix: str, sources: Sources) -> str:
        """One step: query from the prefix, retrieve, revise; the prefix unrevised when the step fails."""
        try:
            prompt = self.prompt(st, "rat_query", question=question, draft=prefix)
            qc = self.ask(st, prompt, step=f"query {i}", max_tokens=48)
            query = parse_query(qc.text) or prefix.split("\n\n")[-1][:200]
            passages = self.retrieve(st, query, k=self.opts.n_passages, route=f"rat_step_{i}")
            if not passages:
                st.emit("revision", step=i, query=query, skipped=True, reason="no passages", diff="")
                return prefix
            numbers = sources.add(passages)
            docs = format_passages(passages, numbers=numbers, budget=self.context_chars(st) // 2)
            prompt = self.prompt(st, "rat_revise", question=question, draft=prefix, documents=docs)
            rc = self.ask(st, prompt, step=f"revise {i}")
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
