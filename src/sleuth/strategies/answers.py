"""Reading the answer out of a strategy's reply: the short-answer span (citations: strategies/grounding.py).

Shared by the baselines (CoT, RAG) and Step-back, so that every strategy's
short answer is a span.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from sleuth.strategies.base import RunState, Strategy
from sleuth.strategies.parsing import parse_cot
from sleuth.strategies.text import clean_short

# "<short answer>" copied from the instruction instead of an answer
_PLACEHOLDER = re.compile(r"<[^<>]{0,40}>")


def short_answer(
    strategy: Strategy,
    st: RunState,
    question: str,
    reply: str,
    *,
    last_resort: Callable[[str], str],
) -> str:
    """The reply's "So the answer is:" span; without one, a short extraction call.

    When the line is missing (or holds the instruction's ``<short answer>``
    placeholder), a ``parse_fallback`` note is emitted and one short call
    (``short_answer.txt``, step ``short answer``, as RAT's last step) reads the
    answer out of the reasoning; ``last_resort(body)`` is the answer only when
    that call returns nothing.
    """
    body, short = parse_cot(reply)
    if short is not None and not _PLACEHOLDER.fullmatch(short):
        return short
    st.emit("note", message="no 'So the answer is:' line; asking for the short answer", type="parse_fallback")
    return extract_short(strategy, st, question, body) or last_resort(body)


def extract_short(strategy: Strategy, st: RunState, question: str, text: str) -> str:
    """One short call (``short_answer.txt``, step ``short answer``) that reads the short answer
    out of ``text`` (its last 1500 characters); "" when it returns nothing."""
    sc = strategy.ask(
        st,
        strategy.prompt(st, "short_answer", question=question, answer=text[-1500:]),
        step="short answer",
        max_tokens=32,
    )
    return clean_short(sc.text)


def last_line(body: str) -> str:
    """The last non-empty line of the reasoning, as a short answer ("" when there is none)."""
    lines = [ln for ln in body.strip().splitlines() if ln.strip()]
    return clean_short(lines[-1]) if lines else ""
