"""Reading the short answer out of a strategy's reply: its "So the answer is:" line; without one, the repair
``extract_short`` (:mod:`sleuth.strategies.repairs`) reads it in one short call, else (``mode=paper``) its last line.
"""

from __future__ import annotations

from sleuth.llm.base import Completion
from sleuth.strategies.base import RunState, Strategy
from sleuth.strategies.parsing import parse_cot
from sleuth.strategies.repairs import fired
from sleuth.strategies.text import PLACEHOLDER, clean_short


def short_answer(strategy: Strategy, st: RunState, question: str, reply: Completion) -> str:
    """The reply's "So the answer is:" span; without one (or with the instruction's ``<short answer>``
    placeholder), :func:`extract_short` when the repair is on, else the reply's last line."""
    body, short = parse_cot(reply.text)
    if short is not None and not PLACEHOLDER.fullmatch(short):
        return short
    return extract_short(strategy, st, question, body) or last_line(body)


def extract_short(strategy: Strategy, st: RunState, question: str, text: str) -> str:
    """Repair ``extract_short``: one short call (``short_answer.txt``, step ``short answer``) that reads
    the short answer out of ``text`` (its last 1500 characters); "" when it returns nothing or is off."""
    if not strategy.opts.extract_short or not text.strip():
        return ""
    fired(st, "extract_short", message="no 'So the answer is:' line; asking for the short answer")
    prompt = strategy.prompt(st, "short_answer", question=question, answer=text[-1500:])
    return clean_short(strategy.ask(st, prompt, step="short answer", max_tokens=32).text)


def last_line(body: str) -> str:
    """The last non-empty line of the reasoning, as a short answer ("" when there is none)."""
    lines = [ln for ln in body.strip().splitlines() if ln.strip()]
    return clean_short(lines[-1]) if lines else ""
