"""Sleuth's peers rows keep their records and are answered again from them with no model (benchmarks/peers/replay.py)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from fake_openai_server import FakeOpenAIServer
from test_peers_harness import _tiny_hotpotqa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: benchmarks/

from benchmarks.peers.replay import read_records, records_path
from benchmarks.peers.report import read_lines
from benchmarks.peers.rows import append_record

REPO = Path(__file__).resolve().parents[1]


def _driver(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "SLEUTH_CACHE_DIR": str(tmp_path / "cache"),
        "SLEUTH_EVAL_CACHE": str(tmp_path / "idx"),
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    cmd = [sys.executable, "-m", "benchmarks.peers.run", "--model", "fake-model", "--rows", "sleuth-rag"]
    cmd += ["--datasets", "hotpotqa", "--n", "2", "--data-dir", str(tmp_path / "data")]
    cmd += ["--work-dir", str(tmp_path / "w"), "--out", str(tmp_path / "peers.md"), *extra]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)


def _reply(body: dict[str, Any]) -> str:
    text = json.dumps(body.get("messages") or body.get("prompt"))
    # the question, not the passages (the open setting's search finds both people's)
    who, year = ("Ada Lovelace", "1815") if "was Ada Lovelace born" in text else ("Alan Turing", "1912")
    return f"{who} was born in {year} [1].\nSo the answer is: {year}"


def test_a_replay_answers_sleuths_rows_again_from_their_records_with_no_model(tmp_path: Path) -> None:
    _tiny_hotpotqa(tmp_path / "data")
    with FakeOpenAIServer(script=_reply) as srv:
        ran = _driver(tmp_path, "--base-url", srv.url)
        assert ran.returncode == 0, ran.stderr[-2000:]
    work = tmp_path / "w"
    answers = work / "answers" / "sleuth-rag.hotpotqa.jsonl"
    lines = read_lines(answers)
    assert [ln["short_answer"] for ln in lines] == ["1815", "1912"]
    records = read_records(records_path(work, "sleuth-rag", "hotpotqa"))
    assert sorted(records) == ["q0", "q1"]
    assert records["q0"]["result"]["short_answer"] == "1815"  # the whole record: the trace behind the line
    assert any(ev["kind"] == "llm" for ev in records["q0"]["result"]["trace"])

    # q0's line as older code wrote it; q1's record no longer matches what the code asks (another prompt)
    lines[0] = {**lines[0], "short_answer": "stale", "reason": "old"}
    answers.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    measured = {k: lines[0][k] for k in ("seconds", "llm_calls", "processed_prompt_tokens")}
    rec = records["q1"]
    next(ev for ev in rec["result"]["trace"] if ev["kind"] == "llm")["data"]["prompt_chars"] += 1
    path = records_path(work, "sleuth-rag", "hotpotqa")
    path.unlink()
    for r in (records["q0"], rec):
        append_record(path, r)

    replayed = _driver(tmp_path, "--replay")  # no --base-url and no server: nothing may reach a model
    assert replayed.returncode == 0, replayed.stderr[-2000:]
    out = replayed.stdout
    assert "sleuth-rag on hotpotqa: 2 answers, 0 the same, 1 changed, 1 need the model" in out
    assert "changed q0: 'stale' -> '1815'" in out
    assert "needs the model q1: LLM call 1" in out and "characters now" in out
    after = read_lines(answers)
    assert after[0]["short_answer"] == "1815" and after[0]["reason"] == "finished"
    assert {k: after[0][k] for k in measured} == measured  # the sitting's measurements stay
    assert after[1] == lines[1]  # the record cannot tell: the line stays as it was
    assert (tmp_path / "peers.md").exists()

    again = _driver(tmp_path, "--replay")
    assert "2 answers, 1 the same, 0 changed, 1 need the model" in again.stdout
    assert read_lines(answers) == after


def test_records_cut_short_by_a_kill_keep_what_was_whole(tmp_path: Path) -> None:
    path = tmp_path / "records" / "r.jsonl.gz"

    def rec(qid: str, answer: str) -> dict[str, Any]:  # the eval worker's record shape
        return {"strategy": "rag", "qid": qid, "result": {"answer": answer}}

    append_record(path, rec("a", "1"))
    append_record(path, rec("b", "2"))
    append_record(path, rec("a", "3"))  # a run again: the last one counts
    whole = path.read_bytes()
    append_record(path, rec("c", "4"))
    path.write_bytes(path.read_bytes()[: len(whole) + 12])  # killed in the middle of the last write
    records = read_records(path)
    assert {q: r["result"]["answer"] for q, r in records.items()} == {"a": "3", "b": "2"}
    assert gzip.decompress(whole).count(b"\n") == 3
    assert read_records(tmp_path / "missing.jsonl.gz") == {}
