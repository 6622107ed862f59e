"""``--only``: a sitting that runs some of a run's strategies, the run keeping all of them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sleuth.eval.runner import EvalConfig, EvalError, run_eval
from sleuth.eval.store import RESULTS, read_records

FIRST, YES = "test_eval_runner:FirstWord", "test_eval_runner:YesMan"


def _cfg(data_dir: Path, out: Path, **kw) -> EvalConfig:
    base = dict(
        data=str(data_dir / "hotpotqa/test.jsonl"),
        out=str(out),
        setting="closed",
        strategies=[FIRST, YES, "direct"],
        limit=3,
        seed=1,
    )
    return EvalConfig(**(base | kw))


def test_only_runs_some_strategies_and_the_same_command_without_it_runs_the_rest(
    tmp_path: Path, data_dir: Path
) -> None:
    out = tmp_path / "o"
    first = run_eval(_cfg(data_dir, out, strategies=[FIRST, YES], only=[YES]), progress=False)
    assert (first.total, first.ran, first.skipped) == (3, 3, 0)
    assert {r["strategy"] for r in read_records(out)} == {YES}
    manifest = json.loads((out / "run.json").read_text())
    # the run is still the two-strategy run: its settings, its strategies' options and its task count
    assert manifest["settings"]["strategies"] == [FIRST, YES]
    assert set(manifest["code"]["options"]) == {FIRST, YES} and manifest["tasks"] == 6
    assert "3 of 6 tasks" in (out / "report.md").read_text() or "of 6" in (out / "report.md").read_text()

    again = run_eval(_cfg(data_dir, out, strategies=[FIRST, YES], only=[YES]), progress=False)
    assert (again.ran, again.skipped) == (0, 3)  # nothing left of YesMan
    rest = run_eval(_cfg(data_dir, out, strategies=[FIRST, YES]), progress=False)
    assert (rest.total, rest.ran, rest.skipped) == (6, 3, 3)
    recs = read_records(out)
    assert len(recs) == 6 and len((out / RESULTS).read_text().splitlines()) == 6  # nothing ran twice


def test_only_names_strategies_of_the_run(tmp_path: Path, data_dir: Path) -> None:
    out = tmp_path / "bad"
    with pytest.raises(EvalError, match="not one of --strategies"):
        run_eval(_cfg(data_dir, out, only=["rag"]), progress=False)
    with pytest.raises(EvalError, match="unknown strategy"):
        run_eval(_cfg(data_dir, out, only=["no-such"]), progress=False)
    with pytest.raises(EvalError, match="names no strategy"):
        run_eval(_cfg(data_dir, out, only=[]), progress=False)
    assert not out.exists()  # a refused command touches nothing
    # an alias names the strategy it stands for
    cfg = _cfg(data_dir, out, strategies=["self-ask"], only=["selfask"])
    from sleuth.eval.config import validate

    validate(cfg)
    assert cfg.only == ["self-ask"]


def test_only_on_the_command_line(tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from sleuth.cli import main

    argv = ["eval", "--data", str(data_dir / "hotpotqa/test.jsonl"), "--setting", "closed", "--limit", "2"]
    argv += ["--strategies", f"{FIRST},{YES}", "--out", str(tmp_path / "c"), "--no-progress"]
    for extra, code_ok in ((["--only", "rag"], False), (["--only", YES], True)):
        try:
            main([*argv, *extra])
            code = 0
        except SystemExit as e:
            code = int(e.code or 0)
        err = capsys.readouterr().err
        assert (code == 0) == code_ok, err
        assert "Traceback" not in err
    assert {(r["strategy"]) for r in read_records(tmp_path / "c")} == {YES}


def test_the_report_shows_the_strategies_ahead_on_the_questions_they_all_finished(
    tmp_path: Path, data_dir: Path
) -> None:
    flaky = "test_eval_runner:Flaky"
    out = tmp_path / "ahead"
    cfg = dict(strategies=[FIRST, YES, flaky], limit=8)
    run_eval(_cfg(data_dir, out, only=[FIRST, YES], **cfg), progress=False)
    report = (out / "report.md").read_text()
    assert "0 of 8 questions answered by all 3 strategies" in report
    assert "## Ahead of the rest: 2 strategies on 8 questions" in report
    assert f"{flaky} has finished 0" in report
    ahead = report.split("## Ahead of the rest")[1].split("\n## ")[0].split("Their citations")[0]
    scores, rest = ahead.split("Their cost per question:")
    cost, diffs = rest.split(f"Their paired differences against {FIRST}:")
    rows = [ln for ln in scores.splitlines() if ln.startswith(f"| {FIRST} |") or ln.startswith(f"| {YES} |")]
    assert len(rows) == 2 and all(ln.split("|")[2] == " 8 " for ln in rows)
    assert sum(ln.startswith(("| " + FIRST + " |", "| " + YES + " |")) for ln in cost.splitlines()) == 2
    # the baseline (the first of the group: no rag here) has no difference with itself; the other one has
    pairs = [ln for ln in diffs.splitlines() if ln.startswith("| ") and "---" not in ln][1:]
    assert len(pairs) == 1 and pairs[0].startswith(f"| {YES} | 8 | ") and " [" in pairs[0].split("|")[3]

    # one question of Flaky: still far behind, the section stays (8 questions, 1 common)
    run_eval(_cfg(data_dir, out, time_limit=1e-6, **cfg), progress=False)
    report = (out / "report.md").read_text()
    assert "1 of 8 questions answered by all 3" in report and f"{flaky} has finished 1" in report
    # everything finished: no group is ahead
    run_eval(_cfg(data_dir, out, **cfg), progress=False)
    assert "Ahead of the rest" not in (out / "report.md").read_text()


def test_the_strategies_ahead_show_their_citations_where_the_data_has_gold_passages(
    tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The common set's tables say nothing of the citations of the strategies far ahead (issue 28 asks
    for citation precision and recall of RAG, Self-Ask and Search-o1 on HotpotQA): the section has them."""
    monkeypatch.setenv("SLEUTH_EVAL_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "cites"
    cfg = dict(strategies=[FIRST, YES, "test_eval_runner:Flaky"], limit=6, setting="open", search_mode="lexical")
    run_eval(_cfg(data_dir, out, only=[FIRST, YES], **cfg), progress=False)
    ahead = (out / "report.md").read_text().split("## Ahead of the rest")[1].split("\n## ")[0]
    assert "Their citations on those 6 questions" in ahead
    table = ahead.split("Their citations on those 6 questions")[1]
    first = next(ln for ln in table.splitlines() if ln.startswith(f"| {FIRST} |"))
    yes = next(ln for ln in table.splitlines() if ln.startswith(f"| {YES} |"))
    assert first.split("|")[2:4] == [" 6 ", " 6 "]  # six questions, every answer cites its first two passages
    assert yes.split("|")[2:5] == [" 6 ", " 0 ", " – "]  # YesMan cites nothing: no precision, recall 0
    assert float(first.split("|")[4]) > 0  # some cited passage is a gold supporting one


def test_one_run_holds_a_strategy_and_its_variants(tmp_path: Path, data_dir: Path) -> None:
    """``--strategies "X,X[k=2]"`` (a comma inside brackets separates nothing): two rows of one run, paired by
    question in its report, each with its own options in run.json; one spec spelled two ways is one strategy."""
    from sleuth.cli import main

    out = tmp_path / "v"
    argv = ["eval", "--data", str(data_dir / "hotpotqa/test.jsonl"), "--setting", "closed", "--limit", "2"]
    with pytest.raises(SystemExit) as done:
        main([*argv, "--strategies", f"{FIRST},{YES},{FIRST}[k=2, delay=0]", "--out", str(out), "--no-progress"])
    assert not done.value.code
    variant = f"{FIRST}[k=2,delay=0]"
    assert {r["strategy"] for r in read_records(out)} == {FIRST, YES, variant} and len(read_records(out)) == 6
    manifest = json.loads((out / "run.json").read_text())
    assert manifest["settings"]["strategies"] == [FIRST, YES, variant]
    assert manifest["code"]["options"][variant]["k"] == 2 and manifest["code"]["options"][FIRST]["k"] == 5
    report = (out / "report.md").read_text()
    assert f"| {variant} |" in report
    paired = report[report.index("Each variant against its own strategy") :].split("\n## ")[0]
    assert f"| {variant} | 2 |" in paired and "better than its strategy" in paired
    assert f"| {YES} |" not in paired  # a variant against its own strategy only
    with pytest.raises(EvalError, match="listed twice"):
        run_eval(_cfg(data_dir, tmp_path / "twice", strategies=[f"{FIRST}[k=2]", f"{FIRST}[ k = 2 ]"]), progress=False)
