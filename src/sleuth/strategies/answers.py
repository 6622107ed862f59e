"""Reading the answer out of a strategy's reply: the short-answer span (citations: strategies/grounding.py).

Shared by the baselines (CoT, RAG) and Step-back, so that every strategy's
short answer is a span.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from sleuth.llm.base import Completion
from sleuth.strategies.base import RunState, Strategy
from sleuth.strategies.parsing import parse_cot
from sleuth.strategies.text import clean_short

# "<short answer>" copied from the instruction instead of an answer
_PLACEHOLDER = re.compile(r"<[^<>]{0,40}>")


def short_answer(
    strategy: Strategy,
    st: RunState,
    question: str,
    reply: Completion,
    *,
    last_resort: Callable[[str], str],
) -> str:
    """The reply's "So the answer is:" span; without one, a short extraction call.

    When the line is missing (or holds the instruction's ``<short answer>``
    placeholder), a ``parse_fallback`` note is emitted and one short call
    (``short_answer.txt``, step ``short answer``, as RAT's last step) reads the
    answer out of the reasoning; ``last_resort(body)`` is the answer only when
    that call returns nothing. A reply that reached ``max_tokens`` inside its
    span ("So the answer is: Avram Noam Ch") gets the same call over the whole
    reply, with a ``short_answer_cut`` note; the cut span stands if it returns nothing.
    """
    body, short = parse_cot(reply.text)
    if short is not None and not _PLACEHOLDER.fullmatch(short):
        if reply.finish_reason == "length" and cut_inside(reply.text, short):
            note_cut(st, short)
            return extract_short(strategy, st, question, reply.text) or short
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


def cut_inside(reply: str, short: str) -> bool:
    """Whether ``reply`` ends with ``short`` (as parsed: trailing punctuation ignored), so that a
    reply cut at ``max_tokens`` was cut inside it."""
    tail = reply.rstrip().rstrip("。.!！")
    return bool(short) and tail.endswith(short.rstrip().rstrip("。.!！"))


def note_cut(st: RunState, written: str) -> None:
    """The ``short_answer_cut`` note: the reply was cut inside its short answer ``written``."""
    st.emit(
        "note",
        type="short_answer_cut",
        message="the reply was cut inside its short answer; asking for the short answer",
        written=written,
    )


def last_line(body: str) -> str:
    """The last non-empty line of the reasoning, as a short answer ("" when there is none)."""
    lines = [ln for ln in body.strip().splitlines() if ln.strip()]
    return clean_short(lines[-1]) if lines else ""
