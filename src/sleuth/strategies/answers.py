"""Reading the answer out of a strategy's reply: the short-answer span (citations: strategies/grounding.py).

Shared by the baselines (CoT, RAG) and Step-back, so that every strategy's
short answer is a span.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from sleuth.llm.base import Completion
from sleuth.strategies.answer_type import CHOICE, HAN, YESNO, answer_type
from sleuth.strategies.base import RunState, Strategy
from sleuth.strategies.parsing import parse_cot
from sleuth.strategies.short_fit import fit_short
from sleuth.strategies.text import ANSWER_PREFIX, clean_short, content_tokens, strip_citations

# "<short answer>" copied from the instruction instead of an answer
_PLACEHOLDER = re.compile(r"<[^<>]{0,40}>")
_ALTERNATIVES = re.compile(r"\bor\b", re.I)
#: the longest reading of the reply's own sentence taken as a short answer (words)
OWN_READING_WORDS = 8


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
    out of ``text`` (its last 1500 characters); "" when it returns nothing.  A span that only
    repeats the question (:func:`restates`) gives way to ``text``'s own first sentence fitted to
    the question (:func:`own_reading`) when that adds something, with a ``short_restates_question``
    note."""
    sc = strategy.ask(
        st,
        strategy.prompt(st, "short_answer", question=question, answer=text[-1500:]),
        step="short answer",
        max_tokens=32,
    )
    short = clean_short(sc.text)
    if restates(question, short):
        own = own_reading(question, text)
        if content_tokens(own) - content_tokens(question):  # a word of its own, not only "where"
            st.emit(
                "note",
                type="short_restates_question",
                message="the short answer only repeats the question; the reply's own sentence is read instead",
                short=short,
                read=own,
            )
            return own
    return short


def restates(question: str, span: str) -> bool:
    """Whether ``span`` only repeats words of ``question`` (English), which asks for something else:
    not a choice between options it names ("A or B") and not yes/no.  "Dahlia and Aruncus" for
    "Dahlia and Aruncus are both examples of what type of plant catagorization?" answers nothing."""
    words = content_tokens(span)
    if not words or HAN.search(question) or HAN.search(span) or _ALTERNATIVES.search(question):
        return False
    return answer_type(question).kind not in (CHOICE, YESNO) and words <= content_tokens(question)


def own_reading(question: str, text: str) -> str:
    """The reply's own first sentence fitted to the question (citations and an "Answer:" label
    removed), when that comes to at most :data:`OWN_READING_WORDS` words; else "" ."""
    fitted = fit_short(question, ANSWER_PREFIX.sub("", strip_citations(text)).strip())
    fitted = fitted.strip().rstrip(".").strip()
    return fitted if 0 < len(fitted.split()) <= OWN_READING_WORDS else ""


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
