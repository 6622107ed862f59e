"""End to end: the real strategies on the real embedded model (SmolLM2-135M) and real indexes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sleuth.eval.metrics import retrieved_passages
from sleuth.eval.runner import EvalConfig, run_eval
from sleuth.eval.store import read_records

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
            assert res["searches"] >= 1 and res["citations"]
            assert r["scores"]["recall_title"] is not None
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
