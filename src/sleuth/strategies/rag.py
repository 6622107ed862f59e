"""Standard RAG: retrieve once for the question, answer from the passages with citations (baseline)."""

from __future__ import annotations

from sleuth.strategies.answers import short_answer
from sleuth.strategies.base import RunState, Strategy
from sleuth.strategies.options import BaselineOptions
from sleuth.strategies.text import cited_numbers, format_passages


class RAG(Strategy):
    """Retrieve ``k`` passages for the question, then one answering call; the short answer is its
    "So the answer is:" line (without one, the repair ``extract_short`` reads it: :mod:`~.answers`)."""

    name = "rag"
    Options = BaselineOptions
    needs_retriever = True

    def solve(self, question: str, st: RunState) -> None:
        passages = self.retrieve(st, question, route="original")
        if not passages:
            st.emit("note", message="search found nothing; answering without documents", type="no_passages")
        docs = format_passages(passages, budget=self.context_chars(st)) if passages else "(no documents found)"
        c = self.ask(st, self.prompt(st, "rag", question=question, documents=docs), step="answer")
        st.result.short_answer = short_answer(self, st, question, c)
        st.result.answer = c.text.strip()
        st.cite(passages, claim=c.text, query=question, marks=cited_numbers(c.text))  # grounded in finish
