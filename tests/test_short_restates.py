"""A short answer that only repeats the question's words is not an answer (strategies/answers.py).

When a reply has no "So the answer is:" line, one short call reads the answer out of it; the
1.5B model sometimes returns the question's own subject ("Pak Sao" for "Pak Sao is a technique
in the martial art specializing in what type of combat?").  Then the reply's own first
sentence, fitted to the question, is read instead, when it adds something.  Every pair below
is copied from a committed record (docs/results/hotpotqa-hybrid, the strategy named).
"""

from __future__ import annotations

import pytest

from sleuth.llm.scripted import ScriptedLLM
from sleuth.strategies import get_strategy
from sleuth.strategies.answers import OWN_READING_WORDS, own_reading, restates

PAK_SAO = "Pak Sao is a technique in the martial art specializing in what type of combat?"
OVULATION = "What type of ovulation does the animal formerly known as the pygmy chimpanzee have?"


@pytest.mark.parametrize(
    ("question", "span", "verdict"),
    [
        (PAK_SAO, "Pak Sao", True),  # rag and self-ask (gold "close range combat")
        (PAK_SAO, "close range combat", False),
        (OVULATION, "pygmy chimpanzee", True),  # rag and self-ask (gold "Concealed ovulation")
        (OVULATION, "concealed ovulation", False),  # one new word is enough
        ("Andrea Camplone is a football coach in which 22-team competition?", "Andrea Camplone", True),
        # a question naming its options: the answer is one of them, in the question's words
        ("Which band, A Silent Film or The Frames, has more members?", "The Frames", False),
        (
            "Who has the highest scope in profession in  Rob Thomas or  James Dean Bradfield?",
            "James Dean Bradfield",
            False,
        ),
        # yes/no: the words of a yes/no reply are the question's
        ("Are Pak Sao and Lap Sao both Wing Chun techniques?", "Pak Sao", False),
        # nothing to judge: empty, or Chinese (left to the Chinese fitting)
        (PAK_SAO, "", False),
        ("拍手是哪种武术的技法？", "拍手", False),
    ],
)
def test_a_span_that_only_repeats_the_question(question: str, span: str, verdict: bool) -> None:
    assert restates(question, span) is verdict


def test_the_replys_own_sentence_fitted_to_the_question() -> None:
    long = "Pak Sao is a technique in the martial art specializing in close range combat. [2]"
    assert own_reading(PAK_SAO, long) == "close range combat"
    long = "The animal formerly known as the pygmy chimpanzee has concealed ovulation. [3]"
    assert own_reading(OVULATION, long) == "concealed ovulation"
    # more than OWN_READING_WORDS words once fitted: not a short answer
    words = " ".join(f"w{i}" for i in range(OWN_READING_WORDS + 1))
    assert own_reading("What is Pak Sao?", f"Answer: {words}.") == ""
    assert own_reading(PAK_SAO, "") == ""


def _run(reply: str, short: str, question: str = PAK_SAO):
    llm = ScriptedLLM([reply, short])
    return get_strategy("cot", llm, None).run(question), llm


def test_a_restating_short_answer_gives_way_to_the_replys_own_words() -> None:
    r, llm = _run("Pak Sao is a technique in the martial art specializing in close range combat.", "Pak Sao")
    assert len(llm.calls) == 2  # the reply, the short-answer call: no call more
    assert r.short_answer == "close range combat"
    notes = [e.data for e in r.trace.of("note") if e.data.get("type") == "short_restates_question"]
    assert notes and notes[0]["short"] == "Pak Sao" and notes[0]["read"] == "close range combat"


@pytest.mark.parametrize(
    ("question", "reply", "short"),
    [
        # the call's span adds something: it stands
        (PAK_SAO, "Pak Sao is a technique in the martial art specializing in close range combat.", "close range"),
        # self-ask, hotpotqa (gold "a body of water"): the reply's sentence adds nothing either
        (
            "What is the Landsman Kill near New York State Route 308?",
            "The Landsman Kill is near New York State Route 308.",
            "Landsman Kill",
        ),
        # peers run, self-ask, musique (gold "Karl Renner"): the reply restates the question, and
        # cutting the restatement leaves "where", a word without content
        (
            "Who was in charge of the country where the composer of Aschenbrodel was a citizen?",
            "The composer of Aschenbrodel was in charge of the country where the composer of Aschenbrodel "
            "was a citizen.",
            "composer of Aschenbrodel",
        ),
        # a choice, answered in the question's own words
        (
            "Which band, A Silent Film or The Frames, has more members?",
            "The Frames have more members than A Silent Film.",
            "The Frames",
        ),
    ],
    ids=["adds-something", "reply-restates-too", "reading-left-with-where", "choice"],
)
def test_the_call_s_answer_stands(question: str, reply: str, short: str) -> None:
    r, _ = _run(reply, short, question)
    assert r.short_answer == short
    assert not [e for e in r.trace.of("note") if e.data.get("type") == "short_restates_question"]
