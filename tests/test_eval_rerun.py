"""``sleuth eval rerun DIR``: every record made again with the running code, paid for by the response cache.

The model is the fake OpenAI-compatible server on 127.0.0.1 (scripted replies), behind Sleuth's
real client and response cache; the strategies are the real ones over a real lexical index.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from sleuth.eval.manifest import commit_label, git_state
from sleuth.eval.runner import EvalConfig, run_eval
from sleuth.eval.store import read_records

STRATEGIES = ["direct", "rag", "self-ask"]


@pytest.fixture()
def small_run(tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch, fake_server) -> Path:
    monkeypatch.setenv("SLEUTH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SLEUTH_EVAL_CACHE", str(tmp_path / "indexes"))
    lines = (data_dir / "hotpotqa/train.jsonl").read_text(encoding="utf-8").splitlines()[:4]
    data = tmp_path / "hotpot4.jsonl"
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "run"
    cfg = EvalConfig(
        data=str(data),
        out=str(out),
        format="hotpotqa",
        setting="open",
        search_mode="lexical",
        strategies=STRATEGIES,
        limit=3,
        model="scripted",
        base_url=fake_server.base_url,
        max_steps=3,
    )
    run_eval(cfg, progress=False)
    return out


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    from sleuth.cli import main

    try:
        main(argv)
        code = 0
    except SystemExit as e:
        code = int(e.code or 0)
    cap = capsys.readouterr()
    return code, " ".join((cap.out + cap.err).split())


def test_a_warm_rerun_answers_every_record_from_the_cache_and_leaves_the_report(
    small_run: Path, fake_server, capsys: pytest.CaptureFixture[str]
) -> None:
    out = small_run
    before = {(r["strategy"], r["qid"]): r for r in read_records(out)}
    assert len(before) == 9 and all(r["status"] == "ok" for r in before.values())
    calls = len(fake_server.requests)
    assert calls >= 9
    report = (out / "report.md").read_text(encoding="utf-8")

    t0 = time.perf_counter()
    code, said = _cli(["eval", "rerun", str(out), "--no-progress"], capsys)  # the server run.json names
    seconds = time.perf_counter() - t0
    assert code == 0, said
    assert "9 run, 0 already done, 0 failed" in said and "re-running 9 of 9 records" in said
    assert len(fake_server.requests) == calls  # not one prompt reached the model
    assert seconds < 30, seconds

    after = read_records(out)
    label = commit_label(*git_state())
    assert len(after) == 9 and all(r["cached"] and r["commit"] == label for r in after)
    for r in after:  # the same answer, steps and timings: only when and by which commit it was made moved
        old = before[(r["strategy"], r["qid"])]
        assert r["result"] == old["result"] and r["scores"] == old["scores"] and r["wall_s"] == old["wall_s"]
        assert r["finished_at"] > old["finished_at"]
    new = (out / "report.md").read_text(encoding="utf-8")
    changed = [(a, b) for a, b in zip(report.splitlines(), new.splitlines(), strict=True) if a != b]
    assert len(changed) == 1 and changed[0][1].startswith("| code | records from 1 commit: "), changed
    assert "9 re-made from the response cache, timings kept" in changed[0][1]
    manifest = json.loads((out / "run.json").read_text(encoding="utf-8"))
    assert "rerun" not in manifest and len(manifest["sittings"]) == 2


def test_a_rerun_without_the_cache_asks_the_model_again(
    small_run: Path, fake_server, capsys: pytest.CaptureFixture[str]
) -> None:
    calls = len(fake_server.requests)
    code, said = _cli(["eval", "rerun", str(small_run), "--no-llm-cache", "--no-progress"], capsys)
    assert code == 0, said
    # every prompt asked again (the first run took a few repeated prompts from the cache)
    assert len(fake_server.requests) - calls >= calls
    recs = read_records(small_run)
    assert len(recs) == 9 and not any(r.get("cached") for r in recs)
    code, said = _cli(["eval", "rerun", str(small_run.parent / "nowhere")], capsys)
    assert code != 0 and "no run.json" in said and "Traceback" not in said
