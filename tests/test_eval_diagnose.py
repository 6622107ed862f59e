"""Where the answers go wrong (outcome buckets read from records), paired differences, committed reports."""

from __future__ import annotations

from pathlib import Path

from sleuth.eval.report import render
from sleuth.eval.sections import diagnosis_section, outcome


def _rec(strategy: str, qid: str, *, score: float, searches: int = 1, recall: float | None = None, status: str = "ok",
         kind: str = "main") -> dict:  # fmt: skip
    scores = {"score": score, "primary": "f1", "searches": searches, "recall_id": recall}
    return {
        "strategy": strategy,
        "qid": qid,
        "status": status,
        "task": {"kind": kind},
        "scores": scores,
        "result": {"trace": []},
    }


def test_outcome_buckets() -> None:
    assert outcome(_rec("rag", "a", score=1.0, recall=0.0)) == "correct"
    assert outcome(_rec("rag", "a", score=0.5, recall=1.0)) == "correct"
    assert outcome(_rec("rag", "a", score=0.0, status="failed")) == "failed"
    assert outcome(_rec("direct", "a", score=0.0, searches=0)) == "closed_book"
    assert outcome(_rec("rag", "a", score=0.2, recall=0.0)) == "no_evidence"
    assert outcome(_rec("rag", "a", score=0.0, recall=0.5)) == "some_evidence"
    assert outcome(_rec("rag", "a", score=0.0, recall=1.0)) == "all_evidence"
    assert outcome(_rec("rag", "a", score=0.0, recall=None)) == "unknown_evidence"
    # titles stand in when the dataset has no paragraph ids
    r = _rec("rag", "a", score=0.0)
    r["scores"]["recall_title"] = 1.0
    assert outcome(r) == "all_evidence"


def test_diagnosis_table_in_the_report() -> None:
    recs = [
        _rec("search-o1", "a", score=0.0, recall=1.0),
        _rec("search-o1", "b", score=1.0, recall=1.0),
        _rec("direct", "a", score=0.0, searches=0),
        _rec("direct", "b", score=1.0, searches=0),
        _rec("direct", "a#1", score=0.0, searches=0, kind="sub"),  # gap hops are not composed questions
    ]
    lines = diagnosis_section(recs, ["direct", "search-o1"])
    text = "\n".join(lines)
    assert "## Where the answers go wrong" in text
    assert "| direct | 2 | 1 | 0 | 1 | 0 | 0 | 0 | 0 |" in text
    assert "| search-o1 | 2 | 1 | 0 | 0 | 0 | 0 | 1 | 0 |" in text
    assert text.index("| direct |") < text.index("| search-o1 |")
    assert diagnosis_section([], ["direct"]) == []
    report = render(recs, {"settings": {"strategies": ["direct", "search-o1"]}})
    assert "## Where the answers go wrong" in report


def test_committed_reports_match_their_jsonl() -> None:
    """Every report under docs/results is what `sleuth eval report DIR` makes of its records and run.json
    (which commits made the records is the report's to say; no test ties them to the running code)."""
    from sleuth.eval.report import PLOTS
    from sleuth.eval.store import read_manifest, read_records
    from sleuth.eval.summary import progress

    root = Path(__file__).resolve().parents[1] / "docs" / "results"
    for report in sorted(root.glob("*/report.md")):
        d = report.parent
        records = sorted(read_records(d / "results.jsonl"), key=lambda r: (r["strategy"], str(r["qid"])))
        plots = [p for p in PLOTS if (d / p).exists()]
        manifest = read_manifest(d)
        expected = render(records, manifest, plots)
        assert report.read_text(encoding="utf-8") == expected, d
        if progress(records, manifest).complete:  # like with like: a question every strategy has finished
            assert "## Where the answers go wrong" in report.read_text(encoding="utf-8")


def test_paired_differences_against_the_baseline() -> None:
    from sleuth.eval.summary import paired_differences

    recs = []
    for i in range(30):
        recs.append(_rec("rag", f"q{i}", score=0.0))
        recs.append(_rec("self-ask", f"q{i}", score=1.0))  # always better
        recs.append(_rec("cot", f"q{i}", score=float(i % 2)))  # better on half, worse on none
        recs.append(_rec("direct", f"q{i}", score=0.0, searches=0))  # the same
    recs.append(_rec("direct", "q0#1", score=1.0, kind="sub"))  # gap hops are not compared
    base, rows = paired_differences(recs, ["direct", "cot", "rag", "self-ask"])
    assert base == "rag"
    by = {r["strategy"]: r for r in rows}
    assert set(by) == {"direct", "cot", "self-ask"}
    assert by["self-ask"]["diff"] == (1.0, 1.0, 1.0) and by["self-ask"]["wins"] == 30
    assert by["direct"]["diff"] == (0.0, 0.0, 0.0) and by["direct"]["ties"] == 30
    m, lo, hi = by["cot"]["diff"]
    assert m == 0.5 and 0.25 <= lo < 0.5 < hi <= 0.75 and by["cot"]["wins"] == 15 and by["cot"]["n"] == 30
    # without rag the first strategy is the baseline; only questions both answered are paired
    base, rows = paired_differences([*[r for r in recs if r["strategy"] != "rag"][:-1], _rec("cot", "extra", score=1.0)],
                                    ["direct", "cot", "self-ask"])  # fmt: skip
    assert base == "direct" and {r["strategy"]: r["n"] for r in rows} == {"cot": 30, "self-ask": 30}
    assert paired_differences([], ["rag"]) == (None, [])
    _, rows = paired_differences(recs, ["rag", "cot"])  # only the strategies named, not every one in the records
    assert [r["strategy"] for r in rows] == ["cot"]
    report = render(recs, {"settings": {"strategies": ["direct", "cot", "rag", "self-ask"]}})
    assert (
        "## Paired differences against rag" in report
        and "| self-ask | 30 | +1.000 [+1.000, +1.000] | 30 | 0 | 0 |" in report
    )
    assert "Fewer than 20 paired" not in report
    assert "| processed prompt tokens × rag | seconds × rag |" in report
    assert "| self-ask | 30 | +1.000 [+1.000, +1.000] | 30 | 0 | 0 | – | – |" in report  # rag spent nothing here
    # what a strategy spent on the paired questions, as a multiple of the baseline's
    for r in recs:
        cost = {"rag": (700, 24.0), "self-ask": (1400, 36.0)}.get(r["strategy"], (100, 3.0))
        r["scores"]["processed_prompt_tokens"], r["scores"]["seconds"] = cost
    by = {r["strategy"]: r for r in paired_differences(recs, ["direct", "cot", "rag", "self-ask"])[1]}
    assert by["self-ask"]["tokens_ratio"] == 2.0 and by["self-ask"]["seconds_ratio"] == 1.5
    report = render(recs, {"settings": {"strategies": ["direct", "cot", "rag", "self-ask"]}})
    assert "| self-ask | 30 | +1.000 [+1.000, +1.000] | 30 | 0 | 0 | 2.00× | 1.50× |" in report
    small = render(recs[:8], {"settings": {"strategies": ["direct", "cot", "rag", "self-ask"]}})
    assert "Fewer than 20 paired questions" in small
