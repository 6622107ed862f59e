"""A newcomer's path over their own documents, as separate processes: a folder of Markdown, HTML,
PDF and Word files with a metadata sidecar (examples/make_handbook.py) is indexed, listed, one
file removed, and a question that needs two of the files answered with both cited - the answer on
stdout, the live steps on stderr.  The model is the fake OpenAI-compatible server on 127.0.0.1,
which reads the numbered passages of the prompt it is sent and cites the two it needs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fake_openai_server import FakeOpenAIServer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))

from make_handbook import make_handbook  # noqa: E402

QUESTION = "Who heads the office whose travel desk books trips abroad?"


def _sleuth(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), SLEUTH_CACHE_DIR=str(cwd / "cache"), COLUMNS="100")
    return subprocess.run(
        [sys.executable, "-m", "sleuth", *args], capture_output=True, text=True, timeout=180, env=env, cwd=cwd
    )


def _reader(body: dict[str, Any]) -> str:
    """A model that answers from the passages it is shown: it cites the passage that says which
    office books trips abroad and the one that says who heads that office."""
    prompt = "".join(str(m.get("content", "")) for m in body.get("messages") or []) or str(body.get("prompt", ""))
    numbered = dict(re.findall(r"^\[(\d+)\] (.*)$", prompt, flags=re.M))
    desk = next((n for n, text in numbered.items() if "travel desk" in text and "abroad" in text), None)
    head = next((n for n, text in numbered.items() if "heads the Lyon office" in text), None)
    if desk is None or head is None:
        return "The documents do not say. So the answer is: unknown"
    return (
        f"Trips abroad are booked through the travel desk of the Lyon office [{desk}], and Claire Dubois heads "
        f"the Lyon office [{head}].\nSo the answer is: Claire Dubois"
    )


def test_own_documents_index_list_remove_and_a_two_file_answer(tmp_path: Path) -> None:
    pytest.importorskip("docx")
    docs = make_handbook(tmp_path / "handbook")
    ix = tmp_path / "ix"

    p = _sleuth(["index", "build", "--input", str(docs), "--out", str(ix)], tmp_path)
    assert p.returncode == 0, p.stderr
    assert "from 4 new and 0 updated documents" in p.stdout and p.stderr.count("skipped") == 0, p.stdout + p.stderr

    p = _sleuth(["index", "list", "--index", str(ix), "--json"], tmp_path)
    assert p.returncode == 0, p.stderr
    listed = {d["id"]: d for d in json.loads(p.stdout)["documents"]}
    assert set(listed) == {"travel-policy.md", "offices.html", "security.pdf", "expense-handbook.docx"}
    assert all(d["passages"] >= 1 and d["version"] == "2025" for d in listed.values())
    assert listed["travel-policy.md"]["region"] == "eu" and listed["offices.html"]["region"] == "global"
    assert listed["security.pdf"]["acl"] == ["it"] and listed["security.pdf"]["title"] == "Security rules"
    assert listed["expense-handbook.docx"]["metadata"] == {"owner": "finance"}
    assert listed["expense-handbook.docx"]["acl"] == ["all", "finance"]
    p = _sleuth(["index", "list", "--index", str(ix)], tmp_path)
    assert "4 document(s)" in p.stdout and "security.pdf" in p.stdout and "owner=finance" in p.stdout

    p = _sleuth(["index", "remove", str(docs / "security.pdf"), "--index", str(ix)], tmp_path)
    assert p.returncode == 0, p.stderr
    assert "1 passages of 1 document(s) removed" in p.stdout and "3 document(s)" in p.stdout
    p = _sleuth(["index", "list", "--index", str(ix), "--json"], tmp_path)
    assert {d["id"] for d in json.loads(p.stdout)["documents"]} == {
        "travel-policy.md",
        "offices.html",
        "expense-handbook.docx",
    }
    p = _sleuth(["search", "encryption laptops lost devices", "--index", str(ix), "--json"], tmp_path)
    assert all(x["doc_id"] != "security.pdf" for x in json.loads(p.stdout)["passages"])

    with FakeOpenAIServer(script=_reader) as srv:
        ask = ["ask", QUESTION, "-s", "rag", "--index", str(ix), "--base-url", srv.base_url, "--model", "fake-model"]
        p = _sleuth(ask, tmp_path)
        assert p.returncode == 0, p.stderr
        assert "Claire Dubois" in p.stdout
        assert "travel-policy.md" in p.stdout and "offices.html" in p.stdout, p.stdout  # the citations table
        assert "search" in p.stderr and "search" not in p.stdout.split("citations")[0], "the trace goes to stderr"
        p = _sleuth([*ask, "--json"], tmp_path)
        result = json.loads(p.stdout)
        assert result["short_answer"] == "Claire Dubois"
        assert {c["doc_id"] for c in result["citations"]} == {"travel-policy.md", "offices.html"}
        p = _sleuth([*ask, "--quiet"], tmp_path)
        assert p.returncode == 0 and p.stderr.strip() == "" and "Claire Dubois" in p.stdout


def test_serve_with_no_index_serves_the_quickstart_corpus_and_says_so(tmp_path: Path, data_dir: Path) -> None:
    pytest.importorskip("uvicorn")
    import signal
    import socket
    import time

    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), SLEUTH_CACHE_DIR=str(tmp_path / "cache"), COLUMNS="100")
    env.update(SLEUTH_DATA_DIR=str(data_dir), PYTHONUNBUFFERED="1")
    for var in ("SLEUTH_INDEX", "SLEUTH_CORPUS", "SLEUTH_SERVER_KEY"):
        env.pop(var, None)
    log = tmp_path / "serve.log"
    with FakeOpenAIServer(script=_reader) as srv, open(log, "w") as out:
        cmd = ["serve", "--port", str(port), "--base-url", srv.base_url, "--model", "fake-model"]
        proc = subprocess.Popen([sys.executable, "-m", "sleuth", *cmd], stdout=out, stderr=subprocess.STDOUT, env=env)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 120
            while True:
                assert proc.poll() is None, log.read_text()
                try:
                    if httpx.get(url + "/healthz", timeout=2).json()["status"] == "ok":
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.3)
            sources = httpx.get(url + "/v1/sources", timeout=5).json()["sources"]
            assert [s["name"] for s in sources] == ["quickstart"]
            assert sources[0]["quickstart"] is True and sources[0]["default"] is True
            assert "quick-start corpus" in sources[0]["note"] and "--index DIR" in sources[0]["note"]
            said = log.read_text()
            assert "no --index given: serving the bundled quick-start corpus" in said
            assert str(data_dir / "quickstart" / "wiki_passages.jsonl") in said
            r = httpx.post(url + "/v1/ask", json={"question": QUESTION, "strategy": "rag"}, timeout=60)
            assert r.status_code == 200, r.text
            searched = [e["data"]["passages"] for e in r.json()["trace"] if e["kind"] == "search"]
            assert searched and searched[0], "the run searched the quick-start corpus and found passages"
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def test_serve_with_no_index_and_no_quickstart_corpus_refuses_in_one_line(tmp_path: Path) -> None:
    pytest.importorskip("uvicorn")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), SLEUTH_DATA_DIR=str(tmp_path / "no-data"), COLUMNS="80")
    for var in ("SLEUTH_INDEX", "SLEUTH_CORPUS", "SLEUTH_SERVER_KEY"):
        env.pop(var, None)
    p = subprocess.run(
        [sys.executable, "-m", "sleuth", "serve", "--port", "0", "--base-url", "http://127.0.0.1:9/v1"],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.strip().count("\n") == 0 and "quick-start corpus was not found" in p.stderr


def test_mcp_with_no_index_serves_the_quickstart_corpus_and_says_so(tmp_path: Path, data_dir: Path) -> None:
    pytest.importorskip("mcp")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), SLEUTH_CACHE_DIR=str(tmp_path / "cache"), COLUMNS="80")
    env["SLEUTH_DATA_DIR"] = str(data_dir)
    for var in ("SLEUTH_INDEX", "SLEUTH_CORPUS"):
        env.pop(var, None)
    cmd = [sys.executable, "-m", "sleuth", "mcp", "--base-url", "http://127.0.0.1:9/v1", "--model", "m"]
    p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stderr  # end of input: the stdio server stops
    assert "no --index given: serving the bundled quick-start corpus" in p.stderr and p.stdout == ""
    # what the sources tool tells the agent
    from sleuth.mcp.tools import Tools
    from sleuth.search import Filters
    from sleuth.server import ServerSettings
    from sleuth.server.principals import Principal
    from sleuth.server.runtime import Runtime

    qs = str(data_dir / "quickstart" / "wiki_passages.jsonl")
    rt = Runtime(
        ServerSettings(sources=(("quickstart", qs),), quickstart_source="quickstart", base_url="http://127.0.0.1:9/v1")
    )
    try:
        tools = Tools(rt, endpoint="mcp:stdio", local=True)
        local = Principal(id="local", name="local user", scope=Filters(), kind="local")
        (entry,) = tools.sources(local)["sources"]
        assert entry["quickstart"] is True and "quick-start corpus" in entry["note"]
    finally:
        rt.shutdown()
