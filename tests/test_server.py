"""The HTTP service against a real uvicorn server on 127.0.0.1: the embedded 135M model,
real indexes, the OpenAI Python SDK as a client, and a slow fake OpenAI-compatible
server where a run must be slow (429 when saturated, timeouts, clients that leave)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from fake_openai_server import FakeOpenAIServer
from serverkit import running, sse_events
from sleuth.llm import get_llm
from sleuth.search import open_retriever
from sleuth.server import ServerConfigError, ServerSettings, create_app
from sleuth.server.schemas import AskResult, ChatCompletion

KEY = "test-key-0123456789"
FAST = {"max_tokens": 48, "max_steps": 2, "k": 2}


# -- shared real parts ---------------------------------------------------------------
@pytest.fixture(scope="module")
def llm(tiny_llm: Any) -> Any:
    return tiny_llm  # uncached: real model time between the streamed steps


@pytest.fixture(scope="module")
def wiki(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return open_retriever(data_dir / "quickstart" / "wiki_passages.jsonl", cache_dir=tmp_path_factory.mktemp("idx"))


@pytest.fixture(scope="module")
def policy(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return open_retriever(data_dir / "policy_zh" / "corpus.jsonl", cache_dir=tmp_path_factory.mktemp("idx"))


@pytest.fixture(scope="module")
def server(llm: Any, wiki: Any, policy: Any) -> Any:
    """The model server used by most tests: keyed, two sources, default limits."""
    app = create_app(
        ServerSettings(model="smollm2-135m", api_keys=(KEY,), max_concurrency=4, timeout_s=300),
        llm=llm,
        retrievers={"wiki": wiki, "policy": policy},
    )
    with running(app) as url:
        yield url


def client(url: str, key: str | None = KEY, timeout: float = 300) -> httpx.Client:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(base_url=url, headers=headers, timeout=timeout)


def sdk(url: str, key: str = KEY) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0, timeout=300)


# -- spec -----------------------------------------------------------------------------------
def test_openapi_spec_is_valid_and_complete() -> None:
    from openapi_spec_validator import validate

    app = create_app(ServerSettings(), open_on_startup=False)
    spec = app.openapi()
    validate(spec)
    paths = spec["paths"]
    for p in ("/v1/ask", "/v1/chat/completions", "/v1/models", "/v1/traces/{trace_id}", "/v1/strategies", "/healthz"):
        assert p in paths, p
    ask = paths["/v1/ask"]["post"]
    assert set(ask["responses"]) >= {"200", "401", "413", "422", "429", "504"}
    assert "text/event-stream" in ask["responses"]["200"]["content"]
    assert ask["responses"]["422"]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorResponse")
    assert "HTTPBearer" in spec["components"]["securitySchemes"]


def test_non_loopback_bind_needs_a_key() -> None:
    with pytest.raises(ServerConfigError, match="without an API key"):
        create_app(ServerSettings(host="0.0.0.0"), open_on_startup=False)
    create_app(ServerSettings(host="0.0.0.0", api_keys=("k",)), open_on_startup=False)
    create_app(ServerSettings(host="::1"), open_on_startup=False)


# -- /v1/ask -----------------------------------------------------------------------------------
@pytest.mark.model
def test_ask_returns_the_full_result_and_its_trace(server: str, data_dir: Path) -> None:
    with client(server) as c:
        r = c.post(
            "/v1/ask",
            json={"question": "Who was Evan Morris?", "strategy": "rag", "index": "wiki", "filters": [], **FAST},
        )
        assert r.status_code == 200, r.text
        res = AskResult.model_validate(r.json())
        assert res.finish_reason == "finished" and res.answer
        assert res.model == "smollm2-135m"  # the server's model, opened once, not some default
        assert res.citations and all(p.source and p.text for p in res.citations)
        kinds = [e.kind for e in res.trace]
        assert kinds[0] == "start" and kinds[-1] == "answer" and "search" in kinds and "llm" in kinds
        assert r.headers["x-sleuth-trace-id"] == res.id

        got = c.get(f"/v1/traces/{res.id}")
        assert got.status_code == 200 and got.json()["answer"] == res.answer
        # another scope, another key, no key: nothing (and no hint that the trace exists)
        assert c.get(f"/v1/traces/{res.id}", params={"filters": "acl=all"}).status_code == 404
        assert client(server, "wrong").get(f"/v1/traces/{res.id}").status_code == 401
        assert client(server, None).get(f"/v1/traces/{res.id}").status_code == 401


@pytest.mark.model
def test_ask_streams_each_step_then_the_result(server: str) -> None:
    body = {"question": "Where did Evan Morris work?", "strategy": "self-ask", "index": "wiki", "stream": True, **FAST}
    seen: list[tuple[str, Any, float]] = []
    with client(server) as c, c.stream("POST", "/v1/ask", json=body) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        for name, data in sse_events(r):
            seen.append((name, data, time.monotonic()))
    names = [n for n, _, _ in seen]
    assert names[-1] == "result" and names.count("result") == 1
    steps = [d for n, d, _ in seen if n == "step"]
    assert steps[0]["kind"] == "start" and steps[-1]["kind"] == "answer"
    assert any(s["kind"] == "llm" for s in steps)
    result = AskResult.model_validate(seen[-1][1])
    assert len(result.trace) == len(steps)  # every step was streamed, in order
    assert [e.kind for e in result.trace] == [s["kind"] for s in steps]
    # the steps arrived while the run went on, not all at once at the end
    assert seen[-1][2] - seen[0][2] > 0.05


@pytest.mark.model
def test_scope_filters_are_the_only_scope_a_request_gets(server: str, data_dir: Path) -> None:
    acl = {}
    for line in (data_dir / "policy_zh" / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        d = json.loads(line)
        acl[d["id"]] = {d["acl"]} if isinstance(d["acl"], str) else set(d["acl"])
    q = "内部审计对差旅报销的抽查比例是多少？"
    with client(server) as c:
        for filters in (["acl=all"], {"acl": ["all"], "version": "2025"}, {"acl": ["all"]}):
            r = c.post(
                "/v1/ask", json={"question": q, "strategy": "rag", "index": "policy", "filters": filters, **FAST}
            )
            assert r.status_code == 200, r.text
            res = r.json()
            ids = [p["id"] for p in res["citations"]]
            ids += [p["id"] for e in res["trace"] if e["kind"] == "search" for p in e["data"]["passages"]]
            assert ids, "the search found nothing at all"
            assert all(acl[i.split("#")[0]] & {"all"} for i in ids), ids
            assert "fin-audit-2025" not in json.dumps(res, ensure_ascii=False)
        r = c.post(
            "/v1/ask",
            json={"question": q, "strategy": "rag", "index": "policy", "filters": ["acl=all,finance"], **FAST},
        )
        ids = [p["id"] for e in r.json()["trace"] if e["kind"] == "search" for p in e["data"]["passages"]]
        assert any(i.startswith("fin-audit-2025") for i in ids), ids  # the wider scope does see it


# -- OpenAI protocol --------------------------------------------------------------------------
@pytest.mark.model
def test_openai_sdk_lists_the_sleuth_models(server: str) -> None:
    ids = [m.id for m in sdk(server).models.list()]
    assert {"sleuth-self-ask", "sleuth-search-o1", "sleuth-rag", "sleuth-rat", "sleuth-step-back"} <= set(ids)
    assert sdk(server).models.retrieve("sleuth-self-ask").id == "sleuth-self-ask"


@pytest.mark.model
def test_openai_sdk_chat_self_ask_gives_citations(server: str) -> None:
    resp = sdk(server).chat.completions.create(
        model="sleuth-self-ask",
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Who employed Evan Morris as a lobbyist?"},
        ],
        max_tokens=64,
        extra_body={"index": "wiki", "max_steps": 2, "k": 2},
    )
    ChatCompletion.model_validate(resp.model_dump())
    assert resp.object == "chat.completion" and resp.model == "sleuth-self-ask"
    msg = resp.choices[0].message
    extra = resp.model_extra["sleuth"]
    assert extra["trace_id"] and extra["finish_reason"]
    cites = extra["citations"]
    assert cites, f"self-ask returned no citations: {msg.content!r}"
    assert all(c["source"] and c["text"] for c in cites)
    assert "Sources:" in msg.content and "[1] " in msg.content and cites[0]["source"] in msg.content
    assert resp.usage.total_tokens > 0
    assert msg.model_extra.get("reasoning_content", "").startswith("Strategy self-ask")


@pytest.mark.model
def test_openai_sdk_chat_streams_reasoning_then_answer(server: str) -> None:
    stream = sdk(server).chat.completions.create(
        model="sleuth-rag",
        messages=[{"role": "user", "content": "Who was Evan Morris?"}],
        stream=True,
        stream_options={"include_usage": True},
        max_tokens=48,
        extra_body={"index": "wiki", "k": 2},
    )
    reasoning, content, last_extra, usage, finish = [], [], None, None, None
    order = []
    for chunk in stream:
        assert chunk.object == "chat.completion.chunk"
        if chunk.usage:
            usage = chunk.usage
        if (chunk.model_extra or {}).get("sleuth"):
            last_extra = chunk.model_extra["sleuth"]
        if not chunk.choices:
            continue
        d = chunk.choices[0].delta
        if (d.model_extra or {}).get("reasoning_content"):
            reasoning.append(d.model_extra["reasoning_content"])
            order.append("r")
        if d.content:
            content.append(d.content)
            order.append("c")
        finish = chunk.choices[0].finish_reason or finish
    assert reasoning and any(r.startswith("Search:") for r in reasoning)
    assert content and order.index("c") > order.index("r")  # steps first, then the answer
    assert finish == "stop" and usage is not None and usage.total_tokens > 0
    assert last_extra and last_extra["citations"] and "Sources:" in "".join(content)


# -- protection ---------------------------------------------------------------------------------
@pytest.mark.model
def test_auth_is_required_when_a_key_is_set(server: str) -> None:
    for key in (None, "nope"):
        with client(server, key) as c:
            r = c.post("/v1/ask", json={"question": "hi"})
            assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
            assert "API key" in r.json()["error"]["message"]
            assert c.get("/v1/models").status_code == 401
    with pytest.raises(openai.AuthenticationError):
        sdk(server, "nope").chat.completions.create(model="sleuth-direct", messages=[{"role": "user", "content": "x"}])
    with client(server, None) as c:  # the page and the health check stay open
        assert c.get("/healthz").status_code == 200
        assert c.get("/").status_code == 200
    with client(server) as c:
        assert c.get("/v1/strategies").status_code == 200


@pytest.mark.model
def test_bad_requests_get_clear_errors(server: str) -> None:
    with client(server) as c:
        r = c.post(
            "/v1/ask",
            content=b'{"question": "' + b"x" * 1_000_000 + b'"}',
            headers={"content-type": "application/json"},
        )
        assert r.status_code == 413 and "limit" in r.json()["error"]["message"]

        def err(body: dict[str, Any], path: str = "/v1/ask", status: int = 422) -> str:
            r = c.post(path, json=body)
            assert r.status_code == status, r.text
            return r.json()["error"]["message"]

        assert err({"question": "   "}) == "question: the question is empty"
        assert "limit is 4000" in err({"question": "why " * 1500})
        assert "binary" in err({"question": "a\x00b"})
        assert "unknown strategy 'nope'" in err({"question": "q", "strategy": "nope"})
        assert "unknown source" in err({"question": "q", "index": "nope"})
        assert "filters" in err({"question": "q", "filters": ["acl"]})
        assert "not offered" in err({"question": "q", "model": "qwen2.5-1.5b"})
        assert err({"question": "q", "k": 0}).startswith("k:")
        assert err({"question": "q", "bogus": 1}).startswith("bogus:")
        chat = "/v1/chat/completions"
        assert "does not exist" in err({"model": "gpt-4o", "messages": [{"role": "user", "content": "q"}]}, chat, 404)
        assert "no user message" in err({"model": "sleuth-rag", "messages": [{"role": "system", "content": "q"}]}, chat)
        assert "empty" in err({"model": "sleuth-rag", "messages": [{"role": "user", "content": ""}]}, chat)
    with pytest.raises(openai.UnprocessableEntityError, match="empty"):
        sdk(server).chat.completions.create(model="sleuth-rag", messages=[{"role": "user", "content": " "}])


# -- load, timeouts, clients that leave (a slow fake LLM server makes runs slow) ----------------
@pytest.fixture
def slow_llm() -> Any:
    with FakeOpenAIServer(fault="slow", slow_s=1.5) as fake:
        yield fake, get_llm("fake-model", base_url=fake.base_url, api_key="x", cache=False, max_retries=0)


def _active(url: str) -> int:
    return httpx.get(url + "/healthz").json()["active"]


def _wait_idle(url: str, limit: float = 30) -> None:
    t = time.monotonic()
    while _active(url) and time.monotonic() - t < limit:
        time.sleep(0.1)
    assert _active(url) == 0


def test_saturated_server_answers_429_with_retry_after(slow_llm: Any) -> None:
    _, llm = slow_llm
    app = create_app(ServerSettings(max_concurrency=2, timeout_s=60), llm=llm)
    with running(app) as url:
        body = {"question": "Why is the sky blue?", "strategy": "direct", "stream": True}
        with client(url) as c1, client(url) as c2, client(url) as c3:
            with c1.stream("POST", "/v1/ask", json=body) as s1, c2.stream("POST", "/v1/ask", json=body) as s2:
                assert s1.status_code == s2.status_code == 200
                t = time.monotonic()
                r = c3.post("/v1/ask", json={**body, "stream": False})
                assert time.monotonic() - t < 1.0  # turned away at once, not queued
                assert r.status_code == 429, r.text
                assert int(r.headers["retry-after"]) >= 1
                assert "busy" in r.json()["error"]["message"] and "limit is 2" in r.json()["error"]["message"]
                with pytest.raises(openai.RateLimitError):
                    sdk(url).chat.completions.create(model="sleuth-direct", messages=[{"role": "user", "content": "q"}])
                assert httpx.get(url + "/healthz", timeout=1).status_code == 200  # the loop stays responsive
                for s in (s1, s2):
                    assert [n for n, _ in sse_events(s)][-1] == "result"
            _wait_idle(url)
            r = c3.post("/v1/ask", json={**body, "stream": False})
            assert r.status_code == 200 and r.json()["answer"].startswith("Echo")


def test_a_run_past_the_timeout_gets_504_or_finish_reason(slow_llm: Any, policy: Any) -> None:
    fake, llm = slow_llm
    app = create_app(ServerSettings(max_concurrency=2, timeout_s=1.0), llm=llm, retrievers={"policy": policy})
    with running(app) as url, client(url) as c:
        body = {"question": "Why is the sky blue?", "strategy": "rat"}
        t = time.monotonic()
        r = c.post("/v1/ask", json=body)
        assert r.status_code == 504 and time.monotonic() - t < 1.4
        err = r.json()["error"]
        assert err["type"] == "timeout" and "1 s timeout" in err["message"] and err["trace_id"]
        with c.stream("POST", "/v1/ask", json={**body, "stream": True}) as s:
            events = list(sse_events(s))
        assert events[-1][0] == "result" and events[-1][1]["finish_reason"] == "timeout"
        assert events[0][1]["kind"] == "start"
        _wait_idle(url)  # the stopped runs did finish and gave their slots back
        got = c.get(f"/v1/traces/{err['trace_id']}")
        assert got.status_code == 200 and got.json()["finish_reason"] == "timeout"
        n = len(fake.requests)
        time.sleep(2)
        assert len(fake.requests) == n  # nothing keeps calling the model after a timeout


def test_a_client_that_leaves_stops_its_run_and_others_go_on(slow_llm: Any, policy: Any) -> None:
    fake, llm = slow_llm
    app = create_app(ServerSettings(max_concurrency=2, timeout_s=60), llm=llm, retrievers={"policy": policy})
    with running(app) as url:
        body = {"question": "Why is the sky blue?", "strategy": "rat", "stream": True}
        with client(url) as c, c.stream("POST", "/v1/ask", json=body) as s:
            first = next(sse_events(s))
            assert first[0] == "step" and first[1]["kind"] == "start"
        # the connection is gone: the run stops at its next model call and frees its slot
        _wait_idle(url, 10)
        n = len(fake.requests)
        time.sleep(2)
        assert len(fake.requests) == n
        with client(url) as c:
            r = c.post("/v1/ask", json={**body, "stream": False, "strategy": "direct"})
            assert r.status_code == 200 and r.json()["finish_reason"] == "finished"


def test_a_hundred_concurrent_requests_get_answers_or_clean_429s(slow_llm: Any) -> None:
    import asyncio

    _, llm = slow_llm
    app = create_app(ServerSettings(max_concurrency=4, timeout_s=60), llm=llm)
    with running(app) as url:
        peak = 0

        async def one(c: httpx.AsyncClient, i: int) -> httpx.Response:
            return await c.post("/v1/ask", json={"question": f"Question number {i}?", "strategy": "direct"})

        async def watch(c: httpx.AsyncClient, stop: asyncio.Event) -> None:
            nonlocal peak
            while not stop.is_set():
                peak = max(peak, (await c.get("/healthz")).json()["active"])
                await asyncio.sleep(0.05)

        async def main() -> list[httpx.Response]:
            limits = httpx.Limits(max_connections=200, max_keepalive_connections=0)
            async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as c:
                stop = asyncio.Event()
                w = asyncio.create_task(watch(c, stop))
                rs = await asyncio.gather(*(one(c, i) for i in range(100)))
                stop.set()
                await w
                return rs

        rs = asyncio.run(main())
        codes = [r.status_code for r in rs]
        assert set(codes) <= {200, 429}, codes
        ok, busy = [r for r in rs if r.status_code == 200], [r for r in rs if r.status_code == 429]
        assert len(ok) >= 4 and len(busy) >= 50, (len(ok), len(busy))
        assert all(r.json()["answer"].startswith("Echo") for r in ok)
        assert all(int(r.headers["retry-after"]) >= 1 and r.json()["error"]["code"] == "busy" for r in busy)
        assert peak <= 4
        _wait_idle(url)


# -- traces that survive a restart ------------------------------------------------------------
@pytest.mark.model
def test_traces_in_a_sqlite_file_survive_a_restart(llm: Any, wiki: Any, tmp_path: Path) -> None:
    db = tmp_path / "traces" / "traces.sqlite"
    settings = ServerSettings(model="smollm2-135m", api_keys=(KEY, "other-key-0123"), trace_db=str(db))
    with running(create_app(settings, llm=llm, retrievers={"wiki": wiki})) as url, client(url) as c:
        r = c.post("/v1/ask", json={"question": "Who was Evan Morris?", "strategy": "rag", "index": "wiki", **FAST})
        assert r.status_code == 200, r.text
        first = r.json()
    assert db.is_file() and KEY not in db.read_bytes().decode("latin-1")
    # a new server process on the same file: the trace is there, for its owner only
    with running(create_app(settings, llm=llm, retrievers={"wiki": wiki})) as url, client(url) as c:
        got = c.get(f"/v1/traces/{first['id']}")
        assert got.status_code == 200 and got.json() == first
        assert c.get(f"/v1/traces/{first['id']}", params={"filters": "acl=all"}).status_code == 404
        assert client(url, "other-key-0123").get(f"/v1/traces/{first['id']}").status_code == 404


def test_sqlite_trace_store_bounds_owners_and_bad_paths(tmp_path: Path) -> None:
    from sleuth.server.traces import SqliteTraceStore, TraceStoreError

    owner, other = ("k1", "scope-a"), ("k2", "scope-a")
    s = SqliteTraceStore(tmp_path / "t.sqlite", capacity=3, max_bytes=10_000)
    for i in range(5):
        s.put(f"t{i}", owner, {"i": i, "text": "é" * 10})
    assert len(s) == 3 and s.get("t0", owner) is None and s.get("t4", owner) == {"i": 4, "text": "é" * 10}
    assert s.get("t4", other) is None and s.get("t4", ("k1", "scope-b")) is None
    s.put("big", owner, {"text": "x" * 20_000})  # larger than the whole store: not kept, nothing evicted
    assert s.get("big", owner) is None and len(s) == 3
    s.put("mid", owner, {"text": "y" * 9_980})  # evicts the oldest until the bytes fit
    assert s.get("mid", owner) is not None and len(s) == 1 and s.nbytes <= 10_000
    raw = (tmp_path / "t.sqlite").read_bytes()
    assert b"k1" not in raw and b"scope-a" not in raw  # owners are salted hashes
    s2 = SqliteTraceStore(tmp_path / "t.sqlite", capacity=3, max_bytes=10_000)  # reopened: same salt, same data
    assert s2.get("mid", owner) is not None
    with pytest.raises(TraceStoreError, match="cannot use"):
        SqliteTraceStore(tmp_path)  # a directory
    with pytest.raises(ServerConfigError):
        create_app(ServerSettings(trace_db=str(tmp_path)), open_on_startup=False)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_trace_retention_is_per_principal(tmp_path: Path, kind: str) -> None:
    """Another principal's flood of runs evicts only its own traces; past the byte bound, the
    biggest holder loses its oldest first, and the trace just stored is never the one evicted."""
    from sleuth.server.traces import SqliteTraceStore

    def store(capacity: int, max_bytes: int) -> Any:
        if kind == "memory":
            return SqliteTraceStore(None, capacity, max_bytes)
        return SqliteTraceStore(tmp_path / f"t{capacity}-{max_bytes}.sqlite", capacity, max_bytes)

    alice, bob = ("alice", "s"), ("bob", "s")
    s = store(3, 1_000_000)
    for i in range(3):
        s.put(f"a{i}", alice, {"i": i})
    for i in range(50):
        s.put(f"b{i}", bob, {"i": i})
    assert [s.get(f"a{i}", alice) for i in range(3)] == [{"i": 0}, {"i": 1}, {"i": 2}]
    assert s.get("b49", bob) == {"i": 49} and s.get("b46", bob) is None and s.count("bob") == 3
    s = store(100, 2_000)
    s.put("a0", alice, {"t": "a" * 500})
    for i in range(6):
        s.put(f"b{i}", bob, {"t": "b" * 300})
    assert s.get("a0", alice) is not None and s.nbytes <= 2_000  # bob, the biggest holder, lost his oldest
    assert s.get("b0", bob) is None and s.get("b5", bob) is not None
    s.put("a1", alice, {"t": "a" * 1_500})  # alice now holds the most: her oldest goes, never the new one
    assert s.get("a1", alice) is not None and s.nbytes <= 2_000
