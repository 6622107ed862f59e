"""docs/results/replaced.py: old against re-made records, read from the superseded lines."""

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "docs" / "results" / "replaced.py"


def _rec(strategy: str, qid: str, f1: float, short: str, fallback: bool = False) -> dict:
    trace = [{"kind": "note", "data": {"type": "parse_fallback"}}] if fallback else []
    return {
        "strategy": strategy,
        "qid": qid,
        "answer": "the long answer of " + qid,
        "short_answer": short,
        "scores": {"f1": f1, "em": f1, "cover_em": 1.0, "seconds": 2.0, "primary": "f1", "score": f1},
        "result": {"trace": trace},
    }


def test_old_and_new_means_and_paired_differences(tmp_path: Path) -> None:
    lines = [
        _rec("rag", "q1", 0.0, "the answer is written as a long sentence here"),
        _rec("rag", "q2", 1.0, "Paris"),
        _rec("step-back", "q1", 1.0, "Lyon"),
        _rec("step-back", "q2", 1.0, "Paris"),
        _rec("rag", "q1", 1.0, "Lyon", fallback=True),  # re-made: replaces the first q1 line
    ]
    text = "".join(json.dumps(r) + "\n" for r in lines) + '{"torn'  # a torn last line is ignored
    (tmp_path / "results.jsonl").write_text(text, encoding="utf-8")
    out = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True, check=True
    ).stdout
    assert "rag: 1 records replaced | F1 0.000 -> 1.000" in out
    assert "sentence answers 1 -> 0 | parse_fallback in 1" in out
    assert "long answer unchanged in 1/1" in out
    assert "step-back" not in out.split("paired")[0]  # nothing of step-back was replaced
    assert "on the 1 composed questions whose rag record was replaced" in out
    assert "step-back - old rag: +1.000" in out
    assert "step-back - new rag: +0.000" in out


def test_compacted_run_prints_the_same(tmp_path: Path) -> None:
    """After `sleuth eval compact` the superseded lines live in replaced.jsonl.gz; the output is the same."""
    from sleuth.eval.store import compact_run

    lines = [
        _rec("rag", "q1", 0.0, "the answer is written as a long sentence here"),
        _rec("step-back", "q1", 1.0, "Lyon"),
        _rec("rag", "q1", 0.5, "Lyon"),
        _rec("rag", "q1", 1.0, "Lyon", fallback=True),
    ]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")

    def run() -> str:
        return subprocess.run(
            [sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True, check=True
        ).stdout

    before = run()
    assert "rag: 1 records replaced | F1 0.000 -> 1.000" in before  # first against last
    assert compact_run(tmp_path) == (2, 2)
    assert not (tmp_path / "results.jsonl").exists()
    assert run() == before
