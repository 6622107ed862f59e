"""``sleuth eval relabel DIR``: stale records whose replay under the running code is the same get its
fingerprint; the others stay stale.

The run is the real one of tests/test_eval_replay.py (Sleuth's RAG over a real lexical index, a real
OpenAI-compatible HTTP server on 127.0.0.1). A record "of another code version" is made by editing the
stored fingerprint, as a changed default elsewhere in the strategy would leave it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sleuth.eval.relabel import BY_DIGEST, BY_LENGTH, prompts_compared, relabel_run
from sleuth.eval.runner import code_fingerprints, stale_reason
from sleuth.eval.store import read_records, rewrite_records
from test_eval_replay import run_dir, server  # noqa: F401  (the fixtures: a real run and its server)

OLD = "0123456789ab"


def _edit(out: Path, qids: set[str], change) -> None:
    rewrite_records(out, lambda rec: change(rec) if rec["qid"] in qids else rec)


def _older(rec: dict[str, Any]) -> dict[str, Any]:
    return {**rec, "code": OLD}


def _calls(rec: dict[str, Any]) -> list[dict[str, Any]]:
    return [e["data"] for e in rec["result"]["trace"] if e["kind"] == "llm"]


def _running() -> str:
    return code_fingerprints(["rag"], "en")["rag"]


def test_records_of_other_code_that_replay_the_same_take_the_running_codes_fingerprint(
    run_dir: Path,  # noqa: F811
    server,  # noqa: F811
) -> None:
    recs = read_records(run_dir)
    assert all(len(d["prompt_sha"]) == 16 for r in recs for d in _calls(r))  # every call's prompt has its digest
    qids = {r["qid"] for r in recs[:2]}
    _edit(run_dir, qids, _older)
    asked = len(server.requests)
    done = relabel_run(run_dir)
    assert len(server.requests) == asked  # no model was asked
    assert done.relabelled == {"rag": 2} and done.differ == {} and done.length_only == {}
    assert len(done.verification.checks) == 2  # the record the running code made is not replayed
    after = {r["qid"]: r for r in read_records(run_dir)}
    for qid in qids:
        rec = after[qid]
        assert rec["code"] == _running() and stale_reason(rec, {"rag": _running()}, {}) == ""
        assert rec["relabelled"]["from"] == OLD and rec["relabelled"]["prompts"] == BY_DIGEST
        assert rec["answer"] == next(r["answer"] for r in recs if r["qid"] == qid)  # nothing else changed
    assert "relabelled" not in after[recs[2]["qid"]]
    assert relabel_run(run_dir).verification.checks == []  # nothing stale is left


def test_a_record_whose_replay_differs_stays_stale(run_dir: Path) -> None:  # noqa: F811
    recs = read_records(run_dir)
    changed, same = recs[0]["qid"], recs[1]["qid"]
    _edit(run_dir, {changed}, lambda r: {**_older(r), "result": {**r["result"], "short_answer": "x"}})
    _edit(run_dir, {same}, _older)
    done = relabel_run(run_dir)
    assert done.relabelled == {"rag": 1} and done.differ == {"rag": 1}
    after = {r["qid"]: r for r in read_records(run_dir)}
    assert after[changed]["code"] == OLD and "relabelled" not in after[changed]  # --redo-stale runs it again
    assert after[same]["code"] == _running()


def test_a_prompt_of_the_same_length_and_other_text_parts_the_replay(run_dir: Path) -> None:  # noqa: F811
    qid = read_records(run_dir)[0]["qid"]

    def other_text(rec: dict[str, Any]) -> dict[str, Any]:
        _calls(rec)[0]["prompt_sha"] = "f" * 16  # the model was asked another prompt of the same length
        return _older(rec)

    _edit(run_dir, {qid}, other_text)
    done = relabel_run(run_dir)
    (check,) = done.verification.checks
    assert done.relabelled == {} and "the prompt has the same length but other text" in check.difference


def test_records_without_prompt_digests_are_relabelled_only_by_length_when_asked(run_dir: Path) -> None:  # noqa: F811
    qid = read_records(run_dir)[0]["qid"]

    def before_digests(rec: dict[str, Any]) -> dict[str, Any]:
        for d in _calls(rec):
            del d["prompt_sha"]
        return _older(rec)

    _edit(run_dir, {qid}, before_digests)
    assert prompts_compared(next(r for r in read_records(run_dir) if r["qid"] == qid)) == BY_LENGTH
    done = relabel_run(run_dir)
    assert done.relabelled == {} and done.length_only == {"rag": 1}
    assert next(r for r in read_records(run_dir) if r["qid"] == qid)["code"] == OLD
    done = relabel_run(run_dir, by_length=True)
    assert done.relabelled == {"rag": 1}
    rec = next(r for r in read_records(run_dir) if r["qid"] == qid)
    assert rec["code"] == _running() and rec["relabelled"]["prompts"] == BY_LENGTH


def test_relabel_on_the_command_line(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    from sleuth.cli import main

    def run(*args: str) -> int:
        try:
            main(["eval", "relabel", *args])
        except SystemExit as e:
            return int(e.code or 0)
        return 0

    assert run(str(run_dir)) == 0
    assert "nothing to relabel" in capsys.readouterr().out
    _edit(run_dir, {read_records(run_dir)[0]["qid"]}, _older)
    assert run(str(run_dir), "--from", "fedcba987654") == 0  # none of that fingerprint
    assert "no record of fingerprint fedcba987654 to replay" in capsys.readouterr().out
    assert run(str(run_dir), "--strategies", "rag", "--from", OLD) == 0
    assert "rag: 1 of 1 stale records relabelled (replay the same)" in capsys.readouterr().out
    assert run(str(run_dir), "--strategies", "self-ask") == 2  # a user mistake
    assert "self-ask not among the run's strategies" in capsys.readouterr().err
    assert run(str(run_dir.parent / "nowhere")) == 2
    assert "holds no results.jsonl" in capsys.readouterr().err


def test_the_report_says_which_records_were_relabelled(run_dir: Path) -> None:  # noqa: F811
    from sleuth.eval.report import write_report

    assert "**Relabelled:**" not in write_report(run_dir).read_text(encoding="utf-8")
    _edit(run_dir, {r["qid"] for r in read_records(run_dir)[:2]}, _older)
    relabel_run(run_dir)
    text = write_report(run_dir).read_text(encoding="utf-8")
    assert "**Relabelled:** rag 2 records were made by an earlier code version" in text


def test_relabel_is_refused_while_a_sitting_holds_the_run(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    from sleuth.cli import main
    from sleuth.eval.store import run_lock

    _edit(run_dir, {read_records(run_dir)[0]["qid"]}, _older)
    before = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}
    with run_lock(run_dir), pytest.raises(SystemExit) as e:
        main(["eval", "relabel", str(run_dir)])
    assert e.value.code == 2 and "another sleuth eval is running in" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()} == before  # nothing written
