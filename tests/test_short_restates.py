"""A short answer that only repeats the question's words is not an answer (strategies/answers.py).

When a reply has no "So the answer is:" line, one short call reads the answer out of it; the
1.5B model sometimes returns the question's own subject ("Dahlia and Aruncus" for "Dahlia and
Aruncus are both examples of what type of plant catagorization?").  Then the reply's own first
sentence, fitted to the question, is read instead, when it adds something.  The questions are
HotpotQA-train's and MuSiQue's tuning half (one reworded, as said); the replies and spans are
written after the failures recorded on the reporting split (docs/results/hotpotqa-hybrid), which
this suite does not quote.
"""

from __future__ import annotations

import pytest

from sleuth.llm.scripted import ScriptedLLM
from sleuth.strategies import get_strategy
from sleuth.strategies.answers import OWN_READING_WORDS, own_reading, restates

GENUS = "Dahlia and Aruncus are both examples of what type of plant catagorization?"
ANTELOPE = "What is the species of animal which the town of Antelope, Kansas was named after?"


@pytest.mark.parametrize(
    ("question", "span", "verdict"),
    [
        (GENUS, "Dahlia and Aruncus", True),  # gold "genus"
        (GENUS, "genus", False),
        (ANTELOPE, "Antelope", True),  # gold "Antilocapra americana"
        (ANTELOPE, "pronghorn antelope", False),  # one new word is enough
        (
            "Nicolau Colaco played as a defender in the men's professional league sponsored by which company?",
            "Nicolau Colaco",
            True,
        ),
        # a question naming its options: the answer is one of them, in the question's words
        ("Which band was formed first, Wavves or Social Code?", "Social Code", False),
        ("Who has more scope of profession, Brian G. Hutton or Xawery Żuławski?", "Xawery Żuławski", False),
        # yes/no: the words of a yes/no reply are the question's
        ("Are Dahlia and Aruncus both genera of flowering plants?", "Dahlia", False),
        # nothing to judge: empty, or Chinese (left to the Chinese fitting)
        (GENUS, "", False),
        ("大丽花和假升麻都属于哪一种植物分类？", "大丽花", False),
    ],
)
def test_a_span_that_only_repeats_the_question(question: str, span: str, verdict: bool) -> None:
    assert restates(question, span) is verdict


def test_the_replys_own_sentence_fitted_to_the_question() -> None:
    long = "Dahlia and Aruncus are both examples of the plant genus. [2]"
    assert own_reading(GENUS, long) == "genus"
    long = "The town of Antelope, Kansas was named after the pronghorn antelope. [3]"
    assert own_reading(ANTELOPE, long) == "pronghorn antelope"
    # more than OWN_READING_WORDS words once fitted: not a short answer
    words = " ".join(f"w{i}" for i in range(OWN_READING_WORDS + 1))
    assert own_reading("What is Aruncus?", f"Answer: {words}.") == ""
    assert own_reading(GENUS, "") == ""


def _run(reply: str, short: str, question: str = GENUS):
    llm = ScriptedLLM([reply, short])
    return get_strategy("cot", llm, None).run(question), llm


def test_a_restating_short_answer_gives_way_to_the_replys_own_words() -> None:
    r, llm = _run("Dahlia and Aruncus are both examples of the plant genus.", "Dahlia and Aruncus")
    assert len(llm.calls) == 2  # the reply, the short-answer call: no call more
    assert r.short_answer == "genus"
    notes = [e.data for e in r.trace.of("note") if e.data.get("type") == "short_restates_question"]
    assert notes and notes[0]["short"] == "Dahlia and Aruncus" and notes[0]["read"] == "genus"


@pytest.mark.parametrize(
    ("question", "reply", "short"),
    [
        # the call's span adds something: it stands
        (GENUS, "Dahlia and Aruncus are both examples of the plant genus.", "plant genus"),
        # HotpotQA train (gold "Monticello"): the reply's sentence adds nothing either
        (
            "Castle Hill is a plantation near what primary residence of Thomas Jefferson?",
            "Castle Hill is a plantation near the primary residence of Thomas Jefferson.",
            "Castle Hill",
        ),
        # MuSiQue tuning 2hop__272543_126102 ("Who was in charge of the country Ceelmakoile is located
        # in?", gold "Hassan Sheikh Mohamud"), reworded with "where": the reply restates the question,
        # and cutting the restatement leaves "where", a word without content
        (
            "Who was in charge of the country where Ceelmakoile is located?",
            "Ceelmakoile was in charge of the country where Ceelmakoile is located.",
            "Ceelmakoile",
        ),
        # a choice, answered in the question's own words
        (
            "Which band was formed first, Wavves or Social Code?",
            "Social Code was formed before Wavves.",
            "Social Code",
        ),
    ],
    ids=["adds-something", "reply-restates-too", "reading-left-with-where", "choice"],
)
def test_the_call_s_answer_stands(question: str, reply: str, short: str) -> None:
    r, _ = _run(reply, short, question)
    assert r.short_answer == short
    assert not [e for e in r.trace.of("note") if e.data.get("type") == "short_restates_question"]
