"""End to end: the real strategies on the real embedded model (SmolLM2-135M) and real indexes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sleuth.eval.metrics import retrieved_passages
from sleuth.eval.runner import EvalConfig, run_eval
from sleuth.eval.store import read_records
from sleuth.eval.verify import verify_run

MODEL = "smollm2-135m"
pytestmark = pytest.mark.model


@pytest.fixture()
def eval_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SLEUTH_EVAL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    return tmp_path / "cache"


def test_direct_and_rag_on_hotpotqa_distractor(tmp_path: Path, data_dir: Path, eval_cache: Path) -> None:
    out = tmp_path / "h"
    s = run_eval(
        EvalConfig(
            data=str(data_dir / "hotpotqa/test.jsonl"),
            out=str(out),
            setting="distractor",
            strategies=["direct", "rag"],
            limit=2,
            seed=0,
            model=MODEL,
            max_tokens=48,
            concurrency=2,
            llm_cache=False,
        ),
        progress=False,
    )
    assert (s.ran, s.failed) == (4, 0)
    recs = {(r["strategy"], r["qid"]): r for r in read_records(out)}
    for (strat, _), r in recs.items():
        res = r["result"]
        assert res["model"] == MODEL and res["llm_calls"] >= 1 and res["usage"]["completion_tokens"] > 0
        assert r["scores"]["prompt_tokens"] == res["usage"]["prompt_tokens"] > 0
        assert r["scores"]["cached_llm_calls"] == 0  # --no-llm-cache: real model time
        assert next(e["kind"] for e in res["trace"]) == "start"
        if strat == "rag":
            assert res["searches"] >= 1 and r["scores"]["recall_title"] is not None
            # grounded citations: retrieved passages the answer rests on, or none, said in the trace
            found = {p["id"] for e in res["trace"] if e["kind"] == "search" for p in e["data"]["passages"]}
            assert {c["id"] for c in res["citations"]} <= found
            notes = {e["data"].get("type") for e in res["trace"] if e["kind"] == "note"}
            assert res["citations"] or "no_citations" in notes
        else:
            assert res["searches"] == 0
    report = (out / "report.md").read_text()
    assert "| direct |" in report and "| rag |" in report and MODEL in report


@pytest.mark.slow
def test_policy_scope_is_honoured_through_the_runner(tmp_path: Path, data_dir: Path, eval_cache: Path) -> None:
    """q5 (acl=all) and q6 (acl=all,finance) ask the same thing; only q6 may ever see the audit file."""
    src = data_dir / "policy_zh/questions.jsonl"
    lines = [ln for ln in src.read_text(encoding="utf-8").splitlines() if json.loads(ln)["id"] in ("q5", "q6")]
    data = tmp_path / "q56.jsonl"
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "p"
    run_eval(
        EvalConfig(
            data=str(data),
            out=str(out),
            format="policy_zh",
            corpus=str(data_dir / "policy_zh/corpus.jsonl"),
            strategies=["rag"],
            model=MODEL,
            max_tokens=48,
            llm_cache=False,
        ),
        progress=False,
    )
    by = {r["qid"]: r for r in read_records(out)}
    q5 = {p.get("doc_id") for p in retrieved_passages(by["q5"]["result"])}
    q6 = {p.get("doc_id") for p in retrieved_passages(by["q6"]["result"])}
    assert q5 and "fin-audit-2025" not in q5 and "hr-reward-2025" not in q5
    assert "fin-audit-2025" in q6
    assert by["q6"]["scores"]["recall_id"] == 1.0
    assert by["q5"]["scores"]["primary"] == "mention"
    manifest = json.loads((out / "run.json").read_text())
    assert manifest["settings"]["index"]["source"] == "corpus file corpus.jsonl"


def _first_call_cached(rec: dict) -> int:
    """Prompt tokens the task's first LLM call took from the server's KV cache."""
    first = next(e for e in rec["result"]["trace"] if e["kind"] == "llm")
    return int(first["data"]["usage"].get("cached_prompt_tokens") or 0)


def test_isolated_tasks_start_from_an_empty_kv_cache_and_resume_reproduces(
    tmp_path: Path, data_dir: Path, eval_cache: Path
) -> None:
    """One task at a time: the embedded server's KV cache is wiped before each task, so no
    task reuses another's prompt prefix and an interrupted, resumed run gives the same
    answers as an uninterrupted one."""

    def cfg(out: Path, **kw) -> EvalConfig:
        base = dict(
            data=str(data_dir / "hotpotqa/test.jsonl"),
            out=str(out),
            setting="distractor",
            strategies=["direct", "cot", "rag"],
            limit=1,
            seed=3,
            model=MODEL,
            max_tokens=32,
            llm_cache=False,
        )
        return EvalConfig(**(base | kw))

    whole = tmp_path / "whole"
    run_eval(cfg(whole), progress=False)
    assert json.loads((whole / "run.json").read_text())["isolated_tasks"] is True
    a = {(r["strategy"], r["qid"]): r for r in read_records(whole)}
    assert len(a) == 3 and all(_first_call_cached(r) == 0 for r in a.values())

    parts = tmp_path / "parts"
    n = 0

    def stop_after_two(rec: dict) -> None:
        nonlocal n
        n += 1
        if n == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_eval(cfg(parts), progress=False, on_record=stop_after_two)
    run_eval(cfg(parts), progress=False)
    b = {(r["strategy"], r["qid"]): r for r in read_records(parts)}
    assert b.keys() == a.keys()
    for key in a:
        assert b[key]["answer"] == a[key]["answer"], key
        assert b[key]["result"]["usage"]["completion_tokens"] == a[key]["result"]["usage"]["completion_tokens"]

    # the control: without isolation, later tasks start on the previous task's cache
    shared = tmp_path / "shared"
    run_eval(cfg(shared, isolate=False), progress=False)
    assert json.loads((shared / "run.json").read_text())["isolated_tasks"] is False
    assert any(_first_call_cached(r) > 0 for r in read_records(shared))

    # `sleuth eval verify` runs the isolated records again: every completion, search and answer the same
    ver = verify_run(whole, sample=None)
    assert len(ver.checks) == 3 and all(c.steps >= 1 for c in ver.checks)
    assert ver.ok, [c.difference for c in ver.checks if c.difference]
    assert verify_run(shared, sample=1).warnings  # a run without isolation is flagged
