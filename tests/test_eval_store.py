"""Compressed run data: ``results.jsonl.gz`` (the newest record per task), written atomically."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sleuth.eval.report import write_report
from sleuth.eval.store import (
    RESULTS,
    RESULTS_GZ,
    compact_run,
    read_records,
    results_files,
    rewrite_records,
    run_lock,
    write_jsonl,
    write_manifest,
)

ROOT = Path(__file__).resolve().parents[1]


def _rec(strategy: str, qid: str, answer: str) -> dict:
    return {
        "strategy": strategy,
        "qid": qid,
        "task": {"kind": "main"},
        "status": "ok",
        "answer": answer,
        "short_answer": answer,
        "scores": {"primary": "f1", "score": float(answer == "Paris"), "f1": float(answer == "Paris")},
        "code": "abc",
        "result": {"trace": []},
    }


def _plain(out: Path, recs: list[dict], torn: bool = False) -> None:
    out.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs) + ('{"torn' if torn else "")
    (out / RESULTS).write_text(text, encoding="utf-8")


LINES = [
    _rec("rag", "q1", "Lyon"),
    _rec("rag", "q2", "Paris"),
    _rec("cot", "q1", "Paris"),
    _rec("rag", "q1", "Nice"),  # re-made twice: the last one wins
    _rec("rag", "q1", "Paris"),
]


def test_compaction_keeps_the_newest_per_task(tmp_path: Path) -> None:
    out = tmp_path / "run"
    _plain(out, LINES, torn=True)
    write_manifest(out, {"settings": {"strategies": ["cot", "rag"]}})
    before = read_records(out)
    report = write_report(out, plots=False).read_text(encoding="utf-8")

    assert compact_run(out) == (3, 2)
    assert not (out / RESULTS).exists() and results_files(out) == [out / RESULTS_GZ]
    with gzip.open(out / RESULTS_GZ, "rt", encoding="utf-8") as f:
        assert [json.loads(ln)["answer"] for ln in f] == ["Paris", "Paris", "Paris"]  # newest only
    assert read_records(out) == before
    assert read_records(out / RESULTS) == before  # the old path still names the run's results
    assert write_report(out, plots=False).read_text(encoding="utf-8") == report

    gz = (out / RESULTS_GZ).read_bytes()
    assert compact_run(out) == (3, 0)  # idempotent
    assert (out / RESULTS_GZ).read_bytes() == gz  # and reproducible byte for byte (no time in the header)


def test_a_resumed_compacted_run_reads_its_new_lines_as_newer(tmp_path: Path) -> None:
    out = tmp_path / "run"
    _plain(out, LINES)
    compact_run(out)
    _plain(out, [_rec("cot", "q1", "Nice"), _rec("cot", "q2", "Paris")])  # a later sitting appends here
    recs = {(r["strategy"], r["qid"]): r["answer"] for r in read_records(out)}
    assert recs == {("rag", "q1"): "Paris", ("rag", "q2"): "Paris", ("cot", "q1"): "Nice", ("cot", "q2"): "Paris"}
    assert compact_run(out) == (4, 1)


def test_reading_an_old_plain_run_directory(tmp_path: Path) -> None:
    out = tmp_path / "old"
    _plain(out, LINES, torn=True)
    assert results_files(out) == [out / RESULTS]
    assert sorted((r["strategy"], r["qid"], r["answer"]) for r in read_records(out)) == [
        ("cot", "q1", "Paris"),
        ("rag", "q1", "Paris"),
        ("rag", "q2", "Paris"),
    ]


def test_rewriting_keeps_each_file_in_its_form(tmp_path: Path) -> None:
    out = tmp_path / "run"
    _plain(out, LINES)
    compact_run(out)
    _plain(out, [_rec("cot", "q2", "Lyon")])

    def shout(rec: dict) -> dict:
        return {**rec, "short_answer": rec["short_answer"].upper()}

    with run_lock(out):
        assert rewrite_records(out, shout) == 4
    assert sorted(r["short_answer"] for r in read_records(out)) == ["LYON", "PARIS", "PARIS", "PARIS"]
    assert (out / RESULTS).read_text(encoding="utf-8").count("\n") == 1
    with gzip.open(out / RESULTS_GZ, "rt", encoding="utf-8") as f:
        assert len(f.read().splitlines()) == 3


def test_a_crash_mid_write_leaves_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / RESULTS_GZ
    write_jsonl(path, LINES[:2])
    old = path.read_bytes()

    def failing():
        yield LINES[2]
        raise OSError("disk full")

    with pytest.raises(OSError):
        write_jsonl(path, failing())
    assert path.read_bytes() == old

    # a process killed in the middle of writing (no exception handling runs)
    script = textwrap.dedent(
        f"""
        import os
        from sleuth.eval.store import write_jsonl

        def records():
            for i in range(5000):
                yield {{"strategy": "rag", "qid": str(i), "answer": "x" * 200}}
            os._exit(9)

        write_jsonl({str(path)!r}, records())
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=None)
    assert proc.returncode == 9, proc.stderr
    assert path.read_bytes() == old
    assert [r["answer"] for r in read_records(path)] == ["Lyon", "Paris"]


def test_the_committed_runs_are_compact() -> None:
    for d in sorted((ROOT / "docs" / "results").glob("*/run.json")):
        run = d.parent
        assert not (run / RESULTS).exists(), run
        assert (run / RESULTS_GZ).stat().st_size < 5_000_000, run
        keys = [(r["strategy"], r["qid"]) for r in read_records(run)]
        assert len(keys) == len(set(keys))


def test_compact_command(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from sleuth.cli import app

    out = tmp_path / "run"
    _plain(out, LINES)
    res = CliRunner().invoke(app, ["eval", "compact", str(out)])
    assert res.exit_code == 0, res.output
    said = " ".join(res.output.split())
    assert said.startswith("3 records in ") and "2 older ones of the same tasks dropped" in said
    res = CliRunner().invoke(app, ["eval", "compact", str(tmp_path / "empty")])
    assert res.exit_code != 0 and "holds no results" in str(res.exception)  # a UserError: one sentence


def test_the_reported_command_reruns_on_the_runs_own_folder() -> None:
    from sleuth.eval.store import resume_command

    first = (
        "sleuth eval --data ../shared/data/musique/train.json --setting open --strategies rag,self-ask "
        "--out /work/runs/mh42 --retry-failed --only rag --time-limit 4812s"
    )
    assert resume_command(first) == (
        "sleuth eval --data ../shared/data/musique/train.json --setting open --strategies rag,self-ask "
        "--out DIR --retry-failed --only rag"
    )
    assert resume_command("sleuth eval --out=/tmp/x --time-limit=2h --seed 0") == "sleuth eval --out=DIR --seed 0"
    assert (
        resume_command("sleuth eval --data 'my questions.jsonl' --out r")
        == "sleuth eval --data 'my questions.jsonl' --out DIR"
    )
    assert resume_command("sleuth eval --data 'unclosed") == "sleuth eval --data 'unclosed"  # shown as recorded
