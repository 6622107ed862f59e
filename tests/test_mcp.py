"""The MCP server through the official SDK's client, over both transports.

* stdio: ``python -m sleuth mcp`` as a subprocess over a real index of policy_zh, its model a
  scripted fake OpenAI-compatible server (so an ask takes well under a second);
* Streamable HTTP: ``/mcp`` of a real uvicorn ``sleuth serve`` app with a principals file, each
  client sending its own ``Authorization`` header.

Both: tools listed with schemas, ``search`` and ``ask`` with provenance, a progress notification
per step, the ``trace://`` resource, a cancelled ``ask`` (the run stops, the server goes on),
malformed arguments as error results.  Over HTTP, every principal's results, progress messages
and traces hold no passage outside its scope, and a widening ``filters`` is an error result."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

pytest.importorskip("mcp")
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult

from fake_openai_server import FakeOpenAIServer
from reliability.conftest import ScriptedModel, fast_client
from serverkit import running
from sleuth.search.base import Filters, Passage
from sleuth.search.index import Index
from sleuth.server import ServerSettings, create_app

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "内部审计对差旅报销的抽查比例是多少？"
#: each principal's widest scope, as written in the principals file below
HELD = {
    "anonymous": Filters.make({"region": "境内", "version": "2025"}, acl=["all"]),
    "all": Filters.make(acl=["all"]),
    "finance": Filters.make(acl=["all", "finance"]),
    "hr": Filters.make(acl=["all", "hr"]),
    "region": Filters.make({"region": "境外"}, acl=["all"]),
}


def leaky_model() -> ScriptedModel:
    """Aims every query at the audit and HR files and copies every document it is shown.

    Its answer is a statement, not "不知道": an answer that abstains cites nothing (grounded
    citations), and these tests check the citations' shape and scope."""
    return ScriptedModel(answer="按公司规定执行", follow_up=QUESTION, query="内部审计 抽查比例 虚假报销 处分 警告 记过",
                         step_back="内部审计、员工奖惩和虚假报销处分有哪些一般规定？")  # fmt: skip


def docs(data_dir: Path) -> list[Passage]:
    out = []
    for line in (data_dir / "policy_zh" / "corpus.jsonl").read_text("utf-8").splitlines():
        if line.strip():
            r = json.loads(line)
            acl = r.get("acl")
            out.append(Passage(id=r["id"], text=r["text"], doc_id=r["id"], region=r.get("region", ""),
                               version=str(r.get("version", "")),
                               acl=[acl] if isinstance(acl, str) else list(acl or [])))  # fmt: skip
    return out


def leaks(text: str, forbidden: list[Passage]) -> list[str]:
    """Forbidden passages whose id or any 16-character piece of text appears in ``text``."""
    found = []
    for d in forbidden:
        pieces = [d.text[i : i + 16] for i in range(0, max(1, len(d.text) - 16), 8)]
        if d.id in text or any(p in text for p in pieces if p not in QUESTION):
            found.append(d.id)
    return found


def payload(r: CallToolResult) -> dict[str, Any]:
    assert not r.is_error, r.content
    if r.structured_content is not None:
        return dict(r.structured_content)
    return json.loads(r.content[0].text)


def error_text(r: CallToolResult) -> str:
    assert r.is_error, r
    return " ".join(getattr(c, "text", "") for c in r.content)


@pytest.fixture(scope="module")
def index(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Index:
    return Index.build([data_dir / "policy_zh" / "corpus.jsonl"], tmp_path_factory.mktemp("mcp") / "index")


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(script=leaky_model()) as srv:
        yield srv


@pytest.fixture(scope="module")
def slow() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(script=leaky_model(), fault="slow", slow_s=0.7) as srv:
        yield srv


# ---------------------------------------------------------------------------------- stdio
def stdio_params(index: Index, base_url: str, cache: Path) -> StdioServerParameters:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), SLEUTH_CACHE_DIR=str(cache), OMP_WAIT_POLICY="PASSIVE")
    env.pop("SLEUTH_SERVER_KEY", None)
    args = ["-m", "sleuth", "mcp", "--index", f"policy={index.root}", "--model", "fake-model",
            "--base-url", base_url, "--strategy", "rag", "--timeout", "30"]  # fmt: skip
    return StdioServerParameters(command=sys.executable, args=args, env=env, cwd=str(ROOT))


async def check_tools(c: Client) -> None:
    tools = {t.name: t for t in (await c.list_tools()).tools}
    assert set(tools) >= {"ask", "search", "sources"}
    ask = tools["ask"].input_schema
    assert ask["required"] == ["question"]
    assert {"strategy", "filters", "k", "max_steps"} <= set(ask["properties"])
    assert "self-ask" in ask["properties"]["strategy"]["description"]
    assert {"query", "k", "filters", "mode"} <= set(tools["search"].input_schema["properties"])
    assert all(t.description for t in tools.values())


async def check_malformed(c: Client) -> None:
    bad: list[tuple[str, dict[str, Any], str]] = [
        ("ask", {}, "question"),
        ("ask", {"question": 42}, "question"),
        ("ask", {"question": "   "}, "question"),
        ("ask", {"question": "a\x00b"}, "NUL"),
        ("ask", {"question": "why\x1b[2J?"}, "U+001B"),
        ("ask", {"question": "ok?", "strategy": "nonsense"}, "unknown strategy 'nonsense'"),
        ("ask", {"question": "ok?", "options": {"warp_speed": 9}}, "warp_speed"),
        ("ask", {"question": "ok?", "k": "many"}, "k"),
        ("ask", {"question": "ok?", "max_steps": 0}, "max_steps"),
        ("ask", {"question": "ok?", "filters": ["nonsense"]}, "filters"),
        ("search", {"query": "差旅", "filters": {"acl\x00": "all"}}, "NUL"),
        ("search", {"query": "差旅", "mode": "psychic"}, "mode"),
        ("search", {"query": "差旅", "mode": "dense"}, "no vectors"),
        ("search", {"query": ""}, "empty"),
        ("search", {"query": "差旅", "source": "nowhere"}, "unknown source 'nowhere'"),
    ]
    for tool, args, words in bad:
        msg = error_text(await c.call_tool(tool, args))
        assert words in msg, (tool, args, msg)
        assert "Traceback" not in msg


async def ask_with_progress(c: Client, args: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    steps: list[str] = []

    async def progress(n: float, total: float | None, message: str | None) -> None:
        steps.append(message or "")

    return payload(await c.call_tool("ask", args, progress_callback=progress)), steps


async def cancel_an_ask(c: Client) -> None:
    """Start an ask on the slow model, cancel it mid-run; the server must answer the next call."""
    steps: list[str] = []

    async def progress(n: float, total: float | None, message: str | None) -> None:
        steps.append(message or "")

    t = time.monotonic()
    with anyio.move_on_after(1.5) as scope:
        await c.call_tool("ask", {"question": QUESTION, "strategy": "self-ask", "max_steps": 5},
                          progress_callback=progress)  # fmt: skip
    assert scope.cancel_called and time.monotonic() - t < 3, "the ask was not cancelled"
    assert steps and steps[0].startswith("start"), steps
    r = payload(await c.call_tool("search", {"query": "差旅 报销"}))
    assert r["passages"]


def test_stdio_tools_search_ask_progress_trace_and_bad_arguments(index, fake, tmp_path) -> None:
    async def main() -> None:
        async with Client(stdio_params(index, fake.base_url, tmp_path)) as c:
            await check_tools(c)
            found = payload(await c.call_tool("search", {"query": "差旅费用 报销期限", "k": 3}))
            assert found["finish_reason"] == "finished" and 1 <= len(found["passages"]) <= 3
            p = found["passages"][0]
            assert p["id"] and p["title"] and p["version"] and p["text"]
            info = payload(await c.call_tool("sources", {}))
            assert info["sources"][0]["name"] == "policy" and info["sources"][0]["stats"]["passages"] > 0
            res, steps = await ask_with_progress(c, {"question": QUESTION, "strategy": "self-ask", "max_steps": 2})
            assert res["finish_reason"] in ("finished", "step_limit") and res["answer"]
            assert res["citations"] and {"id", "title", "version", "found_by", "text"} <= set(res["citations"][0])
            assert len(steps) >= 3 and steps[0].startswith("start") and res["trace_id"] in steps[0]
            assert any(s.startswith("search: ") for s in steps)
            trace = await c.read_resource(f"trace://{res['trace_id']}")
            stored = json.loads(trace.contents[0].text)
            assert stored["id"] == res["trace_id"] and stored["trace"][0]["kind"] == "start"
            narrowed = payload(await c.call_tool("search", {"query": "内部审计", "filters": ["acl=finance"], "k": 10}))
            assert narrowed["passages"] and all(x["id"].startswith("fin-") for x in narrowed["passages"])
            await check_malformed(c)
            with pytest.raises(Exception, match="no trace"):
                await c.read_resource("trace://0123abcd")

    anyio.run(main)


def test_sleuth_mcp_help_and_a_bad_flag(index, tmp_path) -> None:
    params = stdio_params(index, "http://127.0.0.1:9/v1", tmp_path)
    run = [params.command, "-m", "sleuth", "mcp"]
    out = subprocess.run([*run, "--help"], capture_output=True, text=True, env=params.env, cwd=params.cwd, timeout=60)
    assert out.returncode == 0
    for words in ("stdio", "ask", "search", "sources", "trace://", "local user", "/mcp", "--index", "--base-url"):
        assert words in out.stdout, words
    bad = subprocess.run([*run, "--strategy", "nonsense"], capture_output=True, text=True, env=params.env,
                         cwd=params.cwd, timeout=60)  # fmt: skip
    assert bad.returncode == 2 and "unknown strategy 'nonsense'" in bad.stderr and "Traceback" not in bad.stderr
    assert bad.stdout == ""  # stdout is the protocol's


def test_stdio_a_lone_surrogate_is_refused_and_the_server_goes_on(index, fake, tmp_path) -> None:
    """The SDK's JSON parser refuses a lone surrogate escape before any tool sees it (no
    client of the SDK can send one: it cannot encode it); the server must live on."""
    params = stdio_params(index, fake.base_url, tmp_path)
    p = subprocess.Popen([params.command, *params.args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, env=params.env, cwd=params.cwd, text=True)  # fmt: skip
    assert p.stdin is not None and p.stdout is not None
    try:
        hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
        for line in (
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ask","arguments":{"question":"a\\ud800b"}}}',
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tools/call",
                "params": {"name": "search", "arguments": {"query": "差旅"}},
            },
        ):
            p.stdin.write((line if isinstance(line, str) else json.dumps(line)) + "\n")
        p.stdin.flush()
        answers = [json.loads(p.stdout.readline()) for _ in range(2)]
        assert [a.get("id") for a in answers] == [1, 3], answers
        assert answers[1]["result"]["structuredContent"]["passages"]
    finally:
        p.stdin.close()
        p.wait(20)
    assert p.returncode == 0


def test_stdio_cancel_stops_the_run_and_the_server_goes_on(index, slow, tmp_path) -> None:
    async def main() -> None:
        async with Client(stdio_params(index, slow.base_url, tmp_path)) as c:
            await cancel_an_ask(c)
            n = len(slow.requests)
            await anyio.sleep(1.6)
            assert len(slow.requests) <= n + 1  # at most the model call in flight finishes
            res = payload(await c.call_tool("ask", {"question": "差旅报销期限？", "strategy": "direct"}))
            assert res["finish_reason"] == "finished"

    anyio.run(main)


# ---------------------------------------------------------------------------------- HTTP
@pytest.fixture(scope="module")
def world(index, fake, slow, tmp_path_factory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("mcp-http")
    keys = {n: secrets.token_urlsafe(24) for n in ("all", "finance", "hr", "region")}

    def sha(k: str) -> str:
        return hashlib.sha256(k.encode()).hexdigest()

    (tmp / "principals.toml").write_text(
        "[anonymous]\nacl = ['all']\nfilters = {region = '境内', version = '2025'}\n"
        f"[principals.all]\nkey_sha256 = ['{sha(keys['all'])}']\nacl = ['all']\n"
        f"[principals.finance]\nkey_sha256 = ['{sha(keys['finance'])}']\nacl = ['all', 'finance']\n"
        f"[principals.hr]\nkey_sha256 = ['{sha(keys['hr'])}']\nacl = ['all', 'hr']\nsources = ['policy']\n"
        f"[principals.region]\nkey_sha256 = ['{sha(keys['region'])}']\nacl = ['all']\nfilters = ['region=境外']\n",
        encoding="utf-8",
    )
    audit = tmp / "audit.jsonl"
    settings = ServerSettings(max_concurrency=4, timeout_s=30, principals=str(tmp / "principals.toml"),
                              audit_log=str(audit), default_strategy="rag")  # fmt: skip
    app = create_app(settings, llm=fast_client(fake.base_url), retrievers={"policy": index, "mirror": index})
    slow_app = create_app(settings, llm=fast_client(slow.base_url, timeout=5), retrievers={"policy": index})
    with running(app) as url, running(slow_app) as slow_url:
        yield {"url": url, "slow_url": slow_url, "keys": {**keys, "anonymous": None}, "audit": audit}


@contextlib.asynccontextmanager
async def http(url: str, token: str | None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60)) as hc,
        Client(streamable_http_client(url + "/mcp", http_client=hc)) as c,
    ):
        yield c


def test_http_tools_progress_and_bad_arguments(world) -> None:
    async def main() -> None:
        async with http(world["url"], world["keys"]["all"]) as c:
            await check_tools(c)
            res, steps = await ask_with_progress(c, {"question": QUESTION, "strategy": "self-ask", "max_steps": 2})
            assert res["answer"] and res["citations"] and len(steps) >= 3 and steps[0].startswith("start")
            await check_malformed(c)

    anyio.run(main)


def test_every_principal_stays_in_scope_in_every_tool_result(world, data_dir) -> None:
    corpus = docs(data_dir)

    async def one(who: str) -> str:
        forbidden = [d for d in corpus if not HELD[who].matches(d)]
        seen = ""
        async with http(world["url"], world["keys"][who]) as c:
            for query in (QUESTION, "内部审计 抽查比例 虚假报销 处分", "境外 差旅 住宿"):
                r = payload(await c.call_tool("search", {"query": query, "k": 12}))
                text = json.dumps(r, ensure_ascii=False)
                assert not leaks(text, forbidden), (who, "search", leaks(text, forbidden))
                seen += text
            for strategy in ("rag", "self-ask", "step-back"):
                res, steps = await ask_with_progress(c, {"question": QUESTION, "strategy": strategy, "max_steps": 3})
                if who == "anonymous":  # anonymous callers are one principal: their runs are not kept
                    with pytest.raises(MCPError, match="not kept"):
                        await c.read_resource(f"trace://{res['trace_id']}")
                    trace = ""
                else:
                    trace = (await c.read_resource(f"trace://{res['trace_id']}")).contents[0].text
                for where, text in (("ask", json.dumps(res, ensure_ascii=False)), ("progress", "\n".join(steps)),
                                    ("trace", trace)):  # fmt: skip
                    assert not leaks(text, forbidden), (who, strategy, where, leaks(text, forbidden))
                seen += json.dumps(res, ensure_ascii=False) + trace
            info = json.dumps(payload(await c.call_tool("sources", {})), ensure_ascii=False)
            assert "mirror" not in info if who == "hr" else "mirror" in info
            # asking for more than the scope is an error result, never a wider search
            for args in (
                {"query": "内部审计", "filters": ["acl=finance"]},
                {"query": "审计", "filters": {"acl": "hr"}},
            ):
                if who not in ("finance", "hr"):
                    assert "outside your scope" in error_text(await c.call_tool("search", args))
            widen = {"question": QUESTION, "filters": ["region=境内,境外"]}
            if who in ("anonymous", "region"):
                assert "outside your scope" in error_text(await c.call_tool("ask", widen))
            if who == "hr":
                assert "outside your scope" in error_text(
                    await c.call_tool("search", {"query": "x", "source": "mirror"})
                )
        return seen

    async def main() -> None:
        seen = {who: await one(who) for who in HELD}
        assert "fin-audit-2025" in seen["finance"] and "hr-reward-2025" in seen["hr"]  # positive controls
        assert "trv-ovs-2025-01" in seen["region"]
        audit_doc = [d for d in corpus if d.id == "fin-audit-2025"]
        assert leaks(seen["finance"], audit_doc), "negative control: the leak check finds a passage that is there"

    anyio.run(main)
    lines = [json.loads(x) for x in world["audit"].read_text("utf-8").splitlines()]
    assert {x["event"] for x in lines} >= {"run", "search", "denied"}
    assert all(x["endpoint"] == "/mcp" for x in lines if x["event"] in ("run", "search"))


def test_a_model_outage_is_a_finish_reason_and_the_server_goes_on(index) -> None:
    with FakeOpenAIServer(fault="503") as down:
        app = create_app(ServerSettings(timeout_s=30), llm=fast_client(down.base_url), retrievers={"policy": index})

        async def main() -> None:
            async with http(url, None) as c:
                for strategy in ("direct", "rag", "self-ask"):
                    res = payload(await c.call_tool("ask", {"question": QUESTION, "strategy": strategy}))
                    assert res["finish_reason"] == "llm_unavailable" and res["error"], res
                assert payload(await c.call_tool("search", {"query": "差旅"}))["passages"]

        with running(app) as url:
            anyio.run(main)


def test_traces_belong_to_their_principal(world) -> None:
    async def main() -> None:
        async with http(world["url"], world["keys"]["finance"]) as c:
            res = payload(await c.call_tool("ask", {"question": QUESTION, "strategy": "rag"}))
        async with http(world["url"], world["keys"]["all"]) as c:
            with pytest.raises(Exception, match="no trace"):
                await c.read_resource(f"trace://{res['trace_id']}")

    anyio.run(main)


def test_http_auth_is_the_rest_routes_auth(world) -> None:
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}  # fmt: skip
    headers = {"Accept": "application/json, text/event-stream", "Authorization": "Bearer not-a-key"}
    r = httpx.post(world["url"] + "/mcp", json=init, headers=headers, timeout=10)
    assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
    assert r.headers["www-authenticate"] == "Bearer"


def test_http_a_lone_surrogate_is_a_parse_error_and_the_session_goes_on(world) -> None:
    """No SDK client can encode a lone surrogate; sent raw, the SDK's parser answers -32700."""
    h = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {world['keys']['all']}"}
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
    with httpx.Client(base_url=world["url"], headers=h, timeout=30) as c:
        r = c.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello})
        assert r.status_code == 200
        c.headers.update({"mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"})
        assert c.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}).status_code == 202
        raw = (
            '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ask","arguments":{"question":"a\\ud800"}}}'
        )
        r = c.post("/mcp", content=raw, headers={"content-type": "application/json"})
        assert r.status_code == 400 and r.json()["error"]["code"] == -32700
        call = {"name": "search", "arguments": {"query": "差旅"}}
        r = c.post("/mcp", json={"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call})
        assert r.status_code == 200 and '"passages"' in r.text


def test_http_a_client_that_leaves_mid_ask_stops_its_run(world, slow) -> None:
    async def main() -> None:
        started = anyio.Event()

        async def progress(n: float, total: float | None, message: str | None) -> None:
            started.set()

        async def leave() -> None:
            async with http(world["slow_url"], world["keys"]["all"]) as c:
                await c.call_tool("ask", {"question": QUESTION, "strategy": "self-ask"}, progress_callback=progress)

        async with anyio.create_task_group() as tg:
            tg.start_soon(leave)
            with anyio.fail_after(10):
                await started.wait()
            tg.cancel_scope.cancel()  # the client goes away: session closed, connection dropped
        deadline = time.monotonic() + 10
        while httpx.get(world["slow_url"] + "/healthz").json()["active"] and time.monotonic() < deadline:
            await anyio.sleep(0.1)
        assert httpx.get(world["slow_url"] + "/healthz").json()["active"] == 0
        async with http(world["slow_url"], world["keys"]["all"]) as c:
            assert payload(await c.call_tool("search", {"query": "差旅"}))["passages"]

    anyio.run(main)


def test_http_cancel_stops_the_run_and_the_server_goes_on(world, slow) -> None:
    async def main() -> None:
        async with http(world["slow_url"], world["keys"]["all"]) as c:
            await cancel_an_ask(c)
            deadline = time.monotonic() + 10
            while httpx.get(world["slow_url"] + "/healthz").json()["active"] and time.monotonic() < deadline:
                await anyio.sleep(0.1)
            assert httpx.get(world["slow_url"] + "/healthz").json()["active"] == 0

    anyio.run(main)
    runs = [json.loads(x) for x in world["audit"].read_text("utf-8").splitlines()]
    assert any(x["event"] == "run" and x["outcome"] == "cancelled" for x in runs), runs[-3:]


@pytest.mark.model
def test_ask_on_the_small_embedded_model(tiny_llm, data_dir, tmp_path) -> None:
    """The real 135M model behind /mcp: an answer, grounded citations, one progress note per step."""
    from sleuth.search import open_retriever

    wiki = open_retriever(data_dir / "quickstart" / "wiki_passages.jsonl", cache_dir=tmp_path)
    app = create_app(ServerSettings(timeout_s=300, default_strategy="rag"), llm=tiny_llm, retrievers={"wiki": wiki})

    async def main() -> None:
        async with http(url, None) as c:
            args = {"question": "Who directed Jaws?", "k": 2, "options": {"max_tokens": 32}}
            res, steps = await ask_with_progress(c, args)
            assert res["finish_reason"] == "finished" and res["answer"], res
            # grounded citations: only passages the answer rests on (the corpus has no Jaws passage, so
            # the tiny model's answer usually rests on none); each one says which search found it
            assert isinstance(res["citations"], list) and all(c["found_by"] for c in res["citations"])
            assert steps[0].startswith("start") and any(s.startswith("search: ") for s in steps)

    with running(app) as url:
        anyio.run(main)
