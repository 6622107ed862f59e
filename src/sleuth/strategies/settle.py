"""Settling a comparison: the option (or yes/no) that the facts a strategy found decide.

A comparison question offers its answers ("A or B?", "Are A and B both …?"): the answer is one
of them.  A small model that has the facts right on both sides still misstates the conclusion
("Social Code was formed in 1999 in St. Albert, while Wavves was formed in 2008 in San Diego" and
then "Wavves"); asked once more, in one short call that shows only the facts and the options
(``self_ask_choose.txt``), it chooses from what it found.  Self-Ask uses it for a final answer
that names no option; Search-o1 and Step-back, with their option ``settle_comparison``, for
every comparison they answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sleuth.strategies.base import RunState, Strategy
from sleuth.strategies.parse_self_ask import SCAFFOLD
from sleuth.strategies.self_ask_questions import YES_NO, Comparison, named

#: the answers of a yes/no comparison, by language
YES_NO_OPTIONS = {"en": ("yes", "no"), "zh": ("是", "否")}


@dataclass(frozen=True)
class Choice:
    """What the choice call chose (``None``: its reply names no option) and the reply itself."""

    chosen: str | None
    reply: str


def options_of(cmp: Comparison, lang: str) -> tuple[str, ...]:
    """What a comparison's answer is one of: yes and no, or the options it names."""
    return YES_NO_OPTIONS.get(lang, YES_NO_OPTIONS["en"]) if cmp.yes_no else cmp.options


def choose_option(
    strategy: Strategy,
    st: RunState,
    question: str,
    facts: Sequence[str],
    cmp: Comparison,
    *,
    both_orders: bool = False,
) -> Choice:
    """One short call (step ``choose option``): the option of ``cmp`` that ``facts`` decide.

    A yes/no reply is read by its first word ("不是" is "否"); a choice reply by the option it
    names first (:func:`~sleuth.strategies.self_ask_questions.named`).  With ``both_orders`` a
    second call (step ``choose option, reversed``) offers the options in the other order, and an
    option is chosen only when both calls choose it: the small model also picks by position
    ("Marsilea has approximately 65 species", "Brabejum has 1 species": "Brabejum" for "which has
    more species, Marsilea or Brabejum?"), and a choice that moves with the order is no reading of
    the facts."""
    options = options_of(cmp, st.result.lang)
    chosen, reply = _choose(strategy, st, question, facts, cmp, options, "choose option")
    if both_orders and chosen is not None:
        again, second = _choose(strategy, st, question, facts, cmp, options[::-1], "choose option, reversed")
        reply = f"{reply} | reversed: {second}"
        if again is None or again.lower() != chosen.lower():
            chosen = None
    return Choice(chosen, reply)


def _choose(
    strategy: Strategy,
    st: RunState,
    question: str,
    facts: Sequence[str],
    cmp: Comparison,
    options: Sequence[str],
    step: str,
) -> tuple[str | None, str]:
    joiner = SCAFFOLD.get(st.result.lang, SCAFFOLD["en"])["or"]
    text = strategy.prompt(
        st, "self_ask_choose", question=question, facts="\n".join(facts), options=joiner.join(options)
    )
    c = strategy.ask(st, text, step=step, max_tokens=24)
    if cmp.yes_no:
        return _yes_or_no(c.text), c.text.strip()
    hit = named(c.text, cmp.options)
    return (hit[0] if hit else None), c.text.strip()


def agrees(written: str, chosen: str, cmp: Comparison) -> bool:
    """The short answer a strategy wrote already gives ``chosen``: the same yes or no, or names
    that option and no other."""
    if cmp.yes_no:
        said = _yes_or_no(written)
        return said is not None and said.lower() == chosen.lower()
    return named(written, cmp.options) == [chosen]


def _yes_or_no(text: str) -> str | None:
    """The yes or no a reply starts with, as written ("Yes", "no", "是"; "不是" is "否"), or ``None``."""
    m = YES_NO.match(text)
    return None if m is None else ("否" if m.group("v") == "不是" else m.group("v"))
