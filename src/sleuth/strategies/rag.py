"""Standard RAG: retrieve once for the question, answer from the passages with citations (baseline)."""

from __future__ import annotations

import re

from sleuth.search.base import Passage
from sleuth.strategies.base import RunState, Strategy
from sleuth.strategies.options import RAGOptions
from sleuth.strategies.parsing import parse_cot
from sleuth.strategies.text import cited_numbers, clean_short, format_passages

# "<short answer>" copied from the instruction instead of an answer
_PLACEHOLDER = re.compile(r"<[^<>]{0,40}>")


def pick_cited(text: str, passages: list[Passage]) -> list[Passage]:
    """Passages the answer cites as [n]; all of them when it cites none (they were its context)."""
    nums = [n for n in cited_numbers(text) if 1 <= n <= len(passages)]
    return [passages[n - 1] for n in nums] if nums else list(passages)


class RAG(Strategy):
    """Retrieve ``k`` passages for the question, then one answering call.

    The short answer is the answer's "So the answer is:" line.  When the model
    leaves that line out (or copies the ``<short answer>`` placeholder), a short
    extraction call reads the answer, as RAT's last step does, so that RAG's
    short answer is a span like every other strategy's and not a sentence.
    """

    name = "rag"
    Options = RAGOptions
    needs_retriever = True

    def solve(self, question: str, st: RunState) -> None:
        passages = self.retrieve(st, question, route="original")
        if not passages:
            st.emit("note", message="search found nothing; answering without documents", type="no_passages")
        docs = format_passages(passages, budget=self.context_chars(st)) if passages else "(no documents found)"
        c = self.ask(st, self.prompt(st, "rag", question=question, documents=docs), step="answer")
        body, short = parse_cot(c.text)
        if short is None or _PLACEHOLDER.fullmatch(short):
            st.emit("note", message="no 'So the answer is:' line; asking for the short answer", type="parse_fallback")
            sc = self.ask(
                st,
                self.prompt(st, "short_answer", question=question, answer=body[-1500:]),
                step="short answer",
                max_tokens=32,
            )
            short = clean_short(sc.text) or clean_short(body)
        st.result.answer = c.text.strip()
        st.result.short_answer = short
        st.result.citations = pick_cited(c.text, passages)
