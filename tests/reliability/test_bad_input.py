"""Bad input through every door: Python (BadQuestion), the CLI (one sentence, exit 2,
no traceback), the HTTP API (4xx JSON); malformed corpus files (reported and
skipped, nothing stored lost) and bad configuration values (clear errors)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from serverkit import running
from sleuth.llm import LLMError, get_llm
from sleuth.search.base import FilterError, Filters
from sleuth.search.index import Index
from sleuth.search.index_writer import EmptyBuild
from sleuth.server import ServerConfigError, ServerSettings, create_app
from sleuth.strategies import BAD_INPUT, BadQuestion, get_strategy
from sleuth.strategies.search_o1 import SearchO1

from .conftest import ALL_STRATEGIES, EN_DOCS, fast_client, write_jsonl

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(120)]

ROOT = Path(__file__).resolve().parents[2]
MB = "x" * 1_000_000
BAD_QUESTIONS: dict[str, Any] = {
    "empty": "",
    "whitespace": " \n\t \u3000 ",
    "1MB": MB,
    "over-limit": "why? " * 1000,
    "binary-nul": "who\x00is\x01this",
    "binary-bytes": b"\x89PNG\r\n\x1a\n\x00\x00",
    "escape-seq": "\x1b[31mred\x1b[0m?",
    "not-text": 12345,
    "none": None,
}


# ------------------------------------------------------------------ Python
@pytest.mark.parametrize("name", ALL_STRATEGIES)
def test_python_bad_question(name: str, fake_llm, en_index, tally) -> None:
    srv = fake_llm()
    s = get_strategy(name, fast_client(srv.base_url), en_index)
    for label, q in BAD_QUESTIONS.items():
        tally.add("bad_inputs")
        with pytest.raises(BadQuestion) as e:
            s.run(q)
        msg = str(e.value)
        assert msg and "\n" not in msg and len(msg) < 200, (label, msg)
    assert srv.stats.requests == 0, "a bad question never reaches the model"


def test_search_o1_batch_marks_bad_questions(fake_llm, en_index, tally) -> None:
    s = SearchO1(fast_client(fake_llm().base_url), en_index, lang="en")
    out = s.run_batch(["", "Who directed Jaws?", "\x00", MB])
    tally.add("bad_inputs", 3)
    assert [r.finish_reason for r in out] == [BAD_INPUT, "finished", BAD_INPUT, BAD_INPUT]
    assert all(len(r.question) <= 200 for r in out)


@pytest.mark.parametrize(
    "opts", [{"k": -1}, {"k": 0}, {"max_steps": 0}, {"max_tokens": -5}, {"k": "many"}, {"lang": "klingon"}]
)
def test_python_bad_strategy_options(opts: dict[str, Any], tally) -> None:
    tally.add("bad_inputs")
    with pytest.raises(ValueError, match=next(iter(opts))):
        get_strategy("rag", object(), None, **opts)


@pytest.mark.parametrize("url", ["garbage", "htp://host", "http://", "http://127.0.0.1:notaport", "   "])
def test_python_bad_base_url(url: str, tally) -> None:
    tally.add("bad_inputs")
    with pytest.raises(LLMError, match="SLEUTH_LLM_BASE_URL"):
        get_llm("some-model", base_url=url, cache=False)


@pytest.mark.parametrize("expr", ["acl", "=x", "acl=", "year>=", ">=3"])
def test_python_bad_filters(expr: str, tally) -> None:
    tally.add("bad_inputs")
    with pytest.raises(FilterError):
        Filters.parse([expr])


def test_bad_server_settings(tally) -> None:
    for kw in ({"max_concurrency": 0}, {"timeout_s": -1}, {"max_body_bytes": 10}, {"api_keys": ("has space",)}):
        tally.add("bad_inputs")
        with pytest.raises(ServerConfigError):
            ServerSettings(**kw)
    tally.add("bad_inputs")
    with pytest.raises(ServerConfigError, match="API key"):
        create_app(ServerSettings(host="0.0.0.0"), open_on_startup=False)


# ------------------------------------------------------------------ CLI
def cli(args: list[str], env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "COLUMNS": "250", "SLEUTH_LLM_CACHE": "0", "OMP_WAIT_POLICY": "PASSIVE", **env}
    return subprocess.run(
        [sys.executable, "-m", "sleuth", *args], capture_output=True, text=True, timeout=timeout, env=full, cwd=ROOT
    )


def assert_one_sentence(p: subprocess.CompletedProcess[str], *, code: int = 2, reports: bool = False) -> str:
    """Exit ``code``, no traceback, one ``error:`` line (after per-file ``skipped`` lines when ``reports``)."""
    assert p.returncode == code, (p.returncode, p.stdout[-500:], p.stderr[-1500:])
    err = p.stderr.strip()
    assert "Traceback" not in err and "Traceback" not in p.stdout
    lines = [ln for ln in err.splitlines() if ln.strip()]
    if reports:
        assert all(ln.startswith("skipped") for ln in lines[:-1]), err
        lines = lines[-1:]
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    return lines[0]


@pytest.fixture
def cli_env(fake_llm, tmp_path: Path) -> dict[str, str]:
    return {"SLEUTH_LLM_BASE_URL": fake_llm().base_url, "SLEUTH_LLM_MODEL": "fake", "SLEUTH_CACHE_DIR": str(tmp_path)}


def in_process(args: list[str], monkeypatch, capsys, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The real CLI entry point (``sleuth.cli.main``) in this process: same code path, no interpreter start."""
    from sleuth.cli import main

    for k in ("SLEUTH_LLM_TIMEOUT", "SLEUTH_LLM_MAX_RETRIES"):
        monkeypatch.delenv(k, raising=False)
    for k, v in {"COLUMNS": "250", "SLEUTH_LLM_CACHE": "0", **env}.items():
        monkeypatch.setenv(k, v)
    capsys.readouterr()
    try:
        main(args)
        code = 0
    except SystemExit as e:
        code = int(e.code or 0)
    out = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, out.out, out.err)


def test_cli_bad_questions_subprocess(cli_env: dict[str, str], tally) -> None:
    """Real processes: `sleuth ask` with an empty, 100 kB and binary question.
    (argv cannot carry NUL bytes nor 1 MB - Linux caps one argument at 128 KiB.)"""
    for q in ["", "x" * 100_000, "who\x01is\x02this"]:
        tally.add("bad_inputs")
        line = assert_one_sentence(cli(["ask", q, "-s", "direct"], cli_env))
        assert "question" in line


def test_cli_bad_config_subprocess(cli_env: dict[str, str], tally) -> None:
    tally.add("bad_inputs", 2)
    line = assert_one_sentence(cli(["ask", "Who?", "-s", "direct"], {**cli_env, "SLEUTH_LLM_BASE_URL": "garbage"}))
    assert "garbage" in line and "SLEUTH_LLM_BASE_URL" in line
    p = cli(["ask", "Who?", "--k", "-1"], cli_env)
    assert p.returncode == 2 and "Traceback" not in p.stderr and "Invalid value" in p.stderr, p.stderr[-800:]


def test_cli_bad_input_in_process(cli_env: dict[str, str], tmp_path: Path, monkeypatch, capsys, tally) -> None:
    cases: list[tuple[list[str], dict[str, str], str]] = [
        (["ask", "   \t  ", "-s", "direct"], {}, "question"),
        (["ask", "why? " * 1000, "-s", "direct"], {}, "question"),
        (["ask", "Who?", "-s", "direct"], {"SLEUTH_LLM_BASE_URL": "http://127.0.0.1:notaport"}, "SLEUTH_LLM_BASE_URL"),
        (["ask", "Who?", "-s", "direct"], {"SLEUTH_LLM_BASE_URL": "htp://host"}, "SLEUTH_LLM_BASE_URL"),
        (["ask", "Who?", "-s", "direct"], {"SLEUTH_LLM_TIMEOUT": "soon"}, "SLEUTH_LLM_TIMEOUT"),
        (["ask", "Who?", "-s", "direct"], {"SLEUTH_LLM_MAX_RETRIES": "many"}, "SLEUTH_LLM_MAX_RETRIES"),
        (["ask", "Who?", "-s", "nope"], {}, "unknown strategy"),
        (["ask", "Who?", "-s", "rag", "--filter", "acl"], {}, "acl"),
        (
            ["ask", "Who?", "-s", "direct", "--filter", "[/x]=1"],
            {"SLEUTH_LLM_BASE_URL": "garbage"},
            "SLEUTH_LLM_BASE_URL",
        ),
        (["ask", "Who?", "-s", "rag", "--index", str(tmp_path / "missing")], {}, "does not exist"),
        (["ask", "Who?", "-s", "direct", "--lang", "xx"], {}, "--lang"),
        (["ask", "Who?", "-s", "rag", "--opt", "k"], {}, "--opt"),
        (["index", "build", "-i", str(tmp_path / "none.jsonl"), "-o", str(tmp_path / "ix")], {}, "not found"),
        (["serve", "--max-concurrency", "0"], {}, "concurrency"),
    ]
    for args, env, expect in cases:
        tally.add("bad_inputs")
        line = assert_one_sentence(in_process(args, monkeypatch, capsys, {**cli_env, **env}))
        assert expect in line, (args, line)
    for args in (["ask", "Who?", "--max-steps", "0"], ["serve", "--port", "http"], ["ask", "Who?", "--k", "many"]):
        tally.add("bad_inputs")
        p = in_process(args, monkeypatch, capsys, cli_env)
        assert p.returncode == 2 and "Traceback" not in p.stderr and "Invalid value" in p.stderr, p.stderr[-800:]


# ------------------------------------------------------------------ HTTP API
@pytest.fixture
def api(fake_llm, en_index) -> Any:
    app = create_app(
        ServerSettings(max_concurrency=2, timeout_s=20),
        llm=fast_client(fake_llm().base_url),
        retrievers={"en": en_index},
    )
    with running(app) as url:
        yield url


API_CASES: list[tuple[str, Any, set[int]]] = [
    ("empty", {"question": ""}, {422}),
    ("whitespace", {"question": " \n\t "}, {422}),
    ("1MB", {"question": MB}, {413}),
    ("over-limit", {"question": "why? " * 1000}, {422}),
    ("binary", {"question": "who\u0000is"}, {422}),
    ("number", {"question": 12345}, {422}),
    ("missing", {}, {422}),
    ("negative k", {"question": "Who?", "k": -1}, {422}),
    ("huge steps", {"question": "Who?", "max_steps": 10**9}, {422}),
    ("bad strategy", {"question": "Who?", "strategy": "../../etc/passwd"}, {422}),
    ("bad source", {"question": "Who?", "index": "nope"}, {422}),
    ("bad filter", {"question": "Who?", "filters": ["acl"]}, {422}),
    ("filter type", {"question": "Who?", "filters": "acl=all"}, {422}),
    ("unknown field", {"question": "Who?", "sudo": True}, {422}),
]


def test_api_bad_input(api: str, tally) -> None:
    with httpx.Client(base_url=api, timeout=30) as c:
        for label, body, codes in API_CASES:
            tally.add("bad_inputs")
            tally.add("requests")
            r = c.post("/v1/ask", json=body)
            assert r.status_code in codes, (label, r.status_code, r.text[:300])
            err = r.json()["error"]
            assert err["message"] and "Traceback" not in r.text, label
        raw = [b"\xff\xfe\x00\x01garbage", b'{"question": "Who?"', b"[1, 2, 3]", b"null"]
        for body in raw:
            tally.add("bad_inputs")
            tally.add("requests")
            r = c.post("/v1/ask", content=body, headers={"Content-Type": "application/json"})
            assert r.status_code in (400, 422), (body, r.status_code, r.text[:200])
            assert r.json()["error"]["message"]
        for body in ({"model": "sleuth-direct", "messages": []}, {"model": "sleuth-nope", "messages": [{"role": "user", "content": "q"}]},
                     {"model": "sleuth-direct", "messages": [{"role": "user", "content": "\x00"}]}):  # fmt: skip
            tally.add("bad_inputs")
            tally.add("requests")
            r = c.post("/v1/chat/completions", json=body)
            assert 400 <= r.status_code < 500, (body, r.status_code)
            assert r.json()["error"]["message"]
        # the service is unharmed
        tally.add("requests")
        ok = c.post("/v1/ask", json={"question": "Who directed Jaws?", "strategy": "direct"})
        assert ok.status_code == 200 and ok.json()["finish_reason"] == "finished"


# ------------------------------------------------------------------ malformed corpus files
def _malformed(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    good = [{"id": "fine-1", "title": "Fine", "text": "Okapis live in the Ituri rainforest.", "acl": "all"}]
    mixed = folder / "mixed.jsonl"
    mixed.write_text(
        json.dumps(good[0]) + "\n{not json\n" + '{"id": "noText"}\n' + "[1,2]\n" + '"just a string"\n'
        + json.dumps({"id": "fine-2", "title": "Also fine", "text": "Quokkas live on Rottnest Island."}) + "\n",
        encoding="utf-8",
    )  # fmt: skip
    (folder / "binary.jsonl").write_bytes(b"\x00\x01\x02\xff\xfe" * 200)
    (folder / "latin1.txt").write_bytes("caf\xe9 cr\xe8me".encode("latin-1") * 5)
    (folder / "empty.jsonl").write_bytes(b"")
    (folder / "fake.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf")
    (folder / "truncated.json.gz").write_bytes(b"\x1f\x8b\x08\x00garbage")
    (folder / "page.html").write_text("<html><body><p>Unclosed <b>tags <i>everywhere", encoding="utf-8")
    (folder / "weird.bin").write_bytes(b"\x7fELF")
    return folder


def test_malformed_corpus_reported_and_skipped(tmp_path: Path, tally) -> None:
    folder = _malformed(tmp_path / "corpus")
    idx = Index.build([folder], tmp_path / "index")
    rep = idx.last_report
    assert rep is not None
    tally.add("bad_inputs", 9)
    skipped = {Path(p).name for p, _ in rep.ingest.skipped}
    assert {"binary.jsonl", "empty.jsonl", "fake.pdf", "truncated.json.gz", "weird.bin"} <= skipped, rep.ingest.skipped
    assert all(reason for _, reason in rep.ingest.skipped)
    assert sum(rep.ingest.bad_lines.values()) >= 3, rep.ingest.bad_lines
    assert [p.id for p in idx.search("Okapis Ituri", 3)][:1] and idx.search("Quokkas Rottnest", 3)


def test_malformed_input_never_loses_stored_data(tmp_path: Path, tally) -> None:
    good = write_jsonl(tmp_path / "good.jsonl", EN_DOCS)
    root = tmp_path / "index"
    idx = Index.build([good], root)
    before = idx.count()
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "a.jsonl").write_bytes(b"\x00\xff" * 100)
    (bad / "b.jsonl").write_text("{broken\n", encoding="utf-8")
    tally.add("bad_inputs", 2)
    with pytest.raises(EmptyBuild):
        Index.build([bad], root)  # a rebuild from nothing usable publishes nothing
    rep = Index.open(root).add([bad])  # an add of nothing usable changes nothing
    assert rep.passages_added == 0
    again = Index.open(root)
    assert again.count() == before
    assert again.search("Spielberg father", 2)
    tally.add("bad_inputs")
    p = cli(["index", "build", "-i", str(bad), "-o", str(root)], {})  # a real process: stderr as users see it
    assert_one_sentence(p, reports=True)
    assert Index.open(root).count() == before
