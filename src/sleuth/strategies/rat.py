"""RAT: Retrieval-Augmented Thoughts (Wang et al., 2024).

1. Draft a step-by-step answer (zero-shot chain of thought).
2. Split the draft into paragraphs T1..Tn (at most ``max_steps``).
3. For i = 1..n: from the question and the growing prefix (revised T1..T(i-1)
   plus the draft's Ti) write one search query, retrieve, and revise the
   prefix with at most ``n_passages`` passages.  The revision replaces the
   prefix; its unified diff goes into the trace (``revision`` event).  A step
   whose LLM call or search fails or times out is skipped (recorded) and the
   unrevised paragraph is kept.
4. A final pass gives the answer its structure and a short answer.
"""

from __future__ import annotations

import difflib

from sleuth.llm.base import LLMError
from sleuth.search.base import Passage, SearchError
from sleuth.strategies.base import RunState, Strategy
from sleuth.strategies.options import RATOptions
from sleuth.strategies.parsing import parse_long_answer, parse_query, parse_revision, split_paragraphs
from sleuth.strategies.text import cited_numbers, clean_short, format_passages


def unified_diff(old: str, new: str) -> str:
    return "\n".join(difflib.unified_diff(old.splitlines(), new.splitlines(), "before", "after", lineterm="", n=1))


class RAT(Strategy):
    """Options: :class:`~sleuth.strategies.options.RATOptions` (``n_passages`` per revision);
    ``max_steps`` caps paragraphs."""

    name = "rat"
    needs_retriever = True
    Options = RATOptions
    opts: RATOptions

    def solve(self, question: str, st: RunState) -> None:
        n_passages = self.opts.n_passages
        draft_c = self.ask(
            st, self.prompt(st, "rat_draft", question=question), step="draft", max_tokens=self.max_tokens
        )
        parts = split_paragraphs(draft_c.text, self.max_steps)
        st.emit("draft", text=draft_c.text.strip(), paragraphs=parts)
        if not parts:
            st.emit("note", type="empty_draft", message="the draft is empty; answering from retrieval alone")
            parts = [question]
        revised = ""
        used: list[Passage] = []
        for i, para in enumerate(parts, 1):
            prefix = (revised + "\n\n" + para).strip()
            try:
                qc = self.ask(
                    st, self.prompt(st, "rat_query", question=question, draft=prefix), step=f"query {i}", max_tokens=48
                )
                query = parse_query(qc.text) or para[:200]
                passages = self.retrieve(st, query, k=n_passages, route=f"rat_step_{i}")[:n_passages]
                if not passages:
                    st.emit("revision", step=i, query=query, skipped=True, reason="no passages", diff="")
                    revised = prefix
                    continue
                rc = self.ask(
                    st,
                    self.prompt(
                        st,
                        "rat_revise",
                        question=question,
                        draft=prefix,
                        documents=format_passages(passages, start=len(used) + 1, budget=self.context_chars(st) // 2),
                    ),
                    step=f"revise {i}",
                    max_tokens=self.max_tokens,
                )
            except (LLMError, SearchError) as e:
                st.emit("revision", step=i, skipped=True, reason=f"{type(e).__name__}: {e}", diff="")
                revised = prefix
                continue
            new = parse_revision(rc.text, prefix)
            used.extend(passages)
            st.emit(
                "revision",
                step=i,
                query=query,
                passages=[p.id for p in passages],
                diff=unified_diff(prefix, new),
                changed=new != prefix,
            )
            revised = new
        fc = self.ask(
            st,
            self.prompt(st, "rat_final", question=question, draft=revised),
            step="final",
            max_tokens=self.max_tokens,
        )
        answer, short = parse_long_answer(fc.text)
        if not answer.strip():
            answer = revised
        if short is None:
            sc = self.ask(
                st,
                self.prompt(st, "short_answer", question=question, answer=answer[-1500:]),
                step="short answer",
                max_tokens=32,
            )
            short = clean_short(sc.text)
        st.result.answer = answer.strip()
        st.result.short_answer = short
        st.cite(used, claim=answer, query=question, marks=cited_numbers(answer))  # grounded in finish
