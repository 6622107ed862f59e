"""``sleuth eval verify DIR --replay``: a record's own replies served to the running code, no model.

The run is real: Sleuth's RAG over a real lexical index, its model a real OpenAI-compatible
HTTP server on 127.0.0.1 (tests/fake_openai_server.py) whose replies reach ``max_tokens`` inside
the answer line, so RAG makes its short-answer extraction call. A record as older code would
have written it (no extraction call, the cut span as the short answer) is made by editing the
stored record: the replay must find it without a model, and say where it parted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fake_openai_server import FakeOpenAIServer
from sleuth.eval.replay import Replay, ReplayExhausted, passages_of
from sleuth.eval.runner import EvalConfig, run_eval
from sleuth.eval.store import read_records, rewrite_records
from sleuth.eval.verify import DIFFERS, SAME, verify_run
from sleuth.search.base import Passage

LONG = "It is documented [1].\nSo the answer is: Avram Noam Chomsky"  # 11 words: cut at 10, inside the span


def _reply(body: dict[str, Any]) -> str:
    last = body["messages"][-1]["content"] if "messages" in body else body["prompt"]
    return "Avram Noam Chomsky" if "Long answer" in last else LONG


@pytest.fixture()
def server():
    with FakeOpenAIServer(script=_reply) as srv:
        yield srv


@pytest.fixture()
def run_dir(tmp_path: Path, data_dir: Path, server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SLEUTH_EVAL_CACHE", str(tmp_path / "cache"))
    lines = (data_dir / "hotpotqa/test.jsonl").read_text(encoding="utf-8").splitlines()[:3]
    data = tmp_path / "hotpot3.jsonl"
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "run"
    cfg = EvalConfig(
        data=str(data),
        out=str(out),
        format="hotpotqa",
        setting="open",
        search_mode="lexical",
        strategies=["rag"],
        max_tokens=10,
        base_url=server.base_url,
        model="fake",
        llm_cache=False,
    )
    run_eval(cfg, progress=False)
    return out


def _edit(out: Path, qid: str, change) -> None:
    def one(rec: dict[str, Any]) -> dict[str, Any]:
        return change(rec) if rec["qid"] == qid else rec

    rewrite_records(out, one)


def test_a_replay_of_the_running_codes_records_is_the_same_and_asks_no_model(
    run_dir: Path, server: FakeOpenAIServer
) -> None:
    recs = read_records(run_dir)
    assert len(recs) == 3
    notes = [e["data"].get("type") for e in recs[0]["result"]["trace"] if e["kind"] == "note"]
    assert "short_answer_cut" in notes and recs[0]["short_answer"] == "Avram Noam Chomsky"
    asked = len(server.requests)
    before = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}
    ver = verify_run(run_dir, sample=None, replay=True)
    assert ver.ok and len(ver.checks) == 3 and {c.verdict for c in ver.checks} == {SAME}
    assert all(c.steps == 3 for c in ver.checks)  # a search, the cut answer, the extraction call
    assert len(server.requests) == asked  # no model was asked
    assert {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()} == before


def test_a_record_of_older_code_is_found_where_the_code_now_asks_more(run_dir: Path) -> None:
    qid = read_records(run_dir)[0]["qid"]

    def older(rec: dict[str, Any]) -> dict[str, Any]:  # as RAG wrote it before the cut rule
        trace = rec["result"]["trace"]
        rec["result"]["trace"] = [
            e
            for e in trace
            if not (e["kind"] == "llm" and e["data"]["step"] == "short answer")
            and e["data"].get("type") != "short_answer_cut"
        ]
        rec["result"]["short_answer"] = rec["short_answer"] = "Avram Noam"
        rec["result"]["llm_calls"] = 1
        return rec

    _edit(run_dir, qid, older)
    ver = verify_run(run_dir, sample=None, replay=True)
    bad = [c for c in ver.checks if c.verdict == DIFFERS]
    assert not ver.ok and [c.qid for c in bad] == [qid]
    assert "parted at LLM call 2: the running code makes more model calls than the record's 1" in bad[0].difference
    assert ver.score_changes()["rag"].endswith("; 1 cannot be scored without the model")


def test_a_changed_parse_with_the_same_calls_shows_in_the_answers(run_dir: Path) -> None:
    qid = read_records(run_dir)[1]["qid"]

    def other(rec: dict[str, Any]) -> dict[str, Any]:  # older code read the gold answer out of the reply
        rec["result"]["short_answer"] = rec["answers"][0]
        rec["scores"]["score"] = 1.0
        return rec

    _edit(run_dir, qid, other)
    ver = verify_run(run_dir, sample=None, replay=True)
    (bad,) = [c for c in ver.checks if c.verdict == DIFFERS]
    gold = read_records(run_dir)[1]["answers"][0]
    assert bad.qid == qid and bad.difference == f"short_answer: then {gold!r}, now 'Avram Noam Chomsky'"
    assert (bad.score_then, bad.score_now) == (1.0, 0.0)  # what the change costs this record
    assert ver.score_changes() == {
        "rag": "1 of 3 records differ; mean score -0.3333 over the 3 (0 up, 1 down, 0 level)"
    }


def test_a_changed_prompt_parts_the_replay(run_dir: Path) -> None:
    qid = read_records(run_dir)[2]["qid"]

    def longer(rec: dict[str, Any]) -> dict[str, Any]:
        first = next(e for e in rec["result"]["trace"] if e["kind"] == "llm")
        first["data"]["prompt_chars"] += 7  # the prompt the model saw then was another
        return rec

    _edit(run_dir, qid, longer)
    (bad,) = [c for c in verify_run(run_dir, sample=None, replay=True).checks if c.verdict == DIFFERS]
    assert bad.qid == qid and "parted at LLM call 1 (answer): the prompt is" in bad.difference


def test_another_query_parts_the_replay(run_dir: Path) -> None:
    qid = read_records(run_dir)[0]["qid"]

    def searched_else(rec: dict[str, Any]) -> dict[str, Any]:  # older code searched another query
        first = next(e for e in rec["result"]["trace"] if e["kind"] == "search")
        first["data"]["query"] = "older query"
        return rec

    _edit(run_dir, qid, searched_else)
    (bad,) = [c for c in verify_run(run_dir, sample=None, replay=True).checks if c.verdict == DIFFERS]
    assert bad.qid == qid and "parted at search 1: the query is" in bad.difference
    assert "'older query' then" in bad.difference and bad.score_now is None  # no score for a parted replay


def test_a_replay_serves_the_record_in_order_and_says_where_it_parted() -> None:
    brief = {"id": "p#0", "score": 0.5, "text": "cut"}
    rec = {
        "result": {
            "model": "m",
            "trace": [
                {"kind": "search", "data": {"query": "q1", "passages": [brief]}},
                {
                    "kind": "llm",
                    "data": {
                        "step": "a",
                        "completion": "one",
                        "finish_reason": "length",
                        "usage": {"prompt_tokens": 5},
                        "prompt_chars": 2,
                    },
                },
                {"kind": "llm", "data": {"step": "b", "completion": "two", "prompt_chars": 3}},
            ],
        }
    }
    whole = Passage(id="p#0", text="the whole passage", doc_id="p", acl=["all"], found_by=["x"])
    replay = Replay(rec)
    retriever = replay.serve({"p#0": whole})
    (p,) = retriever.search("q1", 5)
    assert (p.text, p.acl, p.score, p.found_by) == ("the whole passage", ["all"], 0.5, [])  # the index's passage
    first = replay.llm.chat([{"role": "user", "content": "hi"}])
    assert (first.text, first.finish_reason, first.usage.prompt_tokens) == ("one", "length", 5)
    assert replay.llm.complete("hey").text == "two" and replay.parted == ""
    with pytest.raises(ReplayExhausted):
        replay.llm.complete("more")
    assert replay.parting({"reason": ReplayExhausted.reason}).startswith("LLM call 3: the running code makes more")
    # the first step the record does not answer is the one named
    other = Replay(rec)
    other.serve({"p#0": whole}).search("another query", 5)
    other.llm.chat([{"role": "user", "content": "a longer prompt"}])
    assert other.parting({}) == "search 1: the query is 'another query' now, 'q1' then"
    assert Replay(rec).serve(None) is None  # a closed-book run has no retriever
    with pytest.raises(TypeError, match="passage store"):
        passages_of(object())


def test_replay_on_the_command_line(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from sleuth.cli import main

    def run(*extra: str) -> int:
        try:
            main(["eval", "verify", str(run_dir), "--replay", "--all", *extra])
        except SystemExit as e:
            return int(e.code or 0)
        return 0

    assert run() == 0
    out = capsys.readouterr()
    assert "3 of 3 replayed records are the same as stored" in out.out and "differs" not in out.err
    qid = read_records(run_dir)[0]["qid"]
    _edit(run_dir, qid, lambda r: {**r, "result": {**r["result"], "short_answer": "x"}})
    assert run("--json") == 1
    doc = json.loads(capsys.readouterr().out)
    assert [c["qid"] for c in doc["checks"] if c["verdict"] == DIFFERS] == [qid]


def test_every_committed_record_the_running_code_would_make_replays_the_same(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fingerprint says which committed records the running code would make; its probe cannot see
    a change that only a real reply shows (a reply cut inside its answer line). The replay can: a
    change that answers a committed record differently fails here until that record is made again
    (``sleuth eval ... --only S --redo ID``; docs/eval.md)."""
    monkeypatch.setenv("SLEUTH_EVAL_CACHE", str(tmp_path / "cache"))
    root = Path(__file__).resolve().parents[1] / "docs" / "results"
    replayed = {}
    for run in sorted(p.parent for p in root.glob("*/run.json")):
        path = Path(json.loads((run / "run.json").read_text())["data"]["path"])
        # shared data beside the checkout, or the project's own benchmark data (benchmarks/data/…)
        data = data_dir.parent / path.relative_to("../shared") if path.parts[0] == ".." else root.parents[1] / path
        ver = verify_run(run, sample=None, replay=True, data=data)
        differing = [f"{c.strategy} {c.qid}: {c.difference}" for c in ver.checks if c.verdict != SAME]
        assert not differing, (run.name, differing)
        replayed[run.name] = len(ver.checks)
    # issue 53 made 15 policy_zh records (RAG 6, CoT 4, RAT 2, Step-back 3) and 33 rgb_zh RAG records older: their
    # answers carry "所以答案是：…", which Chinese answers now lose, or are yes/no questions Step-back's verdict now
    # decides; the reports say so ("Older records") until `--redo-stale` makes them again
    assert replayed["policy_zh"] == 41 and replayed["rgb_zh"] == 167 and replayed["hotpotqa-hybrid"] >= 525
    assert replayed["timeqa-open"] == 100
