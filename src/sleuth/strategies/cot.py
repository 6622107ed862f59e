"""Chain-of-thought: reason step by step, then "So the answer is: ..." (baseline, Wei et al. 2022)."""

from __future__ import annotations

from sleuth.strategies.answers import last_line, short_answer
from sleuth.strategies.base import RunState, Strategy
from sleuth.strategies.options import CoTOptions


class ChainOfThought(Strategy):
    """One call; the short answer is parsed from the last "So the answer is:" line.

    When the model never writes that line (or copies the ``<short answer>``
    placeholder), a short extraction call reads the reasoning, as RAT's last
    step does, and a ``note`` says so; the last line of the reasoning is the
    answer only if that call returns nothing.
    """

    name = "cot"
    Options = CoTOptions

    def solve(self, question: str, st: RunState) -> None:
        c = self.ask(st, self.prompt(st, "cot", question=question), step="reason")
        st.result.short_answer = short_answer(self, st, question, c, last_resort=last_line)
        st.result.answer = c.text.strip()
