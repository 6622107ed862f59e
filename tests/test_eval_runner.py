"""The eval runner: results streaming, failures, resume after a real ``kill -9``,
manifest guard, executor seam, report regeneration.

The strategies below are real :class:`Strategy` subclasses (they go through
``Strategy.run`` and its trace/finish-reason machinery); they answer without an
LLM so that the runner's mechanics are tested quickly.  The end-to-end test with
the real strategies and model lives in ``test_eval_e2e.py``.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from sleuth.eval import executors
from sleuth.eval.runner import EvalConfig, EvalError, run_eval
from sleuth.eval.store import RESULTS, ManifestMismatch, ResultsWriter, read_records
from sleuth.strategies.base import RunState, Strategy, StrategyAbort
from sleuth.strategies.options import StrategyOptions, option

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
MOD = Path(__file__).stem


def _digest(text: str) -> int:
    return int(hashlib.sha1(text.encode()).hexdigest(), 16)


@dataclass(frozen=True)
class DelayOptions(StrategyOptions):
    """A plugin strategy declares its own options like the built-in ones."""

    delay: float = option(0.0, "seconds to sleep before answering", minimum=0.0)


class FirstWord(Strategy):
    """Answers with the question's first word (wrong, but deterministic); optional delay; searches when it can."""

    name = "first-word"
    Options = DelayOptions
    opts: DelayOptions

    def solve(self, question: str, st: RunState) -> None:
        time.sleep(self.opts.delay)
        passages = self.retrieve(st, question) if self.retriever is not None else []
        st.cite(passages[:2])
        st.result.short_answer = passages[0].title if passages else question.split()[0]
        st.result.answer = f"I think: {st.result.short_answer}"
        st.emit("note", text="first-word done")


class YesMan(FirstWord):
    """Always answers "yes" (right on the yes-questions of HotpotQA)."""

    name = "yes-man"

    def solve(self, question: str, st: RunState) -> None:
        time.sleep(self.opts.delay)
        st.result.answer = st.result.short_answer = "yes"


class Flaky(Strategy):
    """Raises for some questions, aborts for others, answers the rest."""

    name = "flaky"

    def solve(self, question: str, st: RunState) -> None:
        h = _digest(question) % 3
        if h == 0:
            raise RuntimeError("boom: parser crashed")
        if h == 1:
            raise StrategyAbort("step_limit_hard", "gave up")
        st.result.answer = st.result.short_answer = "yes"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(ROOT / "src"), env.get("PYTHONPATH", "")])
    env["OMP_WAIT_POLICY"] = "PASSIVE"
    return env


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run the real `sleuth` CLI in this process; returns (exit code, stdout, stderr)."""
    from sleuth.cli import main

    try:
        main(argv)
        code = 0
    except SystemExit as e:
        code = int(e.code or 0)
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True) if path.exists() else []


def _cfg(data_dir: Path, out: Path, **kw) -> EvalConfig:
    base = dict(
        data=str(data_dir / "hotpotqa/test.jsonl"),
        out=str(out),
        setting="closed",
        strategies=[f"{MOD}:FirstWord", f"{MOD}:YesMan"],
        limit=6,
        seed=1,
    )
    base.update(kw)
    return EvalConfig(**base)


def _gap_cfg(data_dir: Path, out: Path, **kw) -> EvalConfig:
    """The first 3 MuSiQue questions (seed 0), closed book, with every hop (``--gap``)."""
    return _cfg(
        data_dir, out, **({"data": str(data_dir / "musique/train.json"), "limit": 3, "seed": 0, "gap": True} | kw)
    )


def test_run_writes_one_line_per_pair_and_report(tmp_path: Path, data_dir: Path) -> None:
    seen: list[dict] = []
    s = run_eval(_cfg(data_dir, tmp_path / "r", concurrency=3), progress=False, on_record=seen.append)
    assert (s.total, s.ran, s.skipped, s.failed) == (12, 12, 0, 0)
    recs = read_records(tmp_path / "r")
    assert len(recs) == 12 and len({(r["strategy"], r["qid"]) for r in recs}) == 12
    assert {r["kind"] for r in recs} <= {"bridge", "comparison"} and all(r["kind"] for r in recs)
    r0 = recs[0]
    assert r0["status"] == "ok" and r0["reason"] == "finished"
    assert r0["result"]["trace"][0]["kind"] == "start" and r0["result"]["trace"][-1]["kind"] == "answer"
    assert set(r0["scores"]) >= {
        "em",
        "f1",
        "cover_em",
        "score",
        "primary",
        "seconds",
        "prompt_tokens",
        "cached_llm_calls",
    }
    # every line is a complete JSON object
    for line in _lines(tmp_path / "r" / RESULTS):
        assert line.endswith(b"\n") and json.loads(line)
    manifest = json.loads((tmp_path / "r" / "run.json").read_text())
    assert manifest["settings"]["seed"] == 1 and manifest["settings"]["setting"] == "closed"
    assert len(manifest["data"]["question_ids"]) == 6
    report = (tmp_path / "r" / "report.md").read_text()
    assert f"{MOD}:YesMan" in report and "95%" in report
    for png in ("scores.png", "cost.png", "accuracy_vs_tokens.png"):
        assert (tmp_path / "r" / png).read_bytes()[:4] == b"\x89PNG"
    # rerunning finds everything done
    s2 = run_eval(_cfg(data_dir, tmp_path / "r"), progress=False)
    assert (s2.ran, s2.skipped) == (0, 12)


def test_failures_are_recorded_and_never_stop_the_run(tmp_path: Path, data_dir: Path) -> None:
    s = run_eval(_cfg(data_dir, tmp_path / "f", strategies=[f"{MOD}:Flaky"], limit=12), progress=False)
    recs = read_records(tmp_path / "f")
    assert s.ran == 12 and len(recs) == 12
    crashed = [r for r in recs if r["reason"] == "error"]
    aborted = [r for r in recs if r["reason"] == "step_limit_hard"]
    assert crashed and aborted and s.failed == len(crashed) + len(aborted)
    assert all("boom: parser crashed" in r["error"] and r["status"] == "failed" for r in crashed)
    assert all(r["result"]["finish_reason"] == "step_limit_hard" for r in aborted)
    assert "## Failures" in (tmp_path / "f" / "report.md").read_text()


def test_bad_question_is_a_recorded_failure(tmp_path: Path) -> None:
    data = tmp_path / "q.jsonl"
    data.write_text(
        json.dumps({"id": "empty", "question": "   ", "answers": ["x"]})
        + "\n"
        + json.dumps({"id": "ok", "question": "Is it?", "answers": ["yes"]})
        + "\n",
        encoding="utf-8",
    )
    run_eval(EvalConfig(data=str(data), out=str(tmp_path / "o"), strategies=[f"{MOD}:YesMan"]), progress=False)
    by = {r["qid"]: r for r in read_records(tmp_path / "o")}
    assert by["empty"]["reason"] == "bad_input" and by["empty"]["status"] == "failed"
    assert by["ok"]["scores"]["em"] == 1.0


def test_interrupted_run_resumes_without_duplicates(tmp_path: Path, data_dir: Path) -> None:
    out = tmp_path / "i"
    n = 0

    def stop_after_five(rec: dict) -> None:
        nonlocal n
        n += 1
        if n == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_eval(_cfg(data_dir, out, concurrency=2), progress=False, on_record=stop_after_five)
    first = _lines(out / RESULTS)
    assert len(first) == 5
    s = run_eval(_cfg(data_dir, out, concurrency=2), progress=False)
    assert (s.skipped, s.ran) == (5, 7)
    final = _lines(out / RESULTS)
    assert final[:5] == first and len(final) == 12


def test_manifest_guard(tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "m"
    run_eval(_cfg(data_dir, out, limit=2), progress=False)
    with pytest.raises(ManifestMismatch, match=r"seed: 1 then, 2 now"):
        run_eval(_cfg(data_dir, out, limit=2, seed=2), progress=False)
    with pytest.raises(ManifestMismatch, match="strategies"):
        run_eval(_cfg(data_dir, out, limit=2, strategies=[f"{MOD}:YesMan"]), progress=False)
    # concurrency and executor are not part of the comparison
    assert run_eval(_cfg(data_dir, out, limit=2, concurrency=4), progress=False).skipped == 4
    # the CLI says it in one sentence with exit code 2
    code, _, err = _cli(
        [
            "eval",
            "--data",
            str(data_dir / "hotpotqa/test.jsonl"),
            "--setting",
            "closed",
            "--strategies",
            f"{MOD}:FirstWord,{MOD}:YesMan",
            "--limit",
            "2",
            "--seed",
            "9",
            "--out",
            str(out),
            "--no-progress",
        ],
        capsys,
    )
    assert code == 2 and "different settings" in err and "Traceback" not in err


def test_user_mistakes(tmp_path: Path, data_dir: Path) -> None:
    with pytest.raises(EvalError, match="unknown strategy"):
        run_eval(_cfg(data_dir, tmp_path / "u", strategies=["nope"]), progress=False)
    with pytest.raises(EvalError, match="not a Strategy subclass"):
        run_eval(_cfg(data_dir, tmp_path / "u", strategies=[f"{MOD}:_digest"]), progress=False)
    with pytest.raises(EvalError, match="cannot import strategy"):
        run_eval(_cfg(data_dir, tmp_path / "u", strategies=["no_such_module:X"]), progress=False)
    with pytest.raises(EvalError, match="listed twice"):
        run_eval(_cfg(data_dir, tmp_path / "u", strategies=[f"{MOD}:YesMan", f"{MOD}:YesMan"]), progress=False)
    with pytest.raises(EvalError, match="--gap needs"):
        run_eval(_cfg(data_dir, tmp_path / "u", gap=True), progress=False)
    with pytest.raises(ValueError, match="no per-question paragraphs"):
        run_eval(
            EvalConfig(
                data=str(data_dir / "policy_zh/questions.jsonl"),
                out=str(tmp_path / "u"),
                setting="distractor",
                strategies=[f"{MOD}:YesMan"],
            ),
            progress=False,
        )
    with pytest.raises(ValueError, match="unknown executor"):
        run_eval(_cfg(data_dir, tmp_path / "u2", executor="warp://x"), progress=False)


def test_torn_tail_is_repaired_before_appending(tmp_path: Path) -> None:
    p = tmp_path / RESULTS
    p.write_bytes(b'{"strategy": "a", "qid": "1", "x": 1}\n{"strategy": "a", "qid": "2", "x"')
    assert [r["qid"] for r in read_records(p)] == ["1"]
    with ResultsWriter(p) as w:
        w.write({"strategy": "a", "qid": "2", "x": 2})
    assert p.read_bytes() == b'{"strategy": "a", "qid": "1", "x": 1}\n{"strategy": "a", "qid": "2", "x": 2}\n'


def test_a_results_file_replaced_or_deleted_under_the_writer_loses_nothing(tmp_path: Path) -> None:
    """`git stash`/`git checkout` of a committed run dir swaps the file under a running writer."""
    p = tmp_path / RESULTS
    rec = [{"strategy": "a", "qid": str(i)} for i in range(6)]
    line = [(json.dumps(r) + "\n").encode() for r in rec]
    notices: list[str] = []
    with ResultsWriter(p, on_notice=notices.append) as w:
        w.write(rec[0])
        w.write(rec[1])
        older = tmp_path / "older"
        older.write_bytes(line[0])  # the committed version: one record
        os.replace(older, p)  # what git does: a new file renamed over the old one
        w.write(rec[2])
        assert p.read_bytes() == line[0] + line[1] + line[2]
        p.unlink()
        w.write(rec[3])
        assert p.read_bytes() == b"".join(line[:4])
        w.write(rec[4])
        older.write_bytes(b"".join(line[:3]) + b'{"strategy": "a", "qi')  # replaced, with a torn tail
        os.replace(older, p)
    assert p.read_bytes() == b"".join(line[:5])  # carried over at close, the torn tail cut
    assert len(notices) == 3
    assert "was replaced" in notices[0] and "1 of its records" in notices[0]
    assert "was deleted" in notices[1] and "3 of its records" in notices[1]
    assert "2 of its records" in notices[2]


def test_a_running_eval_survives_its_results_file_being_replaced(tmp_path: Path, data_dir: Path) -> None:
    """A real `sleuth eval` process; mid-run its results.jsonl is swapped for an older copy."""
    out = tmp_path / "swap"
    cmd = [
        sys.executable, "-m", "sleuth", "eval", "--data", str(data_dir / "hotpotqa/test.jsonl"),
        "--format", "hotpotqa", "--setting", "closed", "--strategies", f"{MOD}:FirstWord,{MOD}:YesMan",
        "--limit", "10", "--seed", "5", "--opt", "delay=0.1", "--out", str(out), "--no-progress",
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 90
    while len(_lines(out / RESULTS)) < 4:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline, "the run produced no results in time"
        time.sleep(0.02)
    older = out / "older.jsonl"
    older.write_bytes(b"".join(_lines(out / RESULTS)[:2]))
    os.replace(older, out / RESULTS)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    keys = [(r["strategy"], r["qid"]) for r in map(json.loads, _lines(out / RESULTS))]
    assert len(keys) == 20 and len(set(keys)) == 20  # every pair once: none lost, none doubled
    assert "was replaced while this run was writing" in " ".join(err.split())


def test_gap_tasks_and_table(tmp_path: Path, data_dir: Path) -> None:
    out = tmp_path / "g"
    run_eval(_gap_cfg(data_dir, out, strategies=[f"{MOD}:FirstWord"]), progress=False)
    recs = read_records(out)
    mains = [r for r in recs if r["task"]["kind"] == "main"]
    subs = [r for r in recs if r["task"]["kind"] == "sub"]
    from sleuth.eval.datasets import load_dataset

    sample = load_dataset(data_dir / "musique/train.json").sample(3, 0).items
    assert len(mains) == 3 and len(subs) == sum(len(it.decomposition) for it in sample)
    assert all("#1" not in r["question"] for r in subs)  # earlier answers substituted
    assert all(">>" not in r["question"] and r["task"]["source_question"] for r in subs)  # triples asked as questions
    assert {r["task"]["parent"] for r in subs} == {r["qid"] for r in mains}
    assert all(r["kind"].endswith("-hop") for r in mains)
    report = (out / "report.md").read_text()
    assert "## Compositionality gap" in report
    manifest = json.loads((out / "run.json").read_text())
    assert manifest["hops"] == {it.id: len(it.decomposition) for it in sample}
    assert manifest["tasks"] == len(recs)
    assert f"| progress | complete: 3 questions × 1 strategy ({len(recs)} of {len(recs)} tasks) |" in report


def _proc_executor(spec: str, concurrency: int) -> executors.Executor:
    class Procs:
        def __init__(self) -> None:
            self.pool = ProcessPoolExecutor(2)

        def map_unordered(self, fn, tasks):
            futs = [self.pool.submit(fn, t) for t in tasks]
            for f in futs:
                yield f.result()

        def close(self) -> None:
            self.pool.shutdown()

    return Procs()


def test_executor_seam_runs_tasks_in_other_processes(tmp_path: Path, data_dir: Path) -> None:
    """Tasks are plain picklable payloads: a process-pool executor plugs in and gives the same results."""
    executors.register_executor("procs", _proc_executor)
    run_eval(_cfg(data_dir, tmp_path / "a"), progress=False)
    run_eval(_cfg(data_dir, tmp_path / "b", executor="procs://"), progress=False)

    def strip(r: dict) -> tuple:
        return (r["strategy"], r["qid"], r["answer"], r["scores"]["score"], r["status"])

    assert sorted(map(strip, read_records(tmp_path / "a"))) == sorted(map(strip, read_records(tmp_path / "b")))


def test_report_regenerates_identically(tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rep"
    run_eval(_cfg(data_dir, out, strategies=[f"{MOD}:FirstWord", f"{MOD}:YesMan", f"{MOD}:Flaky"]), progress=False)
    names = ["report.md", "scores.png", "cost.png", "accuracy_vs_tokens.png"]
    before = {n: (out / n).read_bytes() for n in names}
    for n in names:
        (out / n).unlink()
    code, _, err = _cli(["eval", "report", str(out)], capsys)
    assert code == 0, err
    assert {n: (out / n).read_bytes() for n in names} == before


def test_resume_after_real_kill_9(tmp_path: Path, data_dir: Path) -> None:
    """Start `python -m sleuth eval` for real, SIGKILL it mid-run, restart: every pair once, nothing changed."""
    out = tmp_path / "k"
    cmd = [
        sys.executable,
        "-m",
        "sleuth",
        "eval",
        "--data",
        str(data_dir / "hotpotqa/test.jsonl"),
        "--format",
        "hotpotqa",
        "--setting",
        "closed",
        "--strategies",
        f"{MOD}:FirstWord,{MOD}:YesMan",
        "--limit",
        "15",
        "--seed",
        "4",
        "-c",
        "2",
        "--opt",
        "delay=0.15",
        "--out",
        str(out),
        "--no-progress",
    ]
    proc = subprocess.Popen(cmd, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 90
    try:
        while len(_lines(out / RESULTS)) < 6:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() < deadline, "the run produced no results in time"
            time.sleep(0.02)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    killed = _lines(out / RESULTS)
    complete = [ln for ln in killed if ln.endswith(b"\n")]
    assert 6 <= len(complete) < 30, "the kill should land mid-run"
    # a kill during a write can leave half a line: simulate that worst case too
    with open(out / RESULTS, "ab") as f:
        f.write(b'{"v": 1, "strategy": "test_eval_runner:YesMan", "qid": "torn')
    p = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    final = _lines(out / RESULTS)
    assert final[: len(complete)] == complete  # completed lines unchanged
    recs = [json.loads(ln) for ln in final]  # every line whole (torn tail cut off)
    keys = [(r["strategy"], r["qid"]) for r in recs]
    assert len(keys) == 30 and len(set(keys)) == 30  # 15 questions x 2 strategies, each exactly once
    manifest = json.loads((out / "run.json").read_text())
    assert len(manifest["sittings"]) >= 2  # the first sitting and the resume


def test_open_setting_pools_the_whole_file_into_one_cached_index(
    tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLEUTH_EVAL_CACHE", str(tmp_path / "cache"))
    data = data_dir / "hotpotqa/train.jsonl"
    run_eval(
        EvalConfig(
            data=str(data),
            out=str(tmp_path / "o1"),
            setting="open",
            strategies=[f"{MOD}:FirstWord"],
            limit=4,
            seed=0,
            # BM25 only: embedding the 3k pooled paragraphs would take minutes on a cold embedding cache;
            # the default (hybrid) mode is tested on a small pool in test_eval_search_mode.py
            search_mode="lexical",
        ),
        progress=False,
    )
    m1 = json.loads((tmp_path / "o1" / "run.json").read_text())
    from sleuth.eval.corpus import pooled_paragraphs
    from sleuth.eval.datasets import load_dataset

    n_pooled = len(pooled_paragraphs(load_dataset(data)))
    assert m1["index"]["setting"] == "open" and m1["index"]["passages"] >= n_pooled > 4 * 10
    ready = Path(m1["index"]["spec"]).parent / "READY"
    stamp = ready.stat().st_mtime_ns
    recs = read_records(tmp_path / "o1")
    assert all(r["result"]["searches"] == 1 and r["scores"]["recall_title"] is not None for r in recs)
    # gold labels never leak into the index
    assert all("is_supporting" not in json.dumps(p) for r in recs for p in r["result"]["citations"])
    # a second run (other sample, other out dir) reuses the same index: built once, cached
    run_eval(
        EvalConfig(
            data=str(data),
            out=str(tmp_path / "o2"),
            setting="open",
            strategies=[f"{MOD}:FirstWord"],
            limit=2,
            seed=5,
            search_mode="lexical",
        ),
        progress=False,
    )
    m2 = json.loads((tmp_path / "o2" / "run.json").read_text())
    assert m2["index"]["spec"] == m1["index"]["spec"] and ready.stat().st_mtime_ns == stamp


def test_distractor_setting_searches_only_the_questions_own_paragraphs(
    tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLEUTH_EVAL_CACHE", str(tmp_path / "cache"))
    from sleuth.eval.datasets import load_dataset

    data = data_dir / "musique/train.json"
    items = {it.id: it for it in load_dataset(data).items}
    run_eval(
        EvalConfig(
            data=str(data),
            out=str(tmp_path / "d"),
            setting="distractor",
            strategies=[f"{MOD}:FirstWord"],
            limit=3,
            seed=2,
            k=20,
        ),
        progress=False,
    )
    for r in read_records(tmp_path / "d"):
        own = {p.id for p in items[r["qid"]].paragraphs}
        seen = [p["doc_id"] for ev in r["result"]["trace"] if ev["kind"] == "search" for p in ev["data"]["passages"]]
        assert seen and set(seen) <= own
        assert r["scores"]["recall_id"] is not None


def test_a_second_runner_on_the_same_directory_is_refused(tmp_path: Path, data_dir: Path) -> None:
    from sleuth.eval.store import RunDirBusy, run_lock

    out = tmp_path / "busy"
    out.mkdir()
    with run_lock(out), pytest.raises(RunDirBusy, match="another sleuth eval is running"):
        run_eval(_cfg(data_dir, out, limit=1), progress=False)
    assert run_eval(_cfg(data_dir, out, limit=1), progress=False).ran == 2  # free again afterwards


def test_rescore_recomputes_scores_in_place(tmp_path: Path, data_dir: Path) -> None:
    from sleuth.eval.runner import rescore_run

    out = tmp_path / "rs"
    run_eval(_cfg(data_dir, out), progress=False)
    before = read_records(out)
    lines = _lines(out / RESULTS)
    tampered = [json.loads(ln) for ln in lines]
    for r in tampered:
        r["scores"] = {"score": 0.123}
    (out / RESULTS).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in tampered), encoding="utf-8")
    assert rescore_run(out) == len(lines)
    after = read_records(out)
    assert [r["scores"] for r in after] == [r["scores"] for r in before]
    assert [(r["strategy"], r["qid"], r["answer"]) for r in after] == [
        (r["strategy"], r["qid"], r["answer"]) for r in before
    ]


def test_local_executor_starts_the_next_task_before_yielding() -> None:
    """While the driver scores and writes a result, the next task already runs (no idle slot)."""
    import threading

    started = [threading.Event() for _ in range(3)]

    def task(payload: dict) -> dict:
        started[payload["i"]].set()
        return payload

    ex = executors.make_executor("local", 1)
    try:
        stream = ex.map_unordered(task, ({"i": i} for i in range(3)))
        first = next(stream)
        # the generator is suspended at its yield: only a refill done before it can have started task 1
        assert started[first["i"] + 1].wait(5), "the next task was not submitted before the result was yielded"
        assert [r["i"] for r in stream] == [1, 2]
    finally:
        ex.close()


def test_the_manifest_says_what_made_the_run_and_each_record_names_its_commit(tmp_path: Path, data_dir: Path) -> None:
    from sleuth.eval.manifest import commit_label, git_state, prompts_hash
    from sleuth.llm.models import file_sha256

    out = tmp_path / "c"
    run_eval(_cfg(data_dir, out, limit=3, strategy_options={"delay": 0.0}), progress=False)
    manifest = json.loads((out / "run.json").read_text())
    commit, dirty = git_state()
    code = manifest["code"]
    assert (code["commit"], code["dirty"], code["version"]) == (commit, dirty, "0.1.0")
    assert len(commit) == 40  # the tests run from a git checkout
    assert code["model"]["name"] and "sha256" in code["model"]  # the embedded default: its file's sha256
    names = [f"{MOD}:FirstWord", f"{MOD}:YesMan"]
    assert code["prompts"] == {s: prompts_hash(s) for s in names}
    assert prompts_hash("self-ask") != prompts_hash("rag") != ""  # each strategy's own templates
    # the full typed options of each strategy, defaults included
    assert code["options"][names[0]]["delay"] == 0.0 and code["options"][names[0]]["k"] == 5
    assert "max_steps" in code["options"][names[1]]
    data = manifest["data"]
    assert data["sha256"] == file_sha256(data_dir / "hotpotqa/test.jsonl") and len(data["question_ids"]) == 3
    assert manifest["settings"]["index"]["key"] is not None or manifest["settings"]["setting"] == "closed"
    label = commit_label(commit, dirty)
    assert manifest["sittings"] == [{"started": manifest["sittings"][0]["started"], "commit": label}]
    recs = read_records(out)
    assert len(recs) == 6 and {r["commit"] for r in recs} == {label}
    assert f"| code | records from 1 commit: `{label}`: {names[0]} 3, {names[1]} 3 |" in (out / "report.md").read_text()

    # records of other commits (and one from before records named theirs) are reported, never judged
    lines = (out / RESULTS).read_text(encoding="utf-8").splitlines()
    old, legacy = json.loads(lines[1]), json.loads(lines[3])
    old["commit"] = "0123456789ab"
    del legacy["commit"]
    legacy["code"] = "fedcba987654"
    lines[1], lines[3] = json.dumps(old), json.dumps(legacy)
    (out / RESULTS).write_text("\n".join(lines) + "\n", encoding="utf-8")
    s = run_eval(_cfg(data_dir, out, limit=3, strategy_options={"delay": 0.0}), progress=False)
    assert s.ran == 0  # a resume runs nothing again: which commit made a record is the report's to say
    report = (out / "report.md").read_text()
    assert f"| code | records from 2 commits: `{label}`: " in report
    assert "; `0123456789ab`: " in report and "; and 1 made before records named their commit: " in report
    assert len(json.loads((out / "run.json").read_text())["sittings"]) == 2


def test_a_rerun_makes_every_record_again_and_one_stopped_early_goes_on(tmp_path: Path, data_dir: Path) -> None:
    from sleuth.eval.runner import rerun_eval

    out = tmp_path / "r"
    run_eval(_cfg(data_dir, out, limit=3), progress=False)
    before = {(r["strategy"], r["qid"]): r["finished_at"] for r in read_records(out)}
    first = rerun_eval(out, progress=False, time_limit=1e-6)  # a sitting: the first question only
    assert (first.ran, first.skipped) == (2, 0) and first.stopped_before is not None
    started = json.loads((out / "run.json").read_text())["rerun"]["started"]
    assert sum(r["finished_at"] >= started for r in read_records(out)) == 2
    second = run_eval(_cfg(data_dir, out, limit=3), progress=False)  # the run's own command goes on with it
    assert (second.ran, second.skipped) == (4, 2)
    recs = read_records(out)
    assert len(recs) == 6 and all(r["finished_at"] > before[(r["strategy"], r["qid"])] for r in recs)
    assert "rerun" not in json.loads((out / "run.json").read_text())  # over: a plain resume runs nothing
    assert run_eval(_cfg(data_dir, out, limit=3), progress=False).ran == 0
    assert run_eval(_cfg(data_dir, out, limit=3, rerun=True), progress=False).ran == 6  # --rerun: the same
    with pytest.raises(EvalError, match=r"no run\.json"):
        rerun_eval(tmp_path / "nothing", progress=False)


def test_time_limit_ends_a_sitting_between_questions_and_the_same_command_resumes(
    tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--time-limit: once the time is up no new question starts; the started one is finished."""
    out = tmp_path / "t"
    first = run_eval(_cfg(data_dir, out, time_limit=1e-6), progress=False)
    recs = read_records(out)
    qids = json.loads((out / "run.json").read_text())["data"]["question_ids"]
    # the first question ran with both strategies (a sitting always makes progress), nothing else
    assert {(r["strategy"], r["qid"]) for r in recs} == {(s, qids[0]) for s in (f"{MOD}:FirstWord", f"{MOD}:YesMan")}
    assert (first.ran, first.stopped_before) == (2, qids[1])
    assert "1 of 6 questions" in (out / "report.md").read_text()  # the report is written for the sitting
    second = run_eval(_cfg(data_dir, out), progress=False)
    assert (second.ran, second.skipped, second.stopped_before) == (10, 2, None)
    assert len(read_records(out)) == 12 and len({(r["strategy"], r["qid"]) for r in read_records(out)}) == 12

    # the CLI takes a duration with its unit and says how to continue
    argv = ["eval", "--data", str(data_dir / "hotpotqa/test.jsonl"), "--setting", "closed"]
    argv += ["--strategies", f"{MOD}:YesMan", "--limit", "3", "--out", str(tmp_path / "c"), "--no-progress"]
    code, out_text, err = _cli([*argv, "--time-limit", "0.001s"], capsys)
    assert code == 0, err
    assert len(read_records(tmp_path / "c")) == 1
    assert "stopped at the time limit before question" in out_text and "2 of 3" in out_text
    code, out_text, err = _cli([*argv, "--time-limit", "90"], capsys)
    assert code != 0 and "give a duration with its unit" in err and "Traceback" not in err
    assert len(read_records(tmp_path / "c")) == 1  # a refused command touches nothing


def test_time_limit_keeps_a_composed_question_with_its_hops(tmp_path: Path, data_dir: Path) -> None:
    out = tmp_path / "g"
    s = run_eval(_gap_cfg(data_dir, out, time_limit=1e-6), progress=False)
    from sleuth.eval.datasets import load_dataset

    sample = load_dataset(data_dir / "musique/train.json").sample(3, 0).items
    recs = read_records(out)
    # the first composed question and every one of its hops, with both strategies
    assert len(recs) == 2 * (1 + len(sample[0].decomposition))
    assert {r["task"].get("parent", r["qid"]) for r in recs} == {sample[0].id}
    assert s.stopped_before == sample[1].id


def test_sitting_hands_out_tasks_until_the_deadline_then_stops_at_a_question_boundary() -> None:
    from sleuth.eval.datasets import Item
    from sleuth.eval.gap import SUB_SEP
    from sleuth.eval.runner import Sitting

    def task(qid: str) -> tuple[str, Item, dict]:
        return ("s", Item(id=qid, question="q?", answers=["a"]), {})

    hop = lambda qid, n: f"{qid}{SUB_SEP}{n}"  # noqa: E731
    todo = [task("a"), task("a"), task(hop("a", 1)), task(hop("a", 2)), task("b"), task(hop("b", 1)), task("c")]
    ids = lambda tasks: [t[1].id for t in tasks]  # noqa: E731
    assert ids(Sitting(None).tasks(todo)) == ids(todo)
    assert ids(Sitting(3600.0).tasks(todo)) == ids(todo)
    late = Sitting(1.0, started=time.monotonic() - 5)  # the time is already up: only the question started
    assert ids(late.tasks(todo)) == ["a", "a", hop("a", 1), hop("a", 2)] and late.stopped_before == "b"
    resumed = Sitting(1.0, started=time.monotonic() - 5)  # a resume that starts on a hop finishes that question
    assert ids(resumed.tasks(todo[3:])) == [hop("a", 2)] and resumed.stopped_before == "b"
