"""``sleuth eval verify``: re-run a run directory's records and compare them step by step.

The strategies are real :class:`Strategy` subclasses that search a real index (no LLM, so
the mechanics run fast); one of them reads an environment variable, which lets a test
make the code produce something else than it did, the way a changed library or CPU would.
The real model's records are verified in ``test_eval_e2e.py``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sleuth.eval.runner import EvalConfig, EvalError, run_eval
from sleuth.eval.store import RESULTS
from sleuth.eval.verify import DIFFERS, SAME, first_difference, verify_run
from sleuth.strategies.base import RunState, Strategy

MOD = Path(__file__).stem


class Searcher(Strategy):
    """Searches the question, then a follow-up query that a test can change; answers with a title."""

    name = "searcher"
    needs_retriever = True

    def solve(self, question: str, st: RunState) -> None:
        hits = self.retrieve(st, question)
        twist = os.environ.get("SLEUTH_TEST_TWIST", "")
        more = self.retrieve(st, f"{hits[0].title if hits else question} {twist}".strip())
        st.cite((hits + more)[:2])
        st.result.short_answer = hits[0].title if hits else "unknown"
        st.result.answer = f"It is {st.result.short_answer}."


class Crasher(Strategy):
    """Fails on every question (a recorded failure must reproduce as one)."""

    name = "crasher"

    def solve(self, question: str, st: RunState) -> None:
        raise RuntimeError("boom")


@pytest.fixture()
def small_hotpot(tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SLEUTH_EVAL_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("SLEUTH_TEST_TWIST", raising=False)
    lines = (data_dir / "hotpotqa/test.jsonl").read_text(encoding="utf-8").splitlines()[:4]
    path = tmp_path / "hotpot4.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _run(data: Path, out: Path, strategies: list[str] | None = None) -> None:
    run_eval(
        EvalConfig(
            data=str(data),
            out=str(out),
            format="hotpotqa",
            setting="open",
            strategies=strategies or [f"{MOD}:Searcher", f"{MOD}:Crasher"],
            limit=3,
            seed=0,
        ),
        progress=False,
    )


def _snapshot(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.is_file()}


def test_records_of_the_running_code_reproduce(small_hotpot: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    _run(small_hotpot, out)
    before = _snapshot(out)
    ver = verify_run(out, sample=None)
    assert ver.ok and ver.candidates == 6 and ver.not_comparable == {}
    assert len(ver.checks) == 6 and {c.verdict for c in ver.checks} == {SAME}
    searched = [c for c in ver.checks if c.strategy.endswith("Searcher")]
    assert all(c.steps == 2 and c.answer_now == c.answer_then != "" for c in searched)
    assert _snapshot(out) == before  # nothing in the run directory is written


def test_a_change_in_what_the_code_does_is_found_and_located(
    small_hotpot: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "run"
    _run(small_hotpot, out)
    monkeypatch.setenv("SLEUTH_TEST_TWIST", "born")
    ver = verify_run(out, sample=None, strategies=[f"{MOD}:Searcher"])
    assert not ver.ok and len(ver.checks) == 3
    for c in ver.checks:
        assert c.verdict == DIFFERS
        assert c.difference.startswith("search at step 2:") and "born" in c.difference, c.difference


def test_a_sample_is_drawn_by_seed_and_filters_apply(small_hotpot: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    _run(small_hotpot, out)
    first = [(c.strategy, c.qid) for c in verify_run(out, sample=2, seed=3).checks]
    again = [(c.strategy, c.qid) for c in verify_run(out, sample=2, seed=3).checks]
    assert len(first) == 2 and first == again
    qid = first[0][1]
    only = verify_run(out, sample=None, qids=[qid], strategies=[f"{MOD}:Crasher"])
    assert [(c.strategy, c.qid, c.verdict) for c in only.checks] == [(f"{MOD}:Crasher", qid, SAME)]


def test_records_of_other_commits_or_questions_are_said_so(small_hotpot: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    _run(small_hotpot, out)
    assert verify_run(out, sample=None).warnings == []
    recs = [json.loads(ln) for ln in (out / RESULTS).read_text(encoding="utf-8").splitlines()]
    recs[0]["commit"] = "000000000000"  # as if an older commit had made it: compared, and said so
    recs.append({**recs[1], "qid": "not-in-the-sample"})
    (out / RESULTS).write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    ver = verify_run(out, sample=None)
    assert ver.candidates == 6 and len(ver.checks) == 6 and ver.ok
    assert ver.not_comparable == {"not in the run's sample": 1}
    assert ver.warnings == [
        f"of the chosen records 1 by 000000000000, not by the running code ({ver.commit}): a difference may be the code's"
    ]
    assert {c.commit for c in ver.checks} == {"000000000000", ver.commit}
    recs[2]["scores"]["cached_llm_calls"] = 2  # its replies came from the response cache
    (out / RESULTS).write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    assert (
        "1 of the chosen records took replies from Sleuth's response cache" in verify_run(out, sample=None).warnings[1]
    )


def test_a_run_that_cannot_be_rebuilt_is_refused(small_hotpot: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    _run(small_hotpot, out)
    with pytest.raises(EvalError, match="not among the run's strategies"):
        verify_run(out, strategies=["rat"])
    with pytest.raises(EvalError, match=r"no run\.json"):
        verify_run(tmp_path)
    with pytest.raises(EvalError, match="at least 1"):
        verify_run(out, sample=0)
    moved = tmp_path / "elsewhere.jsonl"
    small_hotpot.rename(moved)
    with pytest.raises(EvalError, match="missing; pass --data"):
        verify_run(out)
    assert verify_run(out, data=moved, sample=1).ok  # the file found where the user says
    moved.write_text(moved.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    with pytest.raises(EvalError, match="sha256 differs"):
        verify_run(out, data=moved)


def test_first_difference_reads_llm_steps_and_answers() -> None:
    def res(*completions: str, answer: str = "x") -> dict:
        trace = [{"kind": "start", "data": {}}]
        trace += [{"kind": "llm", "data": {"step": f"s{i}", "completion": c}} for i, c in enumerate(completions)]
        return {"trace": trace, "answer": answer, "short_answer": answer, "finish_reason": "finished"}

    assert first_difference(res("a", "b"), res("a", "b")) == ("", 2)
    diff, n = first_difference(res("a", "b"), res("a", "c"))
    assert n == 2 and diff == "LLM call at step 2 (s1): then 'b', now 'c'"
    assert first_difference(res("a"), res("a", "b"))[0] == "then 1 steps, now 2"
    assert first_difference(res("a", answer="x"), res("a", answer="y"))[0] == "answer: then 'x', now 'y'"


def test_cli_exit_codes(small_hotpot: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from sleuth.cli import main

    def cli(*argv: str) -> tuple[int, str, str]:
        try:
            main(["eval", "verify", *argv])
            code = 0
        except SystemExit as e:
            code = int(e.code or 0)
        o = capsys.readouterr()
        return code, " ".join(o.out.split()), " ".join(o.err.split())  # rich wraps long lines

    out = tmp_path / "run"
    _run(small_hotpot, out)
    code, stdout, _ = cli(str(out), "--all")
    assert code == 0 and "6 of 6 re-run records are the same as stored" in stdout
    code, stdout, err = cli(str(out), "--json", "-n", "2")
    assert code == 0 and json.loads(stdout)["ok"] is True  # stdout holds only the JSON document
    assert "(1/2) running" in err and "(2/2) running" in err and err.count("same") == 2  # progress on stderr
    monkeypatch.setenv("SLEUTH_TEST_TWIST", "born")
    code, stdout, err = cli(str(out), "--all", "--strategies", f"{MOD}:Searcher")
    assert code == 1 and "0 of 3" in stdout and "first difference: search at step 2" in err
    code, _, err = cli(str(tmp_path / "nowhere"))
    assert code == 2 and "holds no results.jsonl" in err and "Traceback" not in err
    code, _, err = cli(str(out), "--qid", "no-such-question")
    assert code == 2 and "no record" in err and "Traceback" not in err
