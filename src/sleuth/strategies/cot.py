"""Chain-of-thought: reason step by step, then "So the answer is: ..." (baseline, Wei et al. 2022)."""

from __future__ import annotations

from sleuth.strategies.answers import short_answer
from sleuth.strategies.base import RunState, Strategy
from sleuth.strategies.options import BaselineOptions


class ChainOfThought(Strategy):
    """One call; the short answer is its last "So the answer is:" line (without one, the repair
    ``extract_short`` reads it: :mod:`sleuth.strategies.answers`)."""

    name = "cot"
    Options = BaselineOptions

    def solve(self, question: str, st: RunState) -> None:
        c = self.ask(st, self.prompt(st, "cot", question=question), step="reason")
        st.result.short_answer = short_answer(self, st, question, c)
        st.result.answer = c.text.strip()
