"""Hostile callers against a real ``sleuth serve`` process (issue 52).

One server process over a small English index with restricted passages, a principals file
(``[anonymous]``, ``alice`` who holds the restricted group, ``bob``, ``admin`` with every group),
a SQLite trace store, an audit log, the LLM and search caches on disk, a 2 s read timeout, and a
fake model.  It is started with umask 000, so every file it writes would be world-readable
without the 0600 rule.  Each case writes what it tried into the hostile table
(:class:`~reliability.conftest.Hostile`, printed in the summary and copied into
docs/reliability.md): attempts, answers that held, leaks, crashes (the process gone), 5xx.

* every numeric option of every strategy at its bounds, one past them, at +-10^9 (and, by a
  Hypothesis property test, anything else) on ``/v1/ask`` and ``/v1/chat/completions``, and the
  probe's ``n_passages=10^9`` on ``/mcp`` too: 200 inside the bounds, 422 naming the option and
  its limits outside, and the process never dies;
* MCP sessions: another principal (anonymous, a bad credential) naming alice's session id gets
  404 for a tool call, a cancellation, the GET stream and DELETE; alice's session goes on;
* restricted files (traces, WAL, audit log, caches, an ACL-labelled index) are 0600 / 0700;
* malformed filters: 422 with the path of the bad value on every surface;
* bodies: a 10 MB chunked body and a huge declared length get 413, a silent or trickling
  upload and silent connections are closed within the read timeout;
* credentials in the URL get 400 and appear in no log; unsupported ``Authorization`` schemes 401;
* anonymous runs are not kept, nobody reads another principal's trace; the audit log records
  each refusal.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import secrets
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sleuth.search.index import Index
from sleuth.strategies import STRATEGIES

from .conftest import EN_DOCS, ROOT, SECRET, Hostile, serve_process, wait_for, write_jsonl

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(600)]

QUESTION = "Who was the father of the director of Jaws?"
READ_TIMEOUT = 2.0
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}
HELLO = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "hostile", "version": "0"}}
#: the request fields that are options (sent at the top level, not in "options")
TOP_LEVEL = {"k", "max_steps", "max_tokens", "lang"}


# ------------------------------------------------------------------ the server
@pytest.fixture(scope="module")
def world(module_fake_llm, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("hostile")
    keys = {n: secrets.token_urlsafe(24) for n in ("alice", "bob", "admin")}

    def sha(k: str) -> str:
        return hashlib.sha256(k.encode()).hexdigest()

    (tmp / "principals.toml").write_text(
        "[anonymous]\nacl = ['all']\n"
        f"[principals.alice]\nkey_sha256 = ['{sha(keys['alice'])}']\nacl = ['all', 'restricted']\n"
        f"[principals.bob]\nkey_sha256 = ['{sha(keys['bob'])}']\nacl = ['all']\n"
        f"[principals.admin]\nkey_sha256 = ['{sha(keys['admin'])}']\nacl = '*'\n",
        encoding="utf-8",
    )
    index_dir = tmp / "index"
    # hybrid (BM25 + vectors), as the probe's: there a k of 10^9 made tantivy allocate 64 GB and abort
    Index.build([write_jsonl(tmp / "docs.jsonl", EN_DOCS)], index_dir, dense=True)
    srv = module_fake_llm()
    log = tmp / "server.log"
    args = ["-m", "sleuth", "serve", "--port", "{port}", "--base-url", srv.base_url, "--model", "fake-model",
            "--index", f"en={index_dir}", "--principals", str(tmp / "principals.toml"), "--strategy", "rag",
            "--traces", str(tmp / "state" / "traces.sqlite"), "--audit-log", str(tmp / "state" / "audit.jsonl"),
            "--read-timeout", str(READ_TIMEOUT), "--timeout", "60", "--max-concurrency", "4"]  # fmt: skip
    env = {"SLEUTH_CACHE_DIR": str(tmp / "cache"), "SLEUTH_LLM_CACHE": "1", "SLEUTH_SEARCH_CACHE": "1"}
    old = os.umask(0)  # the server inherits umask 000: only Sleuth's own rule keeps its files private
    try:
        ctx = serve_process(args, log=log, **env)
        proc, url = ctx.__enter__()
    finally:
        os.umask(old)
    try:
        yield {"url": url, "proc": proc, "keys": keys, "tmp": tmp, "log": log, "index": index_dir}
    finally:
        ctx.__exit__(None, None, None)


def alive(w: dict[str, Any]) -> bool:
    if w["proc"].poll() is not None:
        return False
    try:
        return httpx.get(w["url"] + "/healthz", timeout=10).status_code == 200
    except httpx.HTTPError:
        return False


def client(w: dict[str, Any], who: str | None = None, **kw: Any) -> httpx.Client:
    headers = {"Authorization": f"Bearer {w['keys'][who]}"} if who else {}
    return httpx.Client(base_url=w["url"], timeout=60, headers=headers, **kw)


def record(hostile: Hostile, w: dict[str, Any], case: str, status: int, ok: bool) -> None:
    crash = w["proc"].poll() is not None
    hostile.add(case, held=ok, crash=crash, status=status)
    assert not crash, f"{case}: the server process died (exit {w['proc'].returncode})"
    assert status < 500, f"{case}: {status}"


# ------------------------------------------------------------------ 1. option bounds
def option_table() -> list[tuple[str, str, str, float, float]]:
    """(strategy, option, kind, min, max) for every numeric option of every strategy."""
    rows = []
    for name, cls in STRATEGIES.items():
        import dataclasses
        import typing

        hints = typing.get_type_hints(cls.Options)
        for f in dataclasses.fields(cls.Options):
            kinds = typing.get_args(hints[f.name]) or (hints[f.name],)
            kind = next((k for k in kinds if k in (int, float)), None)
            if kind is None:
                continue
            lo, hi = f.metadata.get("min"), f.metadata.get("max")
            assert lo is not None and hi is not None, f"{name}.{f.name} has no bounds"
            rows.append((name, f.name, kind.__name__, lo, hi))
    return rows


OPTIONS = option_table()


def ask_body(strategy: str, option: str, value: Any, surface: str) -> tuple[str, dict[str, Any]]:
    own = option in TOP_LEVEL
    if surface == "/v1/ask":
        body: dict[str, Any] = {"question": QUESTION, "strategy": strategy}
    else:
        body = {"model": f"sleuth-{strategy}", "messages": [{"role": "user", "content": QUESTION}]}
        own = option in ("k", "max_steps", "max_tokens")
    if own:
        body[option] = value
    else:
        body["options"] = {option: value}
    return surface, body


def within(kind: str, lo: float, hi: float, value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if isinstance(value, float) and not math.isfinite(value):
        return False
    if kind == "int" and isinstance(value, float) and not value.is_integer():
        return False
    return lo <= value <= hi


def check_option(w: dict[str, Any], c: httpx.Client, hostile: Hostile, case: str, row: tuple, value: Any,
                 surface: str) -> None:  # fmt: skip
    strategy, option, kind, lo, hi = row
    path, body = ask_body(strategy, option, value, surface)
    r = c.post(path, content=json.dumps(body, allow_nan=True), headers={"Content-Type": "application/json"})
    fits = within(kind, lo, hi, value)
    ok = r.status_code == (200 if fits else 422)
    if r.status_code == 422:
        msg = r.json()["error"]["message"]
        ok = ok and option in msg and f"{lo:g}" in msg and f"{hi:g}" in msg
    record(hostile, w, case, r.status_code, ok)
    assert ok, (strategy, option, value, surface, r.status_code, r.text[:300])


def test_every_option_at_and_past_its_bounds_through_the_server(world, hostile) -> None:
    w = world
    assert len({s for s, *_ in OPTIONS}) == len(STRATEGIES)
    with client(w, "bob") as c:
        for row in OPTIONS:
            _, _, kind, lo, hi = row
            values: list[Any] = [lo, hi, hi + 1, lo - 1, 10**9, -(10**9)]
            if kind == "float":
                values += [hi + 0.001, float("inf"), float("nan")]
            for v in values:
                surface = "/v1/chat/completions" if row[1] in ("k", "max_steps") and v == hi else "/v1/ask"
                check_option(w, c, hostile, "option at/past its bounds (200 / 422)", row, v, surface)
    assert alive(w)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=False)
@given(
    row=st.sampled_from(OPTIONS),
    value=st.one_of(
        st.integers(min_value=-(10**12), max_value=10**12),
        st.floats(allow_nan=True, allow_infinity=True),
        st.sampled_from([10**9, -(10**9), 0, -1, 2**31, 2**63, 10**30]),
    ),
    surface=st.sampled_from(["/v1/ask", "/v1/chat/completions"]),
)
def test_property_any_option_value_never_takes_the_server_down(world, hostile, row, value, surface) -> None:
    with client(world, "bob") as c:
        check_option(world, c, hostile, "option at any value (property test)", row, value, surface)


def test_the_probe_request_on_every_surface(world, hostile) -> None:
    """The probe's one request that killed the server: n_passages=10^9 for RAT, anonymous too."""
    w = world
    case = "n_passages=10^9 (probe) on ask, chat, MCP"
    for who in (None, "bob"):
        with client(w, who) as c:
            for path, body in (
                ("/v1/ask", {"question": QUESTION, "strategy": "rat", "options": {"n_passages": 10**9}}),
                (
                    "/v1/chat/completions",
                    {
                        "model": "sleuth-rat",
                        "messages": [{"role": "user", "content": QUESTION}],
                        "options": {"n_passages": 10**9},
                    },
                ),
            ):
                r = c.post(path, json=body)
                ok = r.status_code == 422 and "n_passages must be a whole number from 1 to 50" in r.text
                record(hostile, w, case, r.status_code, ok)
                assert ok, r.text
            sid = mcp_open(c)
            r = mcp_call(c, sid, "ask", {"question": QUESTION, "strategy": "rat", "options": {"n_passages": 10**9}})
            ok = r.status_code == 200 and "n_passages must be a whole number from 1 to 50" in r.text
            record(hostile, w, case, r.status_code, ok)
            assert ok, r.text
            r = mcp_call(c, sid, "ask", {"question": QUESTION, "strategy": "rat", "options": {"max_tokens": 10**9}})
            ok = "max_tokens must be a whole number from 1 to 4096" in r.text
            record(hostile, w, case, r.status_code, ok)
            assert ok, r.text
    # the index itself never asks its engines for more rows than it has (a separate process: an abort
    # would not take pytest down with it)
    code = (
        "import sys; from sleuth.search.index import Index; print(len(Index.open(sys.argv[1]).search('Jaws', 10**9)))"
    )
    out = subprocess.run([sys.executable, "-c", code, str(w["index"])], capture_output=True, text=True, timeout=120,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})  # fmt: skip
    record(hostile, w, case, 0, out.returncode == 0)
    assert out.returncode == 0 and int(out.stdout.strip()) <= len(EN_DOCS), out.stderr[-500:]
    assert alive(w)


# ------------------------------------------------------------------ 2. MCP sessions
def mcp_open(c: httpx.Client) -> str:
    r = c.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": HELLO}, headers=MCP_HEADERS)
    assert r.status_code == 200, r.text
    sid = r.headers["mcp-session-id"]
    h = {**MCP_HEADERS, "mcp-session-id": sid, "mcp-protocol-version": HELLO["protocolVersion"]}
    assert c.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=h).status_code == 202
    return sid


def mcp_headers(sid: str) -> dict[str, str]:
    return {**MCP_HEADERS, "mcp-session-id": sid, "mcp-protocol-version": HELLO["protocolVersion"]}


def mcp_call(c: httpx.Client, sid: str, tool: str, args: dict[str, Any], rid: int = 7) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": tool, "arguments": args}}
    return c.post("/mcp", json=body, headers=mcp_headers(sid))


def test_mcp_sessions_belong_to_the_principal_that_opened_them(world, hostile) -> None:
    w = world
    case = "MCP session of another principal -> 404"
    with client(w, "alice") as alice:
        sid = mcp_open(alice)
        done: dict[str, Any] = {}

        def long_ask() -> None:  # an in-flight call the others try to cancel
            done["r"] = mcp_call(alice, sid, "ask", {"question": QUESTION, "strategy": "self-ask"}, rid=42)

        t = threading.Thread(target=long_ask)
        t.start()
        intruders = [client(w, "bob"), client(w, None), client(w, "admin")]
        try:
            for c in intruders:
                h = mcp_headers(sid)
                tries = [
                    c.post(
                        "/mcp",
                        json={
                            "jsonrpc": "2.0",
                            "method": "notifications/cancelled",
                            "params": {"requestId": 42, "reason": "hostile"},
                        },
                        headers=h,
                    ),
                    c.post("/mcp", json={"jsonrpc": "2.0", "id": 9, "method": "tools/list"}, headers=h),
                    mcp_call(c, sid, "search", {"query": "Jaws"}),
                    c.get("/mcp", headers=h),
                    c.delete("/mcp", headers=h),
                ]
                for r in tries:
                    leak = SECRET in r.text
                    record(hostile, w, case, r.status_code, r.status_code == 404 and not leak)
                    assert r.status_code == 404 and not leak, (r.request.method, r.status_code, r.text[:200])
        finally:
            for c in intruders:
                c.close()
        t.join(60)
        r = done["r"]
        ok = r.status_code == 200 and '"finish_reason": "finished"' in r.text.replace('\\"', '"')
        record(hostile, w, "MCP session of another principal -> 404 (owner's call unharmed)", r.status_code, ok)
        assert ok, r.text[:500]
        r = alice.post("/mcp", json={"jsonrpc": "2.0", "id": 10, "method": "tools/list"}, headers=mcp_headers(sid))
        assert r.status_code == 200 and '"ask"' in r.text  # the session is alive for its owner
        assert alice.delete("/mcp", headers=mcp_headers(sid)).status_code == 200
    # an admin's sources over HTTP name no server path
    with client(w, "admin") as admin:
        sid = mcp_open(admin)
        r = mcp_call(admin, sid, "sources", {})
        ok = r.status_code == 200 and str(w["tmp"]) not in r.text and '"passages"' in r.text
        record(hostile, w, "MCP sources: no server path (admin)", r.status_code, ok)
        assert ok, r.text[:500]


# ------------------------------------------------------------------ 3. files
def test_restricted_files_are_private_whatever_the_umask(world, hostile, tmp_path: Path) -> None:
    w = world
    with client(w, "alice") as c:  # a run that reaches the restricted memo: traces, caches and audit written
        r = c.post("/v1/ask", json={"question": "Jaws director father classified", "strategy": "rag"})
        assert r.status_code == 200 and SECRET in r.text
    files = [p for p in (w["tmp"] / "state").rglob("*") if p.is_file()]
    files += [p for p in (w["tmp"] / "cache").rglob("*") if p.is_file()]
    names = {p.name for p in files}
    assert {"traces.sqlite", "traces.sqlite-wal", "audit.jsonl"} <= names, names
    assert any(n.endswith(".sqlite") for p in files for n in [p.name] if "cache" in str(p)), names
    for p in files:
        mode = stat.S_IMODE(p.stat().st_mode)
        record(hostile, w, "restricted file mode (umask 000)", 0, mode == 0o600)
        assert mode == 0o600, (p, oct(mode))
    # an index of ACL-labelled documents is its owner's only, whatever the umask; a public one is left alone
    old = os.umask(0)
    try:
        private = Index.build([write_jsonl(tmp_path / "r.jsonl", EN_DOCS)], tmp_path / "restricted")
        public = [{k: v for k, v in d.items() if k != "acl"} for d in EN_DOCS]
        Index.build([write_jsonl(tmp_path / "p.jsonl", public)], tmp_path / "public")  # acl "all": public
    finally:
        os.umask(old)
    for folder in (private.root, private.gen):
        mode = stat.S_IMODE(folder.stat().st_mode)
        record(hostile, w, "restricted file mode (umask 000)", 0, mode == 0o700)
        assert mode == 0o700, (folder, oct(mode))
    assert stat.S_IMODE((tmp_path / "public").stat().st_mode) == 0o777


# ------------------------------------------------------------------ 4. malformed filters
BAD_FILTERS: list[tuple[Any, str]] = [
    ({"ranges": {"year": "x"}}, "filters.ranges.year"),
    ({"ranges": {"year": [1]}}, "filters.ranges.year"),
    ({"ranges": {"year": [1, 2, 3]}}, "filters.ranges.year"),
    ({"ranges": {"year": {"lo": 1}}}, "filters.ranges.year"),
    ({"ranges": {"year": [[1], 2]}}, "filters.ranges.year[0]"),
    ({"ranges": "year"}, "filters.ranges"),
    ({"equals": {"version": {"a": 1}}}, "filters.equals.version"),
    ({"equals": {"version": []}}, "filters.equals.version"),
    ({"equals": {"version": [True]}}, "filters.equals.version[0]"),
    ({"equals": ["version"]}, "filters.equals"),
    ({"acl": [1]}, "filters.acl[0]"),
    ({"acl": {"x": 1}}, "filters.acl"),
    ({"version": {"a": 1}}, "filters.version"),
    ({"version": [None]}, "filters.version[0]"),
    ([1], "filters[0]"),
    ([None, "acl=all"], "filters[0]"),
]


def test_malformed_filters_are_422_with_the_path_on_every_surface(world, hostile) -> None:
    w = world
    case = "malformed filters -> 422 with the path"
    with client(w, "bob") as c:
        sid = mcp_open(c)
        for filters, path in BAD_FILTERS:
            for url, body in (
                ("/v1/ask", {"question": QUESTION, "filters": filters}),
                (
                    "/v1/chat/completions",
                    {"model": "sleuth-rag", "messages": [{"role": "user", "content": QUESTION}], "filters": filters},
                ),
            ):
                r = c.post(url, json=body)
                err = r.json().get("error", {}) if r.status_code == 422 else {}
                ok = r.status_code == 422 and err.get("param") == path and err["message"].startswith(path)
                record(hostile, w, case, r.status_code, ok)
                assert ok, (filters, url, r.status_code, r.text[:300])
            for tool, args in (("search", {"query": "Jaws"}), ("ask", {"question": QUESTION})):
                r = mcp_call(c, sid, tool, {**args, "filters": filters})
                ok = r.status_code == 200 and '"isError":true' in r.text.replace(" ", "") and path in r.text
                record(hostile, w, case, r.status_code, ok)
                assert ok, (filters, tool, r.text[:300])
    assert alive(w)


# ------------------------------------------------------------------ 5. bodies and slow clients
def raw_exchange(w: dict[str, Any], data: bytes, wait_s: float) -> tuple[bytes, float]:
    """Send ``data`` on a fresh connection, then read until the server answers or closes."""
    host, port = w["url"].removeprefix("http://").split(":")
    t = time.monotonic()
    with socket.create_connection((host, int(port)), timeout=wait_s) as s:
        if data:
            s.sendall(data)
        got = b""
        with contextlib.suppress(TimeoutError, ConnectionResetError):
            while chunk := s.recv(65536):
                got += chunk
    return got, time.monotonic() - t


def test_oversized_bodies_and_slow_uploads(world, hostile) -> None:
    w = world
    auth = {"Authorization": f"Bearer {w['keys']['bob']}"}
    big = b'{"question": "' + b"x" * (10 * 1024 * 1024) + b'"}'

    def chunks() -> Iterator[bytes]:
        for i in range(0, len(big), 64 * 1024):
            yield big[i : i + 64 * 1024]

    with httpx.Client(base_url=w["url"], timeout=30, headers=auth) as c:
        for path in ("/v1/ask", "/v1/chat/completions", "/mcp"):
            r = c.post(path, content=chunks(), headers={"Content-Type": "application/json", **MCP_HEADERS})
            assert "content-length" not in {k.lower() for k in r.request.headers}  # chunked
            ok = r.status_code == 413 and r.json()["error"]["code"] == "too_large"
            record(hostile, w, "10 MB chunked body -> 413", r.status_code, ok)
            assert ok, (path, r.status_code, r.text[:200])
            r = c.post(path, content=big, headers={"Content-Type": "application/json", **MCP_HEADERS})
            record(hostile, w, "10 MB declared body -> 413", r.status_code, r.status_code == 413)
            assert r.status_code == 413
    head = f"POST /v1/ask HTTP/1.1\r\nHost: x\r\nAuthorization: {auth['Authorization']}\r\nContent-Type: application/json\r\n"
    # a huge declared length and nothing sent: answered (413) instead of held open
    got, dt = raw_exchange(w, (head + "Content-Length: 1000000000000\r\n\r\n").encode(), 30)
    ok = got.startswith(b"HTTP/1.1 413") and dt < READ_TIMEOUT + 5
    record(hostile, w, "huge declared length, nothing sent -> 413", 413 if ok else 0, ok)
    assert ok, (got[:200], dt)
    # a small declared length and a body that never comes (or trickles): 408 within the read timeout
    for sent in (b"", b'{"question": '):
        got, dt = raw_exchange(w, (head + "Content-Length: 200\r\n\r\n").encode() + sent, 30)
        ok = got.startswith(b"HTTP/1.1 408") and dt < READ_TIMEOUT + 5
        record(hostile, w, "silent or partial body -> 408 after the read timeout", 408 if ok else 0, ok)
        assert ok, (got[:200], dt)
    assert alive(w)


def test_silent_connections_are_closed(world, hostile) -> None:
    """300 connections that send nothing, or half a request line, are all closed by the server."""
    w = world
    host, port = w["url"].removeprefix("http://").split(":")
    socks = []
    for i in range(300):
        s = socket.create_connection((host, int(port)), timeout=30)
        if i % 2:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        socks.append(s)
    t = time.monotonic()
    assert alive(w), "the server answers while they are open"
    closed = 0
    for s in socks:
        with contextlib.suppress(OSError):
            s.settimeout(max(0.1, READ_TIMEOUT + 10 - (time.monotonic() - t)))
            data = b""
            while chunk := s.recv(4096):
                data += chunk
            closed += 1  # the server closed it (after a 408 for the half-sent ones)
        s.close()
    for _ in range(closed):
        record(hostile, w, "silent connections closed by the server", 408, True)
    for _ in range(len(socks) - closed):
        record(hostile, w, "silent connections closed by the server", 0, False)
    assert closed == len(socks), f"{len(socks) - closed} connections were still open"
    assert alive(w)


# ------------------------------------------------------------------ 6. credentials, traces, audit
def test_credentials_in_the_url_and_unsupported_schemes(world, hostile) -> None:
    w = world
    key = w["keys"]["bob"]
    for param in ("api_key", "key", "token", "access_token", "Authorization"):
        for path in ("/v1/sources", "/v1/ask", "/mcp", "/healthz", "/no-such-route"):
            r = httpx.request("POST" if path in ("/v1/ask", "/mcp") else "GET", f"{w['url']}{path}?{param}={key}",
                              json={"question": QUESTION}, timeout=30)  # fmt: skip
            ok = r.status_code == 400 and key not in r.text and r.json()["error"]["code"] == "credentials_in_url"
            record(hostile, w, "credential in the URL -> 400", r.status_code, ok)
            assert ok, (param, path, r.status_code, r.text[:200])
    for header in (f"Basic {key}", f"Token {key}", "Bearer", "bEaReR", key, f"Digest {key}"):
        for method, path in (("GET", "/v1/sources"), ("POST", "/v1/ask"), ("POST", "/mcp")):
            r = httpx.request(method, w["url"] + path, headers={"Authorization": header, **MCP_HEADERS},
                              json={"question": QUESTION}, timeout=30)  # fmt: skip
            ok = r.status_code == 401 and key not in r.text
            record(hostile, w, "unsupported Authorization scheme -> 401", r.status_code, ok)
            assert ok, (header[:10], path, r.status_code, r.text[:200])
    wait_for(lambda: key not in w["log"].read_text("utf-8", errors="replace"), 1, "the log")
    assert key not in w["log"].read_text("utf-8", errors="replace"), "a key reached the server's log"
    assert "credentials-removed" in w["log"].read_text("utf-8", errors="replace"), "the access log ran"
    assert key not in (w["tmp"] / "state" / "audit.jsonl").read_text("utf-8")


def test_traces_are_per_principal_and_anonymous_runs_are_not_kept(world, hostile) -> None:
    w = world
    case = "trace of another principal / anonymous -> 404"
    runs = {}
    for who in (None, "alice", "bob"):
        with client(w, who) as c:
            r = c.post("/v1/ask", json={"question": QUESTION, "strategy": "rag"})
            assert r.status_code == 200
            runs[who] = r.json()["id"]
    for owner, tid in runs.items():
        for reader in (None, "alice", "bob", "admin"):
            with client(w, reader) as c:
                r = c.get(f"/v1/traces/{tid}")
            allowed = reader == owner and owner is not None
            leak = not allowed and r.status_code == 200
            hostile.add(case, held=r.status_code == (200 if allowed else 404), leak=leak, status=r.status_code)
            assert r.status_code == (200 if allowed else 404), (owner, reader, r.status_code)


def test_the_audit_log_records_the_refusals(world, hostile) -> None:
    """Runs after the cases above: each kind of refusal has its line, and no line holds a key."""
    w = world
    lines = [json.loads(x) for x in (w["tmp"] / "state" / "audit.jsonl").read_text("utf-8").splitlines()]
    denied = {}
    for x in lines:
        if x["event"] == "denied":
            denied.setdefault(x["status"], []).append(x)
    for status in (400, 401, 404, 408, 413):
        ok = bool(denied.get(status))
        hostile.add("audit log records each kind of refusal", held=ok)
        assert ok, (status, sorted(denied))
    assert all(x["principal"] in ("bob", "anonymous", "admin") for x in denied[404])
    text = json.dumps(lines)
    assert not any(k in text for k in w["keys"].values())
    assert alive(w)
