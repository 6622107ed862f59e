"""Where the answers go wrong: outcome buckets and trace signals read from records."""

from __future__ import annotations

from pathlib import Path

from sleuth.eval.report import render
from sleuth.eval.sections import answer_form_section, diagnosis_section, is_sentence, outcome, signals


def _rec(strategy: str, qid: str, *, score: float, searches: int = 1, recall: float | None = None, status: str = "ok",
         trace: list | None = None, kind: str = "main") -> dict:  # fmt: skip
    scores = {"score": score, "primary": "f1", "searches": searches, "recall_id": recall}
    return {
        "strategy": strategy,
        "qid": qid,
        "status": status,
        "task": {"kind": kind},
        "scores": scores,
        "result": {"trace": trace or []},
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


def test_signals_count_what_the_trace_logged() -> None:
    trace = [
        {"kind": "note", "data": {"type": "scaffold", "text": "..."}},  # informational: not a signal
        {"kind": "note", "data": {"type": "repeat_guard"}},
        {"kind": "reason_in_documents", "data": {"helpful": False}},
        {"kind": "reason_in_documents", "data": {"helpful": True}},
        {"kind": "follow_up", "data": {"question": "q", "repeat_of": "q"}},
        {"kind": "follow_up", "data": {"question": "r"}},
        {"kind": "step_back", "data": {"fallback": True}},
        {"kind": "revision", "data": {"skipped": True}},
        {"kind": "revision", "data": {"skipped": False}},
    ]
    c = signals(_rec("x", "a", score=0, trace=trace))
    assert c == {
        "repeat_guard": 1,
        "rid_steps": 2,
        "rid_nothing_helpful": 1,
        "repeated_follow_up": 1,
        "step_back_fallback": 1,
        "revision_skipped": 1,
    }
    assert signals({"strategy": "x", "qid": "a", "result": None}) == {}


def test_diagnosis_table_in_the_report() -> None:
    rid = [{"kind": "reason_in_documents", "data": {"helpful": False}}] * 2
    recs = [
        _rec("search-o1", "a", score=0.0, recall=1.0, trace=rid),
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
    assert "Reason-in-Documents found nothing helpful: 2 of 2 steps" in text
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


def test_answer_form_counts_sentences_and_right_answers_scored_wrong() -> None:
    def rec(strategy: str, qid: str, short: str, *, score: float, cover: float, primary: str = "f1") -> dict:
        r = _rec(strategy, qid, score=score, recall=1.0)
        r["short_answer"] = short
        r["scores"].update(cover_em=cover, primary=primary)
        return r

    recs = [
        rec("rag", "a", "The Gettysburg Address was part of Richard Heffner's show", score=0.29, cover=1.0),
        rec("rag", "b", "Denise Levertov", score=1.0, cover=1.0),
        rec("rag", "c", "It was written by someone else entirely, I think", score=0.0, cover=0.0),
        rec("search-o1", "a", "Richard Heffner", score=1.0, cover=1.0),
        rec("search-o1", "b", "Harvey Pekar or Denise Levertov", score=0.4, cover=1.0),  # both named: not a sentence
        rec("search-o1", "c", "no", score=0.0, cover=0.0),
        rec("rag", "a#1", "a hop answered in a sentence of many words here", score=0.0, cover=1.0),
    ]
    recs[-1]["task"] = {"kind": "sub"}  # gap hops are not composed questions
    text = "\n".join(answer_form_section(recs, ["rag", "search-o1"]))
    assert "## Answer form" in text
    assert "| rag | 3 | 2 | 1 | 1 | 2 |" in text
    assert "| search-o1 | 3 | 0 | 1 | 1 | 2 |" in text
    assert text.index("| rag |") < text.index("| search-o1 |")
    # only where the primary score compares answer tokens: a must-mention set is not shown
    assert answer_form_section([rec("rag", "q1", "你可以报销", score=1.0, cover=1.0, primary="mention")], ["rag"]) == []
    assert answer_form_section([], ["rag"]) == []
    assert is_sentence("one two three four five six seven") and not is_sentence("one two three four five six")
    assert "## Answer form" in render(recs, {"settings": {"strategies": ["rag", "search-o1"]}})
