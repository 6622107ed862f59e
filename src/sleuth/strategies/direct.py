"""Direct answer: the model alone, no reasoning scaffold, no search (baseline)."""

from __future__ import annotations

from sleuth.strategies.base import RunState, Strategy
from sleuth.strategies.options import BaselineOptions
from sleuth.strategies.text import clean_short


class Direct(Strategy):
    """Ask the question, take the first line of the reply as the answer."""

    name = "direct"
    Options = BaselineOptions

    def solve(self, question: str, st: RunState) -> None:
        prompt = self.prompt(st, "direct", question=question)
        c = self.ask(st, prompt, step="answer", max_tokens=min(64, self.max_tokens))
        st.result.answer = c.text.strip()
        st.result.short_answer = clean_short(c.text)
