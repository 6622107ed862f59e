"""Chain-of-thought: reason step by step, then "So the answer is: ..." (baseline, Wei et al. 2022)."""

from __future__ import annotations

import re

from sleuth.strategies.base import RunState, Strategy
from sleuth.strategies.options import CoTOptions
from sleuth.strategies.parsing import parse_cot
from sleuth.strategies.text import clean_short

# "<short answer>" copied from the instruction instead of an answer
_PLACEHOLDER = re.compile(r"<[^<>]{0,40}>")


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
        body, short = parse_cot(c.text)
        if short is None or _PLACEHOLDER.fullmatch(short):
            st.emit("note", message="no 'So the answer is:' line; asking for the short answer", type="parse_fallback")
            sc = self.ask(
                st,
                self.prompt(st, "short_answer", question=question, answer=body[-1500:]),
                step="short answer",
                max_tokens=32,
            )
            lines = [ln for ln in body.strip().splitlines() if ln.strip()]
            short = clean_short(sc.text) or (clean_short(lines[-1]) if lines else "")
        st.result.answer = c.text.strip()
        st.result.short_answer = short
