"""Metrics on known cases and the compositionality gap on a constructed example."""

from __future__ import annotations

import math

import pytest

from sleuth.eval.datasets import MC, YESNO, Item, SubQuestion
from sleuth.eval.gap import as_question, compositionality_gap, sub_items, substitute
from sleuth.eval.metrics import (
    Prices,
    abstains,
    cover_em,
    exact_match,
    f1,
    mentions,
    normalize_answer,
    parse_choice,
    parse_yesno,
    recall,
    retrieved_passages,
    score,
)
from sleuth.eval.summary import bootstrap_ci


def test_squad_normalisation() -> None:
    assert normalize_answer("The  Eiffel Tower!") == "eiffel tower"
    assert normalize_answer("An apple, a day") == "apple day"
    assert normalize_answer("ÉCOLE") == "école"
    assert normalize_answer("“退款”到账。") == "退款到账"
    assert normalize_answer("26,000") == "26000" and normalize_answer("U.S.") == "us"  # official SQuAD rule


def test_em_f1_cover() -> None:
    assert exact_match("the Denise Levertov.", ["Denise Levertov"]) == 1.0
    assert exact_match("Levertov", ["Denise Levertov"]) == 0.0
    assert exact_match("Stanley Hall", ["G. Stanley Hall", "Stanley Hall"]) == 1.0  # any alias
    # SQuAD F1: pred "denise" vs gold "denise levertov": p=1, r=.5 -> 2/3
    assert f1("Denise", ["Denise Levertov"]) == pytest.approx(2 / 3)
    assert f1("Paris France", ["Paris"]) == pytest.approx(2 / 3)
    assert f1("", ["Paris"]) == 0.0
    assert f1("1,000", ["26,000"]) == 0.0
    assert f1("x", []) == 0.0
    assert cover_em("It was Denise Levertov, born 1923.", ["Denise Levertov"]) == 1.0
    assert cover_em("Levertovs", ["Levertov"]) == 0.0  # token boundaries
    assert cover_em("在15个自然日内", ["15个"]) == 1.0
    # Chinese F1 counts characters
    assert f1("十五天", ["十五个自然日"]) == pytest.approx(2 * (2 / 3) * (2 / 6) / ((2 / 3) + (2 / 6)))


@pytest.mark.parametrize(
    ("answer", "letter"),
    [
        ("B", "B"),
        ("(C)", "C"),
        ("The answer is D.", "D"),
        ("Answer: A", "A"),
        ("C. Constant volume", "C"),
        ("Constant volume", "B"),  # option text
        ("I think it's the second", ""),
        ("", ""),
    ],
)
def test_parse_choice(answer: str, letter: str) -> None:
    assert parse_choice(answer, ["Constant temperature", "Constant volume", "Constant pressure", "Adiabatic"]) == letter


def test_yesno_and_abstain_and_mentions() -> None:
    assert parse_yesno("Yes, because ...") == "yes"
    assert parse_yesno("No.") == "no"
    assert parse_yesno("It is not true") == "no"
    assert parse_yesno("maybe") == ""
    assert parse_yesno("不是。退票费用") == "no"
    assert abstains("I cannot answer that from the documents") and abstains("") and not abstains("Paris")
    assert mentions("应在 15 个自然日内提交", ["15"]) == 1.0
    assert mentions("抽查比例为 5%", [], ["5%"]) == 0.0
    assert mentions("没有相关规定", [], ["5%"]) == 1.0
    assert mentions("每晚不超过600元", ["60"]) == 0.0 and mentions("每晚不超过600元", ["600"]) == 1.0
    assert mentions("比例为15%", ["5%"]) == 0.0


def test_recall_from_citations_and_trace() -> None:
    result = {
        "citations": [{"id": "Harvey Pekar#0", "doc_id": "Harvey Pekar", "title": "Harvey Pekar"}],
        "trace": [
            {"kind": "search", "data": {"passages": [{"id": "X#0", "doc_id": "X", "title": '"Denise Levertov"'}]}},
            {"kind": "llm", "data": {}},
        ],
    }
    ps = retrieved_passages(result)
    assert len(ps) == 2
    assert recall(["Harvey Pekar", "Denise Levertov"], ps, by="title") == 1.0
    assert recall(["Harvey Pekar", "Denise Levertov"], result["citations"], by="title") == 0.5
    assert recall(["Harvey Pekar", "Y"], ps, by="id") == 0.5  # chunk id "<doc>#n" maps to its doc
    assert recall([], ps, by="id") is None


def test_prices() -> None:
    p = Prices.parse("1.0,2.0")
    assert p.cost({"prompt_tokens": 1_000_000, "completion_tokens": 500_000}) == pytest.approx(2.0)
    p = Prices.parse("1.0,2.0,0.1")
    assert p.cost({"prompt_tokens": 1_000_000, "cached_prompt_tokens": 1_000_000}) == pytest.approx(0.1)
    assert not Prices.parse(None).configured or Prices.parse(None).prompt >= 0
    with pytest.raises(ValueError):
        Prices.parse("1")
    with pytest.raises(ValueError):
        Prices.parse("a,b")


def test_score_per_item_type() -> None:
    open_item = Item("q", "Who?", ["Denise Levertov"], gold_titles=["Denise Levertov"])
    s = score(
        open_item,
        {
            "answer": "It was Denise Levertov.",
            "short_answer": "Denise Levertov",
            "usage": {"prompt_tokens": 10, "completion_tokens": 5},
            "llm_calls": 1,
        },
        Prices(1.0, 1.0),
    )
    assert (s["em"], s["f1"], s["cover_em"], s["primary"], s["score"]) == (1.0, 1.0, 1.0, "f1", 1.0)
    assert s["recall_title"] == 0.0 and s["prompt_tokens"] == 10 and s["cost_usd"] == pytest.approx(15e-6)
    # cover-EM reads the final answer, not the evidence a long answer quotes (recorded from Step-back on
    # MuSiQue: the alias "NO" of Norway matched "No specific clause", and a quoted treaty name was credited)
    norway = Item("n", "What country was the author of Brand a citizen of?", ["Norway", "NO", "NOR"])
    quoted = {
        "answer": "Specific clause: No specific clause for this case.\nConclusion: The author is from Florida.",
        "short_answer": "Florida",
    }
    assert score(norway, quoted)["cover_em"] == 0.0
    sentence = "He was a citizen of Norway."
    assert score(norway, {"answer": sentence, "short_answer": sentence})["cover_em"] == 1.0  # a sentence counts
    assert score(norway, {"answer": "Norway", "short_answer": ""})["cover_em"] == 1.0  # no short answer: the answer
    mc = Item("m", "Which?", ["B"], type=MC, choices=["a", "b", "c", "d"])
    assert score(mc, {"answer": "The answer is (B)"})["acc"] == 1.0
    assert score(mc, {"answer": ""})["score"] == 0.0
    yn = Item("y", "Is it?", ["no"], type=YESNO)
    assert score(yn, {"answer": "No, it is not."})["score"] == 1.0
    pol = Item("p", "多少?", ["..."], must_mention=["15"])
    s = score(pol, {"answer": "15个自然日内"})
    assert s["primary"] == "mention" and s["score"] == 1.0
    unans = Item("u", "Who?", [], answerable=False)
    assert score(unans, {"answer": "unknown"})["em"] == 1.0
    assert score(unans, {"answer": "Bob"})["em"] == 0.0


def test_substitution_and_sub_items() -> None:
    assert substitute("Who was the first president of #1 ?", ["APA"]) == "Who was the first president of APA ?"
    assert substitute("Is #2 greater than #1 and #3?", ["a", "b"]) == "Is b greater than a and #3?"
    it = Item(
        "q1",
        "Composed?",
        ["Hall"],
        decomposition=[
            SubQuestion("What company published X?", "APA"),
            SubQuestion("Who was the first president of #1 ?", "G. Stanley Hall", ["Stanley Hall"]),
        ],
    )
    subs = sub_items(it)
    assert [s.id for s in subs] == ["q1::sub1", "q1::sub2"]
    assert subs[1].question == "Who was the first president of APA?"
    assert subs[1].answers == ["G. Stanley Hall", "Stanley Hall"]
    assert subs[1].metadata == {
        "parent": "q1",
        "hop": 2,
        "hops": 2,
        "source_question": "Who was the first president of #1 ?",
    }
    # StrategyQA-style decompositions without gold answers give no sub-items
    assert sub_items(Item("s", "?", ["yes"], decomposition=[SubQuestion("a"), SubQuestion("b")])) == []


def test_triple_hops_are_asked_as_questions() -> None:
    # MuSiQue writes many hops as Wikidata triples; they are asked as the question they mean
    assert as_question("Hello Love >> performer") == "Who is the performer of Hello Love?"
    assert as_question("Akinoshu Kenji >> place of birth") == "Where was Akinoshu Kenji born?"
    assert as_question("Bubye River >> country") == "Which country is Bubye River in?"
    assert as_question("X >> native language") == "What is the native language of X?"  # generic form
    assert as_question("X >>  spouse ") == "Who is the spouse of X?"
    # a subject with commas keeps them, with the spacing tidied
    assert as_question("Midway , White County >> country") == "Which country is Midway, White County in?"
    # hops already written as questions only get their spacing tidied
    assert as_question("how many publix stores are in  Texas ?") == "how many publix stores are in Texas?"
    it = Item(
        "q2",
        "Composed?",
        ["Austria"],
        decomposition=[
            SubQuestion("Aschenbrödel >> composer", "Johann Strauss II"),
            SubQuestion("#1 >> country of citizenship", "Austria"),
        ],
    )
    assert [s.question for s in sub_items(it)] == [
        "Who is the composer of Aschenbrödel?",
        "What is the country of citizenship of Johann Strauss II?",
    ]


def _rec(strategy: str, qid: str, ok: bool, hops: int = 2) -> dict:
    task = {"kind": "sub", "hops": hops} if "::sub" in qid else {"kind": "main"}
    return {"strategy": strategy, "qid": qid, "task": task, "scores": {"em": float(ok)}}


def test_compositionality_gap_constructed() -> None:
    recs = []
    # strategy A: q1 subs right, composed wrong; q2 subs right, composed right;
    # q3 one sub wrong (excluded from the denominator), composed right; q4 subs right, composed wrong
    for qid, subs, composed in [("q1", [1, 1], 0), ("q2", [1, 1], 1), ("q3", [1, 0], 1), ("q4", [1, 1], 0)]:
        recs.append(_rec("A", qid, bool(composed)))
        recs += [_rec("A", f"{qid}::sub{i}", bool(ok)) for i, ok in enumerate(subs, 1)]
    # strategy B: all right -> gap 0; q2 lacks a sub result -> left out
    recs += [_rec("B", "q1", True), _rec("B", "q1::sub1", True), _rec("B", "q1::sub2", True)]
    recs += [_rec("B", "q2", False), _rec("B", "q2::sub1", True)]
    g = compositionality_gap(recs, "em")
    a, b = g["A"], g["B"]
    assert (a.questions, a.subs_all_right, a.composed_wrong) == (4, 3, 2)
    assert a.gap == pytest.approx(2 / 3)
    assert a.composed_right_overall == 2
    assert (a.hops, a.hops_right) == (8, 7)
    assert (b.questions, b.subs_all_right, b.composed_wrong, b.gap) == (1, 1, 0, 0.0)
    # nobody got all sub-questions right -> gap undefined, not 0
    none = compositionality_gap([_rec("C", "q", True), _rec("C", "q::sub1", False), _rec("C", "q::sub2", True)])
    assert none["C"].gap is None


def test_bootstrap_ci_deterministic() -> None:
    vals = [1.0] * 30 + [0.0] * 70
    m, lo, hi = bootstrap_ci(vals)
    assert m == pytest.approx(0.3) and lo < 0.3 < hi and lo > 0.15 and hi < 0.45
    assert bootstrap_ci(vals) == (m, lo, hi)
    assert bootstrap_ci([1.0]) == (1.0, 1.0, 1.0)
    assert all(math.isnan(x) for x in bootstrap_ci([]))
