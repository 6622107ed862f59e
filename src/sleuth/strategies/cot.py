"""Chain-of-thought: reason step by step, then "So the answer is: ..." (baseline, Wei et al. 2022)."""

from __future__ import annotations

from sleuth.strategies.base import RunState, Strategy
from sleuth.strategies.parsing import parse_cot
from sleuth.strategies.text import clean_short


class ChainOfThought(Strategy):
    """One call; the short answer is parsed from the last "So the answer is:" line.

    When the model never writes that line, the last non-empty line of its
    reasoning is taken as the answer and a ``note`` says so.
    """

    name = "cot"

    def solve(self, question: str, st: RunState) -> None:
        c = self.ask(st, self.prompt(st, "cot", question=question), step="reason")
        _, short = parse_cot(c.text)
        if short is None:
            lines = [ln for ln in c.text.strip().splitlines() if ln.strip()]
            short = clean_short(lines[-1]) if lines else ""
            st.emit("note", message="no 'So the answer is:' line; took the last line", type="parse_fallback")
        st.result.answer = c.text.strip()
        st.result.short_answer = short
