"""Policy questions scored by their conclusion (sleuth.eval.policy) and the benchmark's own data
(benchmarks/data/policy_zh): the answers below are real replies of the embedded 1.5B model from the
committed policy_zh run (docs/results/policy_zh) and this change's runs on the tuning half."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from sleuth.eval.datasets import load_dataset
from sleuth.eval.metrics import score
from sleuth.eval.policy import abstains, answer_polarity, has_term, polarity, scope_violations
from sleuth.search.base import Filters, Passage

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "policy_zh"
SCOPE = Filters.make(equals={"version": "2025", "region": "境内"}, acl=["all"])


def _records(name: str) -> list[dict]:
    return [json.loads(ln) for ln in (BENCH / name).read_text(encoding="utf-8").splitlines() if ln.strip()]


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("不是。退票费用应在退款结算后15个自然日内提交。", "否"),
        ("不需要，紧急情况可以先行采购。", "否"),
        ("不能全额报销。", "否"),
        ("是。根据文档中的第十五条，……", "是"),
        ("可以。不可抗力导致无法按期提交的，重新计算30个自然日。", "是"),
        ("退票费用不按一般期限，而是在到账后15日内提交。", "否"),  # negates the rule without a yes/no word
        ("30个自然日内。", ""),  # a number decides no yes/no question
        ("是否适用要看具体情况。", ""),
    ],
)
def test_polarity_reads_how_the_conclusion_starts(text: str, want: str) -> None:
    assert polarity(text) == want


def test_the_conclusion_field_and_the_short_answer_decide_and_a_contradiction_is_caught() -> None:
    # Step-back's form: the start states the rule; the conclusion field decides (committed run, q1)
    form = "一般规定：员工应在行程结束后30个自然日内提交报销申请。\n专门条款：无\n结论：是"
    assert answer_polarity(form, "是") == ("是", False)
    # a body that says 是 and a short answer that says 不是 contradict each other
    assert answer_polarity("是。根据第十五条，应在15个自然日内提交。", "不是") == ("否", True)


def test_terms_accept_variants_and_never_part_of_a_longer_number() -> None:
    assert has_term("应在退款到账后15个自然日内提交", "第十五条|15个自然日")
    assert has_term("第十五条规定……", "第十五条|15个自然日")
    assert not has_term("报销期限为150天", "15")
    assert not has_term("每晚不超过600元", "60")
    assert has_term("5 万元以上", "5万|50000")


def test_abstentions_in_the_models_own_words() -> None:
    assert abstains("[1] 文档中没有直接给出内部审计对差旅报销的抽查比例。")  # committed RAG, q5
    assert abstains("现有材料无法回答")
    assert not abstains("内部审计对差旅报销的抽查比例是15个自然日内。")  # committed Step-back, q5


def test_scope_violations_count_out_of_scope_citations_restricted_documents_and_leaked_facts() -> None:
    audit = {
        "id": "fin-audit-2025#0",
        "doc_id": "fin-audit-2025",
        "acl": ["finance"],
        "version": "2025",
        "region": "境内",
    }
    public = {"id": "trv-2025-02#0", "doc_id": "trv-2025-02", "acl": ["all"], "version": "2025", "region": "境内"}
    old = {"id": "trv-2024-01#0", "doc_id": "trv-2024-01", "acl": ["all"], "version": "2024", "region": "境内"}
    assert scope_violations(SCOPE, [public]) == []
    assert len(scope_violations(SCOPE, [audit])) == 1
    assert len(scope_violations(SCOPE, [old])) == 1  # another version is outside the scope too
    assert scope_violations(SCOPE, [], [audit], restricted=["fin-audit-2025"]) == ["saw restricted fin-audit-2025"]
    assert scope_violations(SCOPE, [], answer="抽查比例不低于5%", restricted_facts=["5%"])


def _item(qid: str):
    return {it.id: it for it in load_dataset(BENCH / "tuning.jsonl").items}[qid]


def _result(answer: str, short: str, cited: list[str]) -> dict:
    corpus = {d["id"]: d for d in _records("corpus.jsonl")}
    cites = [{**corpus[c], "id": f"{c}#0", "doc_id": c, "acl": [corpus[c]["acl"]]} for c in cited]
    return {"answer": answer, "short_answer": short, "citations": cites}


def test_a_yes_no_question_counts_only_with_the_right_polarity_and_the_deciding_clause() -> None:
    q1 = _item("q1")
    assert q1.metadata["conclusion"] == "否" and q1.metadata["policy"]
    # the committed RAG answer: the right clause, the wrong conclusion (must-mention alone called it right)
    rag = score(
        q1, _result("是。根据文档中的第十五条，……应在退款结算完成后15个自然日内提交报销。", "是", ["trv-2025-02"])
    )
    assert rag["mention"] == 1.0 and rag["conclusion"] == 0.0 and rag["score"] == 0.0
    right = score(
        q1,
        _result(
            "不是。\n依据：第十五条 因公取消行程产生的退票费用……应在退款结算完成后15个自然日内提交报销。 [1]",
            "不是",
            ["trv-2025-02"],
        ),
    )
    assert right["conclusion"] == 1.0 and right["primary"] == "conclusion" and right["scope_violation"] == 0.0
    assert score(q1, _result("不是。", "不是", []))["conclusion"] == 0.0  # the polarity without the clause


def test_an_out_of_scope_question_counts_only_as_an_honest_abstention() -> None:
    q5 = _item("q5")  # the audit file is finance-only; the asker sees acl=all
    assert not q5.answerable and q5.metadata["restricted"] == ["fin-audit-2025"]
    said = score(q5, _result("现有可查阅的材料中没有相关规定，无法回答。", "无法回答", []))
    assert said["conclusion"] == 1.0 and said["scope_violation"] == 0.0
    wrong = score(q5, _result("内部审计对差旅报销的抽查比例是15个自然日内。", "15", ["trv-2025-02"]))
    assert wrong["conclusion"] == 0.0
    leak = score(q5, _result("文档中没有相关规定。抽查比例不低于5%。", "5%", ["fin-audit-2025"]))
    assert leak["conclusion"] == 0.0 and leak["scope_violation"] == 1.0


def test_the_shared_questions_without_a_conclusion_field_take_their_gold_answers_polarity(data_dir: Path) -> None:
    items = {it.id: it for it in load_dataset(data_dir / "policy_zh" / "questions.jsonl").items}
    assert items["q1"].metadata["conclusion"] == "否"  # "不是。退票费用应在……"
    assert items["q7"].metadata["conclusion"] == "是"  # "可以。不可抗力……"
    assert items["q3"].metadata["conclusion"] is None  # a deadline, not a yes/no question


def test_the_benchmark_is_complete_and_consistent() -> None:
    corpus = {d["id"]: d for d in _records("corpus.jsonl")}
    tuning, reporting = _records("tuning.jsonl"), _records("reporting.jsonl")
    assert len(tuning) >= 30 and len(reporting) >= 30
    assert {r["split"] for r in tuning} == {"tuning"} and {r["split"] for r in reporting} == {"reporting"}
    assert {f"q{i}" for i in range(1, 9)} <= {r["id"] for r in tuning}  # the 8 of shared/data are kept
    families = {d["id"].split("-")[0] for d in corpus.values() if d["acl"] == "all"} - {"fin"}
    assert families >= {"trv", "pur", "lv", "exp", "sec"}
    for fam in ("trv", "pur", "lv", "exp", "sec"):  # two versions and both regions in every family
        docs = [d for d in corpus.values() if d["id"].startswith(fam + "-")]
        assert {d["version"] for d in docs} >= {"2024", "2025"} and {d["region"] for d in docs} == {"境内", "境外"}
    assert {d["acl"] for d in corpus.values()} == {"all", "finance", "hr", "legal"}
    for half in (tuning, reporting):
        assert Counter(r["conclusion"] for r in half)["是"] >= 5 and Counter(r["conclusion"] for r in half)["否"] >= 5
        assert sum(r["kind"] == "out_of_scope" for r in half) >= 2
    for r in tuning + reporting:
        assert r["conclusion"] in ("是", "否", None)
        assert all(e in corpus for e in r["evidence"] + r.get("restricted", []))
        scope = Filters.make(equals={k: v for k, v in r["scope"].items() if k != "acl"}, acl=r["scope"]["acl"])
        for e in r["evidence"]:  # the evidence is inside the asker's scope; the restricted documents are not
            d = corpus[e]
            assert scope.matches(Passage(id=e, text="", acl=[d["acl"]], version=d["version"], region=d["region"]))
        for e in r.get("restricted", []):
            d = corpus[e]
            assert not scope.matches(Passage(id=e, text="", acl=[d["acl"]], version=d["version"], region=d["region"]))
        assert bool(r["evidence"]) != (r["kind"] == "out_of_scope")
        assert r["must_mention"] or r["must_not_mention"]
    assert not {r["question"] for r in tuning} & {r["question"] for r in reporting}


def test_a_bad_conclusion_is_refused_in_one_sentence(tmp_path: Path) -> None:
    from sleuth.eval.datasets import DatasetError

    bad = tmp_path / "q.jsonl"
    bad.write_text(
        json.dumps({"id": "x", "question": "能报吗？", "answer": "能", "conclusion": "yes", "scope": {}}) + "\n"
    )
    with pytest.raises(DatasetError, match="conclusion must be 是, 否 or null"):
        load_dataset(bad, "policy_zh")
