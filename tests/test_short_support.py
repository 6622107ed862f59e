"""The short answer's fail-safe (issue 51): a short answer that neither the question, the long
answer nor the passages the run saw state is not returned, and the long answer stands.

The failure it guards against: on a new HotpotQA question, RAG's reply "...was born in 1916." had
no "So the answer is:" line, and the short-answer call returned "Tom Cruise", a name in neither
the question, the reply nor the passages.  The questions, passages and replies here are written
for this test in the shape of HotpotQA's bridge questions and of the policy_zh documents (tuning
data we write; nothing of a reporting split).
"""

from __future__ import annotations

import pytest

from conftest import titled_index
from sleuth.lang.question import analyze
from sleuth.llm.scripted import ScriptedLLM
from sleuth.search.base import Retriever
from sleuth.strategies import Result, get_strategy
from sleuth.strategies.repairs.support import seen_passages, support, unsupported_note
from sleuth.strategies.result import Event

QUESTION = "When was the director of the 1948 film Lost Harbour born?"
PASSAGES = {
    "Lost Harbour": "Lost Harbour is a 1948 British drama film directed by Mirela Vost and starring Anton Reyes.",
    "Mirela Vost": "Mirela Stephanie Vost (born 3 May 1916) was a British film director of the United Kingdom. "
    "She directed fourteen feature films between 1946 and 1961.",
    "Anton Reyes": "Anton Reyes (1920-1999) was an actor known for Lost Harbour and for 1,200 stage performances.",
}
REPLY = "Lost Harbour was directed by Mirela Vost [1], who was born in 1916 [2]."

QUESTION_ZH = "退票费用的报销期限是多少？"
PASSAGES_ZH = {
    "差旅报销第十五条": "行程取消产生的退票费用，应在退票之日起15个自然日内提交报销，不适用第三条规定的报销期限。",
    "差旅报销第三条": "员工应在出差结束后30个自然日内提交差旅报销申请。",
}
REPLY_ZH = "根据第十五条，退票费用应在退票之日起15个自然日内提交报销 [1]。"


def _supported(question: str, short: str, answer: str = "", passages: tuple[str, ...] = ()) -> bool:
    return unsupported_note(question, short, answer, passages, analyze(question).yes_no) is None


# -- what counts as stated ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("short", "answer", "verdict"),
    [
        ("Tom Cruise", REPLY, False),  # a name nothing in the run states
        ("1916", REPLY, True),
        ("1917", REPLY, False),  # a number is one word: it is there or not
        ("3 May 1916", "", True),  # found as written in a passage
        ("May 3rd, 1916", "", True),  # the same date, another order and an ordinal
        ("Mirela Vost", "", True),
        ("Vost", "", True),  # part of a name
        ("Mirela S. Vost", "", True),  # an initial is no word to check
        ("Mirela Stefania Vost", "", True),  # two of three words
        ("Tom Vost", "", False),  # one of two
        ("14", "", True),  # "fourteen": number words as digits
        ("1200", "", True),  # "1,200"
        ("UK", "", True),  # the initials of "United Kingdom"
        ("British film directors", "", True),  # plural and singular alike
        ("unknown", "", True),  # an abstention claims nothing
        ("not mentioned in the documents", "", True),
        ("Lost Harbour", "", True),  # the question's own words (a choice's options are there too)
    ],
)
def test_a_short_answer_is_supported_by_the_question_the_answer_or_the_passages(
    short: str, answer: str, verdict: bool
) -> None:
    assert _supported(QUESTION, short, answer, tuple(PASSAGES.values())) is verdict


def test_yes_or_no_needs_a_yes_no_question_or_the_long_answer_saying_it() -> None:
    yes_no = "Are both Mirela Vost and Anton Reyes British?"
    assert _supported(yes_no, "no") and _supported(yes_no, "Yes")
    assert not _supported(QUESTION, "yes", REPLY)  # "yes" is no date
    assert _supported(QUESTION, "yes", "Yes, she was born in 1916.")  # as the long answer says it
    assert _supported("退票费用还要按普通差旅期限提交吗？", "不是")


def test_acronyms_either_way_and_scaled_numbers() -> None:
    passages = ("The film was released in the U.S. in 1949 and sold 1,400,000 tickets.",)
    assert _supported("Where was it released?", "United States", "", passages)
    assert _supported("Where was it released?", "US", "", passages)
    assert _supported("How many tickets did it sell?", "1.4 million", "", passages)
    assert not _supported("How many tickets did it sell?", "2.4 million", "", passages)
    assert _supported("Where was it released?", "USA", "", ("the United States of America",))


@pytest.mark.parametrize(
    ("short", "verdict"),
    [
        ("15个自然日", True),
        ("十五个自然日", True),  # a Chinese numeral is the digits' number
        ("退票之日起15个自然日内", True),
        ("第十五条", True),
        ("汤姆·克鲁斯", False),  # a name in no text (by character bigrams, not single characters)
        ("45个工作日", False),
        ("无法确定", True),  # an abstention
    ],
)
def test_chinese_by_character_bigrams_and_numerals(short: str, verdict: bool) -> None:
    assert _supported(QUESTION_ZH, short, REPLY_ZH, tuple(PASSAGES_ZH.values())) is verdict


def test_the_note_counts_the_words_and_keeps_the_refused_span() -> None:
    note = unsupported_note(QUESTION, "Tom Cruise", REPLY, tuple(PASSAGES.values()))
    assert note is not None
    assert (note["refused"], note["found"], note["words"]) == ("Tom Cruise", 0, 2)
    assert support(QUESTION, "", REPLY, ()) == (0, 0)  # nothing to judge


def test_the_passages_a_run_saw_are_its_claims_and_its_search_events() -> None:
    ev = Event("search", {"passages": [{"title": "Mirela Vost", "text": "born 3 May 1916"}]})
    assert seen_passages([], [ev, Event("note", {"passages": [{"text": "not a search"}]})]) == [
        "Mirela Vost\nborn 3 May 1916"
    ]


# -- in a run: the scripted model and a real index -------------------------------------------------


@pytest.fixture(scope="module")
def retriever(tmp_path_factory: pytest.TempPathFactory) -> Retriever:
    return titled_index(tmp_path_factory, "lost-harbour", PASSAGES)


@pytest.fixture(scope="module")
def retriever_zh(tmp_path_factory: pytest.TempPathFactory) -> Retriever:
    return titled_index(tmp_path_factory, "refund", PASSAGES_ZH)


def _notes(r: Result, name: str) -> list[dict]:
    return [e.data for e in r.trace.of("repair") if e.data.get("name") == name]


def _run(strategy: str, retriever: Retriever | None, question: str, reply: str, short: str) -> tuple[Result, int]:
    llm = ScriptedLLM([reply, short])  # the reply has no "So the answer is:" line: the short-answer call reads it
    r = get_strategy(strategy, llm, retriever).run(question)
    return r, len(llm.calls)


@pytest.mark.parametrize("strategy", ["rag", "cot"])
def test_a_made_up_short_answer_is_refused_and_the_long_answer_stands(strategy: str, retriever: Retriever) -> None:
    r, calls = _run(strategy, retriever if strategy == "rag" else None, QUESTION, REPLY, "Tom Cruise")
    assert calls == 2  # the reply and the short-answer call: the check costs no call
    assert r.short_answer == "" and "born in 1916" in r.answer
    (note,) = _notes(r, "short_support")
    assert note["refused"] == "Tom Cruise"
    answer = r.trace.of("answer")[-1].data
    assert answer["short_answer"] == "" and answer["answer"] == r.answer
    if strategy == "rag":  # the answer's own citations still stand
        assert [p.doc_id for p in r.citations] == ["Lost Harbour", "Mirela Vost"]
    # the repair switched off: the made-up span is returned, nothing else changes (no call either way)
    llm = ScriptedLLM([REPLY, "Tom Cruise"])
    off = get_strategy(strategy, llm, retriever if strategy == "rag" else None, short_support=False).run(QUESTION)
    assert off.short_answer == "Tom Cruise" and off.answer == r.answer and len(llm.calls) == calls
    assert not _notes(off, "short_support")


@pytest.mark.parametrize("strategy", ["rag", "cot"])
def test_a_short_answer_the_run_states_stands(strategy: str, retriever: Retriever) -> None:
    r, _ = _run(strategy, retriever if strategy == "rag" else None, QUESTION, REPLY, "1916")
    assert r.short_answer == "1916" and not _notes(r, "short_support")


def test_a_short_answer_only_the_passages_state_stands(retriever: Retriever) -> None:
    # the reply says only the year; the call's full date is in the director's passage
    r, _ = _run("rag", retriever, QUESTION, REPLY, "3 May 1916")
    assert r.short_answer == "3 May 1916" and not _notes(r, "short_support")
    r, _ = _run("cot", None, QUESTION, REPLY, "3 May 1916")  # closed book: nothing states the day
    assert r.short_answer == "" and _notes(r, "short_support")[0]["found"] == 1


@pytest.mark.parametrize(("short", "kept"), [("十五个自然日", "十五个自然日"), ("汤姆·克鲁斯", "")])
def test_chinese_in_a_run(retriever_zh: Retriever, short: str, kept: str) -> None:
    r, _ = _run("rag", retriever_zh, QUESTION_ZH, REPLY_ZH, short)
    assert r.short_answer == kept
    assert bool(_notes(r, "short_support")) is (kept == "")


def test_a_country_for_its_people_and_a_number_with_its_unit() -> None:
    # MuSiQue tuning-shaped: the long answer names the nationality, the short answer the country
    answer = "The author of the play was Henrik Ibsen, a Norwegian playwright."
    assert _supported("What country was the author of the play a citizen of?", "Norway", answer)
    assert not _supported("What country was the author of the play a citizen of?", "France", answer)
    # policy_zh-shaped: a day count in another unit word stands on its number
    assert _supported(QUESTION_ZH, "15天", REPLY_ZH) and not _supported(QUESTION_ZH, "45天", REPLY_ZH)


def test_each_item_of_a_list_found_as_written() -> None:
    # rgb_zh-shaped: two groups, each written apart in the passages ("组和" is no bigram of theirs)
    passages = ("阿根廷队被分在C组。", "法国队被分在D组。")
    assert _supported("两支球队分别在哪个组？", "D组和C组", "", passages)
    assert not _supported("两支球队分别在哪个组？", "D组和E组", "", passages)
