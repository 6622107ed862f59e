"""Self-Ask's final answer, shaped to what the question asks (the last steps of :mod:`~sleuth.strategies.self_ask`).

A comparison's answer is one of its options (or yes/no); a question of several parts names every
part found; a number or date question's answer has a numeral, else the last hop's answer stands in;
a notice the model copied after a repeated follow-up is cut.

The final reading pass (option ``final_read``, Sleuth's addition to the paper's method,
:mod:`sleuth.strategies.reading`) answers the question once more from the question's own search
and the follow-ups' passages; the scaffold's answer is kept as the run's ``draft``.
"""

from __future__ import annotations

from sleuth.strategies.answer_type import answer_type
from sleuth.strategies.base import RunState, Strategy
from sleuth.strategies.reading import UNKNOWN, read_again
from sleuth.strategies.self_ask_questions import YES_NO, named
from sleuth.strategies.self_ask_scaffold import Scaffold
from sleuth.strategies.settle import choose_option
from sleuth.strategies.text import clean_short


class FinalAnswer(Strategy):
    """The final-answer steps of :class:`~sleuth.strategies.self_ask.SelfAsk`."""

    def _shaped(self, run: Scaffold, final: str) -> tuple[str, str]:
        """The answer and short answer, shaped to what the question asks."""
        short = clean_short(final)
        if run.cmp and final:
            return self._option_answer(run, final, short)
        if run.part_answers:
            final = self._all_parts(run, final)
            return final, clean_short(final)
        if final:
            return self._typed_answer(run, final, short)
        return final, short

    def _read_final(self, run: Scaffold, final: str, short: str) -> tuple[str, str]:
        """Answer from the question's own passages and the follow-ups' (``final_read``,
        :func:`~sleuth.strategies.reading.read_again`); the scaffold's ``final`` and ``short``
        become the ``draft`` and stand when nothing was found or the reading found no answer."""
        reading = read_again(
            self, run.st, run.question, run.found, (final, short), stage="scaffold", found_by="the follow-ups'"
        )
        if reading is None:
            return final, short
        return reading.answer, self._shaped(run, reading.short)[1]

    def _all_parts(self, run: Scaffold, final: str) -> str:
        """The final answer of a question of several parts, with every part's answer it left out
        ("喜剧" after the parts "喜剧" and "包贝尔") added after it."""
        missing = [a for a in run.part_answers if a and not UNKNOWN.match(a) and clean_short(a) not in final]
        if not missing:
            return final
        run.st.emit("note", type="parts_joined", written=final[:300], added=missing)
        return ("；" if run.st.result.lang == "zh" else "; ").join([final, *missing] if final else missing)

    def _option_answer(self, run: Scaffold, final: str, short: str) -> tuple[str, str]:
        """A comparison's answer is one of what it offers: yes or no for "Are A and B both ...",
        else, when the question names options ("A or B"), the option the final answer names
        first, or, when it names none, the option one short call chooses from the facts found
        (:func:`~sleuth.strategies.settle.choose_option`).  The answer and short answer it gives (``final``, ``short``)."""
        st, cmp = run.st, run.cmp
        assert cmp is not None
        if cmp.yes_no:
            m = YES_NO.match(final)
            if m and clean_short(final) != m.group("v"):
                st.emit("note", type="yes_no_answer", answer=final[:300], short=m.group("v"))
            return (final, m.group("v")) if m else (final, short)
        if not cmp.choice:
            return final, short
        hit = named(final, cmp.options)
        if hit:
            if short != hit[0]:
                st.emit("note", type="option_answer", answer=final[:300], short=hit[0])
            return final, hit[0]
        facts = [f"{q} {a}" for q, a in run.asked] or [run.words["unknown"]]
        chosen = choose_option(self, st, run.question, facts, cmp).chosen
        st.emit("note", type="option_chosen", answer=final[:300], chosen=chosen)
        return (chosen, chosen) if chosen else (final, short)

    @staticmethod
    def _typed_answer(run: Scaffold, final: str, short: str) -> tuple[str, str]:
        """A final answer that cannot be what the question asks (no numeral for "how much" or
        "when": the bridge entity, as "Hugh Grosvenor, 7th Duke of Westminster" for "… worth how
        much?") gives way to the last intermediate answer when that one can ("$13 billion")."""
        t = answer_type(run.question)
        last = run.asked[-1][1] if run.asked else ""
        if t.holds(final) is not False or not last or UNKNOWN.match(last) or not t.holds(last):
            return final, short
        run.st.emit("note", type="typed_answer", expected=t.kind, written=final[:300], used=last[:300])
        return last, clean_short(last)

    def _without_copied_notice(self, st: RunState, final: str | None) -> str | None:
        """A model that copies the intermediate answer after a repeat also copies the notice: cut it."""
        notice = self.prompt(st, "self_ask_repeat", answer="").strip()[:12]
        if final and notice and notice in final:
            final = final[: final.index(notice)].strip() or final
        return final
