"""The peers harness's in-process parts (benchmarks/peers): no venvs, no network, no model."""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path

import httpx
import pytest

from fake_openai_server import FakeOpenAIServer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: benchmarks/

from benchmarks.peers.proxy import CountingProxy, usage_of
from benchmarks.peers.questions import load_benchmark
from benchmarks.peers.report import read_lines, render, scored_records
from benchmarks.peers.searchd import SearchEndpoint

from sleuth.eval.items import Item
from sleuth.search import Index


def test_question_selection_is_fixed_by_seed(data_dir: Path) -> None:
    a = load_benchmark("hotpotqa", 5, 7, data_dir)
    b = load_benchmark("hotpotqa", 5, 7, data_dir)
    c = load_benchmark("hotpotqa", 5, 8, data_dir)
    ids = [it.id for it in a.dataset.items]
    assert ids == [it.id for it in b.dataset.items] and len(ids) == 5
    assert ids != [it.id for it in c.dataset.items]
    # open setting over the whole file's pooled paragraphs, the same index key for every sample
    assert a.plan.setting == "open" and a.plan.key == c.plan.key and a.plan.passages > 100
    q = a.questions()[0]
    assert set(q) == {"qid", "question"}  # never the answers
    m = load_benchmark("musique", 3, 7, data_dir)
    assert len(m.dataset.items) == 3 and m.plan.setting == "open"
    with pytest.raises(ValueError, match="unknown dataset"):
        load_benchmark("nope", 3, 7, data_dir)


def test_search_endpoint_returns_sleuths_results(tmp_path: Path) -> None:
    corpus = tmp_path / "c.jsonl"
    docs = [
        {"id": "a", "title": "Paris", "text": "Paris is the capital of France."},
        {"id": "b", "title": "Berlin", "text": "Berlin is the capital of Germany."},
        {"id": "c", "title": "Rome", "text": "Rome is the capital of Italy."},
    ]
    corpus.write_text("".join(json.dumps(d) + "\n" for d in docs))
    idx = Index.build([corpus], tmp_path / "idx", format="generic", progress=False)
    want = idx.search("capital of Germany", k=2)
    with SearchEndpoint({"toy": idx}) as ep:
        got = httpx.get(f"{ep.url}/search/toy", params={"q": "capital of Germany", "k": 2}).json()["passages"]
        assert [p["id"] for p in got] == [p.id for p in want]
        assert got[0]["title"] == "Berlin" and "Germany" in got[0]["text"]
        assert httpx.get(f"{ep.url}/search/other", params={"q": "x"}).status_code == 404
        assert httpx.get(f"{ep.url}/search/toy", params={"q": " "}).status_code == 400
        assert httpx.get(f"{ep.url}/search/toy", params={"q": "x", "k": "two"}).status_code == 400
        assert ep.searches["toy"] == 1


def test_counting_proxy_counts_calls_and_tokens() -> None:
    with FakeOpenAIServer(llamacpp_timings=True) as srv, CountingProxy(srv.url) as proxy:
        base = proxy.url + "/v1"
        msgs = [{"role": "user", "content": "one two three"}]
        r1 = httpx.post(f"{base}/chat/completions", json={"model": "m", "messages": msgs})
        r2 = httpx.post(f"{base}/completions", json={"model": "m", "prompt": "one two three four"})
        r3 = httpx.post(f"{base}/completions", json={"model": "m", "prompt": "five", "stream": True})
        assert r1.status_code == r2.status_code == r3.status_code == 200
        assert "Echo" in r1.json()["choices"][0]["message"]["content"]
        assert "data:" in r3.text  # a stream is passed on whole
        httpx.get(f"{base}/models")  # not a completion: not counted
        with urllib.request.urlopen(f"{proxy.url}/_counters") as r:
            counted = json.loads(r.read())
        assert counted["llm_calls"] == 3 and counted["llm_errors"] == 0
        # this fake's streams carry no usage: the tokens are those of the two plain answers
        want = r1.json()["usage"]["prompt_tokens"] + r2.json()["usage"]["prompt_tokens"]
        assert counted["prompt_tokens"] == want
        processed = sum(r.json()["timings"]["prompt_n"] for r in (r1, r2))
        assert counted["processed_prompt_tokens"] == processed > 0
        assert counted["completion_tokens"] == sum(r.json()["usage"]["completion_tokens"] for r in (r1, r2)) > 0
        model_ms = sum(r.json()["timings"]["prompt_ms"] + r.json()["timings"]["predicted_ms"] for r in (r1, r2))
        assert counted["model_ms"] == pytest.approx(model_ms) and model_ms > 0
        srv.push_faults("500")
        assert httpx.post(f"{base}/completions", json={"model": "m", "prompt": "x"}).status_code == 500
        assert proxy.counters()["llm_errors"] == 1 and proxy.counters()["llm_calls"] == 4


def test_a_client_that_leaves_before_its_answer_costs_the_proxy_no_traceback(capfd: pytest.CaptureFixture[str]) -> None:
    """A stopped peer adapter leaves mid-request; the model's answer then has nowhere to go."""
    import socket
    import time

    slow = FakeOpenAIServer(script=lambda body: "word " * 40000, fault="slow", slow_s=1.0)
    with slow as srv, CountingProxy(srv.url) as proxy:
        body = json.dumps({"model": "m", "prompt": "x"}).encode()
        port = int(proxy.url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(
                b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
        for _ in range(100):  # the upstream answers after 1 s; the proxy writes to the closed socket
            if proxy.counters()["llm_calls"]:
                break
            time.sleep(0.05)
        time.sleep(0.5)
        assert proxy.counters()["llm_calls"] == 1
    err = capfd.readouterr().err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err[-1500:]


def testusage_of_a_streamed_llamacpp_answer() -> None:
    events = [
        {"choices": [{"delta": {"content": "Hi"}}]},
        {
            "choices": [],
            "usage": {"prompt_tokens": 40, "completion_tokens": 2},
            "timings": {"prompt_n": 7, "cache_n": 33},
        },
    ]
    body = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
    assert usage_of(body.encode(), "text/event-stream") == (40, 7)
    assert usage_of(b"not json", "application/json") == (0, 0)


def test_scoring_and_report_from_hand_made_lines(tmp_path: Path) -> None:
    items = {
        "q1": Item("q1", "Who?", ["Marie Curie"]),
        "q2": Item("q2", "Where?", ["Paris"]),
    }
    sleuth = [
        {"qid": "q1", "answer": "It was Marie Curie.", "short_answer": "Marie Curie", "llm_calls": 3, "seconds": 2.0},
        {"qid": "q2", "answer": "Paris", "llm_calls": 2, "processed_prompt_tokens": 100, "seconds": 1.0},
    ]
    peer = [
        {"qid": "q1", "answer": "Curie", "llm_calls": 5, "seconds": 4.0},
        {"qid": "q2", "answer": "", "failure": "parse_error", "error": "no answer", "llm_calls": 1},
    ]
    path = tmp_path / "peer.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in peer) + '{"qid": "q3", "answ')  # a line cut by a kill
    lines = read_lines(path)
    assert [x["qid"] for x in lines] == ["q1", "q2"]
    recs = scored_records("sleuth-self-ask", "hotpotqa", sleuth, items) + scored_records(
        "peer-self-ask", "hotpotqa", lines, items
    )
    by = {(r["strategy"], r["qid"]): r for r in recs}
    assert by[("sleuth-self-ask", "hotpotqa:q1")]["scores"]["em"] == 1.0  # the short answer is scored
    assert by[("peer-self-ask", "hotpotqa:q1")]["scores"]["em"] == 0.0
    assert by[("peer-self-ask", "hotpotqa:q1")]["scores"]["f1"] == pytest.approx(2 / 3)
    assert by[("peer-self-ask", "hotpotqa:q2")]["reason"] == "parse_error"
    text = render(
        recs,
        [
            {"name": "sleuth-self-ask", "pipeline": "self-ask"},
            {"name": "peer-self-ask", "pipeline": "SelfAsk"},
            {"name": "peer-broken", "pipeline": "x"},
        ],
        header="# Smoke",
        command="python -m benchmarks.peers.run --limit 2",
        versions=["sleuth 0.1.0", "peer 1.0"],
        pairs={"peer-self-ask": "sleuth-self-ask"},
        not_run={"peer-broken": "could not install", "peer-own-retriever": "offline"},
    )
    assert "| sleuth-self-ask | self-ask | 2 | 1.000 | 1.000 | 1.000 | 2.5 | 50 | 1.5 | 0 | 0 | 0 | 0 |" in text
    assert "| peer-self-ask | SelfAsk | 2 | 0.000 | 0.333 | 0.000 | 3.0 | 0 | 2.0 | 1 | 0 | 0 | 0 |" in text
    assert "| peer-self-ask | sleuth-self-ask | all | 2 | -0.667" in text and "0 / 2 / 0" in text
    assert "- peer-broken: could not install" in text and "- peer-own-retriever: offline" in text
    assert "`python -m benchmarks.peers.run --limit 2`" in text and "peer 1.0" in text


def test_a_line_cut_short_by_a_kill_is_run_again_and_never_swallows_the_next(tmp_path: Path) -> None:
    from benchmarks.peers.adapters.common import append_line, done_ids

    out = tmp_path / "answers.jsonl"
    append_line(out, {"qid": "a", "answer": "x"})
    with out.open("a", encoding="utf-8") as f:
        f.write('{"qid": "b", "answ')  # killed in the middle of a write
    assert done_ids(out) == {"a"}  # b runs again
    append_line(out, {"qid": "b", "answer": "y"})
    assert [r["qid"] for r in read_lines(out)] == ["a", "b"]
    assert done_ids(out) == {"a", "b"}


def _report(recs: list[dict], rows: dict[str, str], **kw: object) -> str:
    """The report of hand-made records; ``rows``: name -> pipeline, in display order."""
    kw = {"pairs": {}, "not_run": {}, **kw}
    named = [{"name": n, "pipeline": p} for n, p in rows.items()]
    return render(recs, named, header="# T", command="c", versions=[], **kw)  # type: ignore[arg-type]


def test_report_has_a_table_per_dataset_and_names_rows_not_yet_complete() -> None:
    items = {"h1": Item("h1", "Who?", ["Ada"]), "h2": Item("h2", "Who?", ["Bo"]), "m1": Item("m1", "Where?", ["Oslo"])}
    sleuth = [{"qid": q, "answer": a} for q, a in (("h1", "Ada"), ("h2", "Bo"))]
    peer = [{"qid": "h1", "answer": "Ada"}, {"qid": "h2", "answer": "x"}]
    recs = scored_records("sleuth-rag", "hotpotqa", sleuth, items)
    recs += scored_records("sleuth-rag", "musique", [{"qid": "m1", "answer": "Oslo"}], items)
    recs += scored_records("peer-rag", "hotpotqa", peer, items)
    text = _report(
        recs,
        {"sleuth-rag": "rag", "peer-rag": "Standard"},
        pairs={"peer-rag": "sleuth-rag"},
        datasets={"hotpotqa": 2, "musique": 1},
    )
    assert "## All 3 questions" in text and "## hotpotqa (2 questions)" in text and "## musique (1 questions)" in text
    musique = text.split("## musique (1 questions)")[1].split("##")[0]
    assert "| sleuth-rag | rag | 1 | 1.000 |" in musique and "peer-rag" not in musique  # no answers there yet
    # paired over all the questions both answered, and per dataset
    assert "| peer-rag | sleuth-rag | all | 2 | -0.500" in text and "| peer-rag | sleuth-rag | hotpotqa | 2 |" in text
    assert "- peer-rag: 2 of 3 questions answered so far" in text
    assert "**In progress: 1 of 2 rows have answered all 3 questions**" in text
    assert "sleuth-rag: " not in text.split("stopped early")[1]  # complete rows are not listed


def test_an_adapter_starts_no_question_after_its_deadline(tmp_path: Path) -> None:
    import argparse
    import time

    from benchmarks.peers.adapters.common import run_questions

    qs = tmp_path / "q.jsonl"
    qs.write_text("".join(json.dumps({"qid": f"q{i}", "question": f"Q{i}?"}) + "\n" for i in range(3)))
    out = tmp_path / "a.jsonl"
    asked: list[str] = []

    def answer(q: str) -> str:
        asked.append(q)
        return "A"

    with FakeOpenAIServer(llamacpp_timings=True) as srv, CountingProxy(srv.url) as proxy:
        args = argparse.Namespace(
            questions=qs, out=out, llm=proxy.url, row="r", deadline=time.time() - 1, sitting="20261205T080000Z"
        )
        run_questions(args, answer)
        assert asked == [] and not out.exists()
        args.deadline = None
        run_questions(args, answer)
    lines = read_lines(out)
    assert asked == ["Q0?", "Q1?", "Q2?"] and [x["qid"] for x in lines] == ["q0", "q1", "q2"]
    assert {x["sitting"] for x in lines} == {"20261205T080000Z"}  # every line names the sitting that answered it
    assert all(set(x) >= {"llm_calls", "completion_tokens", "model_ms", "seconds"} for x in lines)


def test_a_stopped_driver_stops_the_peer_adapter_it_started(tmp_path: Path) -> None:
    import os
    import signal
    import threading
    import time

    from benchmarks.peers.rows import ROWS, run_peer_row

    pidfile = tmp_path / "pid"
    fake_python = tmp_path / "python"  # stands in for a peer venv's python: records its pid, then waits
    fake_python.write_text(f"#!/bin/sh\necho $$ > {pidfile}\nexec sleep 60\n")
    fake_python.chmod(0o755)

    class _Bench:
        def questions(self) -> list[dict]:
            return [{"qid": "q1", "question": "Q?"}]

    # Ctrl-C's own handler, whatever an earlier test (a server's signal handling) left installed
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        try:
            run_peer_row(
                ROWS["dspy-react"],
                fake_python,
                _Bench(),  # type: ignore[arg-type]
                "http://127.0.0.1:9",
                "http://127.0.0.1:9/search/x",
                "m",
                5,
                tmp_path / "a.jsonl",
                tmp_path / "log",
                deadline=time.time() + 600,
            )
        finally:
            signal.signal(signal.SIGINT, old)
    assert time.monotonic() - t0 < 30
    stat = Path(f"/proc/{int(pidfile.read_text())}/stat")
    for _ in range(50):  # the adapter is killed, not left running against the model (a zombie until reaped)
        if not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
            break
        time.sleep(0.1)
    else:
        pytest.fail("the adapter is still running")
    assert "--deadline" in (tmp_path / "log").read_text()


def test_time_limit_is_parsed_and_kept_out_of_the_reported_command(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks.peers.run import _command, parse_args

    args = parse_args(["--time-limit", "90m", "--rows", "sleuth-rag,flashrag-standard", "--work-dir", "/tmp/w"])
    assert args.time_limit == 5400
    cmd = _command(args)
    assert "--rows sleuth-rag,flashrag-standard" in cmd and "--time-limit" not in cmd and "--work-dir" not in cmd
    assert _command(parse_args([])).endswith("python -m benchmarks.peers.run")
    with pytest.raises(SystemExit) as e:
        parse_args(["--time-limit", "5"])
    assert e.value.code == 2 and "with its unit" in capsys.readouterr().err


def _tiny_hotpotqa(root: Path) -> None:
    rows = []
    for i, (who, year) in enumerate((("Ada Lovelace", "1815"), ("Alan Turing", "1912"))):
        rows.append(
            {
                "id": f"q{i}",
                "question": f"In what year was {who} born?",
                "answer": year,
                "type": "bridge",
                "level": "hard",
                "supporting_facts": {"title": [who], "sent_id": [0]},
                "context": {"title": [who], "sentences": [[f"{who} was born in {year}."]]},
            }
        )
    (root / "hotpotqa").mkdir(parents=True)
    (root / "hotpotqa" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.mark.parametrize("row", ["sleuth-direct", "sleuth-search-o1"])
def test_sigterm_stops_the_driver_mid_question_and_keeps_the_answers(tmp_path: Path, row: str) -> None:
    """SIGTERM (a `timeout`, a scheduler) while a row waits on the model: the driver stops within
    seconds, says the same command resumes, exits 130, and what was answered stays readable.
    Search-o1 waits on the model from a worker thread of its batch loop, which must not hold the exit."""
    import os
    import signal
    import subprocess
    import time

    _tiny_hotpotqa(tmp_path / "data")
    env = {
        **os.environ,
        "SLEUTH_CACHE_DIR": str(tmp_path / "cache"),
        "SLEUTH_EVAL_CACHE": str(tmp_path / "idx"),
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")]),
    }
    with FakeOpenAIServer(fault="slow", slow_s=120) as srv:
        work = tmp_path / "w"
        cmd = [sys.executable, "-m", "benchmarks.peers.run", "--base-url", srv.url, "--model", "fake-model"]
        cmd += ["--rows", row, "--datasets", "hotpotqa", "--n", "2", "--data-dir", str(tmp_path / "data")]
        cmd += ["--work-dir", str(work), "--out", str(tmp_path / "peers.md")]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 240
            while not srv.requests and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.2)
            assert srv.requests, f"the row never reached the model: {proc.poll()} {proc.stderr and proc.stderr.read()}"
            proc.send_signal(signal.SIGTERM)
            _out, err = proc.communicate(timeout=30)  # not the 120 s the model would still take
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 130, err[-2000:]
    assert "the same command resumes" in err and "Traceback" not in err
    assert not (tmp_path / "peers.md").exists()  # a stopped run writes no report
    assert read_lines(work / "answers" / f"{row}.hotpotqa.jsonl") == []  # nothing half-written
    from benchmarks.peers.sittings import read_sittings

    (sitting,) = read_sittings(work).values()  # recorded before the row; the fake is no llama.cpp to measure
    assert sitting["model"] == "fake-model" and "not_measured" in sitting


def test_every_row_starts_on_a_fresh_engine(tmp_path: Path, tiny_llm) -> None:
    """On the real engine (135M model): each row gets a freshly started engine, so no row reuses
    prompts an earlier row left in the engine's prompt cache (Sleuth's Self-Ask after its RAG
    processed up to a third fewer prompt tokens on one shared engine); the sitting says so."""
    import os
    import re
    import subprocess

    from benchmarks.peers.sittings import read_sittings

    _tiny_hotpotqa(tmp_path / "data")
    env = {
        **os.environ,
        "SLEUTH_EVAL_CACHE": str(tmp_path / "idx"),
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")]),
    }
    work = tmp_path / "w"
    cmd = [sys.executable, "-m", "benchmarks.peers.run", "--model", "smollm2-135m", "--n", "1"]
    cmd += ["--rows", "sleuth-direct,sleuth-rag", "--datasets", "hotpotqa", "--data-dir", str(tmp_path / "data")]
    cmd += ["--work-dir", str(work), "--out", str(tmp_path / "peers.md")]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    engines = dict(re.findall(r"^(sleuth-[a-z]+): on a fresh engine at (http://\S+)$", done.stdout, re.M))
    assert set(engines) == {"sleuth-direct", "sleuth-rag"}, done.stdout
    assert engines["sleuth-direct"] != engines["sleuth-rag"]  # another server, not the same one reused
    for row in engines:
        assert len(read_lines(work / "answers" / f"{row}.hotpotqa.jsonl")) == 1
    (sitting,) = read_sittings(work).values()
    assert sitting["engine"] == "fresh per row"
    assert "| fresh per row |" in (tmp_path / "peers.md").read_text()


def test_sleuth_finish_reasons_map_onto_the_reports_failure_kinds() -> None:
    from benchmarks.peers.rows import sleuth_failure

    assert sleuth_failure("finished") == ""
    assert sleuth_failure("step_limit") == "step_limit"
    # Search-o1's queries kept repeating and its answer was forced: a loop, not an exception
    assert sleuth_failure("repeat_limit") == "loop"
    assert sleuth_failure("llm_unavailable") == sleuth_failure("error") == "exception"


def test_an_optional_row_is_not_counted_as_in_progress_and_says_why_it_may_be_left_out() -> None:
    items = {"h1": Item("h1", "Who?", ["Ada"]), "h2": Item("h2", "Who?", ["Bo"])}
    full = [{"qid": "h1", "answer": "Ada"}, {"qid": "h2", "answer": "Bo"}]

    def report(alt: list[dict], peer: list[dict]) -> str:
        recs = scored_records("sleuth-rag", "hotpotqa", full, items) + scored_records(
            "peer-rag", "hotpotqa", peer, items
        )
        recs += scored_records("peer-alt", "hotpotqa", alt, items)
        return _report(
            recs,
            {"sleuth-rag": "rag", "peer-rag": "Standard", "peer-alt": "Alt"},
            pairs={"peer-rag": "sleuth-rag", "peer-alt": "sleuth-rag"},
            datasets={"hotpotqa": 2},
            optional={"peer-alt": "an alternative to peer-rag; hours", "not-chosen": "x"},
        )

    text = report([], full[:1])  # a required row is short: in progress, counted over the required rows only
    assert "**In progress: 1 of 2 rows have answered all 2 questions**" in text
    assert "- peer-alt (optional): not run; an alternative to peer-rag; hours" in text
    assert "- peer-rag: 1 of 2 questions answered so far" in text and "not-chosen" not in text
    text = report(full[:1], full)  # every required row complete, the optional one partial
    assert "In progress" not in text
    assert "All 2 rows have answered all 2 questions; the optional peer-alt has not (last section)." in text
    assert "- peer-alt (optional): 1 of 2 questions answered; an alternative to peer-rag; hours" in text
    assert "| peer-alt | sleuth-rag | all | 1 |" in text  # its answers are still scored and paired
    text = report(full, full)  # all complete: nothing left to list
    assert "optional" not in text and "stopped early" not in text


def test_report_says_which_sitting_answered_what_and_how_fast_its_machine_was() -> None:
    items = {q: Item(q, "Who?", ["Ada"]) for q in ("h1", "h2", "h3")}
    old = [{"qid": "h1", "answer": "Ada", "seconds": 10.0}]  # answered before sittings were recorded
    new = [{"qid": q, "answer": "Ada", "seconds": s, "sitting": "20261205T080000Z"} for q, s in (("h2", 4), ("h3", 6))]
    recs = scored_records("sleuth-rag", "hotpotqa", old + new, items)
    recs += scored_records(
        "peer-rag", "hotpotqa", [{"qid": "h1", "answer": "x", "seconds": 3.0, "sitting": "S0"}], items
    )
    sittings = {
        "20261205T080000Z": {"cpu": "AMD EPYC", "cores": 2, "prompt_tok_s": 61.04, "decode_tok_s": 14.96},
        "S0": {"cpu": "Other", "cores": 2, "not_measured": "KeyError: 'timings'", "engine": "fresh per row"},
    }
    text = _report(recs, {"sleuth-rag": "rag", "peer-rag": "Standard"}, datasets={"hotpotqa": 3}, sittings=sittings)
    section = text.split("## Sittings: where the seconds were measured")[1]
    assert "| not recorded | – | – | – | – | sleuth-rag 1 (10.0) |" in section
    # a sitting recorded before the engine was (stop 49) ran every row on one engine
    assert "| 20261205T080000Z | AMD EPYC (2) | 61.0 | 15.0 | one for all rows | sleuth-rag 2 (5.0) |" in section
    assert "| S0 | Other (2) | not measured: KeyError: 'timings' | – | fresh per row | peer-rag 1 (3.0) |" in section
    # lines that name no sitting, and no sitting recorded: no section
    plain = _report(recs[:1], {"sleuth-rag": "rag"})
    assert "Sittings" not in plain


def test_a_sitting_measures_the_model_it_runs_on(tmp_path: Path, tiny_llm) -> None:
    """On the real engine (135M model): the calibration's rates are recorded; a server that is not
    llama.cpp is recorded as not measured, with why, and the sitting still gets its id."""
    from benchmarks.peers.sittings import CALIBRATION, read_sittings, start_sitting

    from sleuth.llm.embedded import get_server

    srv = get_server("smollm2-135m")
    entry = start_sitting(tmp_path, str(srv.base_url), "smollm2-135m")
    assert read_sittings(tmp_path) == {entry["sitting"]: entry}
    assert (
        entry["prompt_tokens"] >= CALIBRATION["prompt_tokens"]
        and entry["decode_tokens"] == CALIBRATION["decode_tokens"]
    )
    assert entry["prompt_tok_s"] > 0 and entry["decode_tok_s"] > 0 and entry["cores"] >= 1 and entry["cpu"]
    with FakeOpenAIServer() as fake:
        entry = start_sitting(tmp_path / "w2", fake.url, "fake-model")
    assert "prompt_tok_s" not in entry and entry["not_measured"]
