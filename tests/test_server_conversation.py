"""Follow-up questions on the service's surfaces: ``/v1/chat/completions`` (the OpenAI SDK sends
the whole conversation), ``/v1/ask`` with ``history`` and the MCP ``ask`` tool with ``history``, over
policy_zh on a real uvicorn server, a real index and a real OpenAI-compatible HTTP model server
on 127.0.0.1 (scripted answers: "那出境的呢？" after a question about the domestic deadline)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from fake_openai_server import FakeOpenAIServer
from serverkit import policy_model, running, sse_events
from sleuth.llm.client import OpenAICompatLLM
from sleuth.search import open_retriever
from sleuth.server import ServerSettings, create_app

FIRST = "国内出差的报销期限是多久？"
FOLLOW = "那出境的呢？"
ANSWER1 = "员工应在行程结束后30个自然日内提交报销申请。"
SCOPE = ["version=2025", "acl=all"]


@pytest.fixture(scope="module")
def world(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    policy = open_retriever(data_dir / "policy_zh" / "corpus.jsonl", cache_dir=tmp_path_factory.mktemp("idx"))
    with FakeOpenAIServer(script=policy_model()) as srv:
        app = create_app(ServerSettings(default_strategy="rag", max_concurrency=4, timeout_s=60),
                         llm=OpenAICompatLLM(srv.base_url, "fake-model"), retrievers={"policy": policy})  # fmt: skip
        with running(app) as url:
            yield {"url": url, "srv": srv}


def rewrites(srv: FakeOpenAIServer, since: int = 0) -> list[str]:
    return [r["body"]["messages"][0]["content"] for r in srv.requests[since:] if "完整问题" in json.dumps(r["body"], ensure_ascii=False)]  # fmt: skip


def test_the_openai_sdk_sends_the_conversation_and_the_follow_up_is_answered(world) -> None:
    srv, n = world["srv"], len(world["srv"].requests)
    client = openai.OpenAI(base_url=world["url"] + "/v1", api_key="none", max_retries=0, timeout=60)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "你是公司的差旅助手。filters: acl=finance"},
        {"role": "user", "content": FIRST},
    ]
    first = client.chat.completions.create(model="sleuth-rag", messages=messages, extra_body={"filters": SCOPE})
    assert "30个自然日" in first.choices[0].message.content
    assert rewrites(srv, n) == [], "a request with no earlier turns costs no rewrite call"
    messages += [
        {"role": "assistant", "content": first.choices[0].message.content},
        {"role": "tool", "content": "tool output that is not part of the conversation", "tool_call_id": "x"},
        {"role": "user", "content": FOLLOW},
    ]
    second = client.chat.completions.create(model="sleuth-rag", messages=messages, extra_body={"filters": SCOPE})
    text = second.choices[0].message.content
    assert "回国后60个自然日" in text and "境外差旅费用管理细则" in text
    reasoning = second.choices[0].message.model_extra["reasoning_content"]
    assert reasoning.splitlines()[1] == "Follow-up read as: 境外出差的报销期限是多久？", reasoning
    (prompt,) = rewrites(srv, n)
    assert f"用户：{FIRST}" in prompt and "助手：员工应在行程结束后30个自然日内" in prompt
    assert "差旅助手" not in prompt and "tool output" not in prompt  # system and tool messages are not history
    cites = second.model_extra["sleuth"]["citations"]
    assert cites and all(c.get("version") == "2025" for c in cites)


def test_the_stream_shows_the_rewrite_first(world) -> None:
    body = {"model": "sleuth-rag", "stream": True, "filters": SCOPE, "messages": [
        {"role": "user", "content": FIRST}, {"role": "assistant", "content": ANSWER1},
        {"role": "user", "content": FOLLOW}]}  # fmt: skip
    lines, content = [], ""
    with httpx.Client(base_url=world["url"], timeout=60) as c, c.stream("POST", "/v1/chat/completions", json=body) as r:
        for _, data in sse_events(r):
            if data == "[DONE]":
                break
            delta = data["choices"][0]["delta"] if data.get("choices") else {}
            lines += [x for x in (delta.get("reasoning_content") or "").splitlines() if x]
            content += delta.get("content") or ""
    assert lines[0].startswith("Strategy rag: 那出境的呢？") and lines[1].startswith("Follow-up read as: 境外出差")
    assert "回国后60个自然日" in content


def test_v1_ask_takes_a_history_and_the_option_turns_the_rewrite_off(world) -> None:
    srv = world["srv"]
    history = [{"role": "user", "content": FIRST}, {"role": "assistant", "content": ANSWER1}]
    with httpx.Client(base_url=world["url"], timeout=60) as c:
        r = c.post("/v1/ask", json={"question": FOLLOW, "history": history, "filters": SCOPE})
        assert r.status_code == 200, r.text
        res = r.json()
        assert [e["kind"] for e in res["trace"]][:3] == ["start", "llm", "rewrite"]
        rw = res["trace"][2]["data"]
        assert rw["original"] == FOLLOW and rw["question"] == res["question"] == "境外出差的报销期限是多久？"
        assert "回国后60个自然日" in res["answer"] and res["citations"][0]["doc_id"] == "trv-ovs-2025-01"
        n = len(srv.requests)
        off = c.post("/v1/ask", json={"question": FOLLOW, "history": history, "filters": SCOPE,
                                      "options": {"rewrite": False}}).json()  # fmt: skip
        assert rewrites(srv, n) == [] and not [e for e in off["trace"] if e["kind"] == "rewrite"]
        assert any(e["data"].get("type") == "history_unused" for e in off["trace"] if e["kind"] == "note")
        for bad, where in (
            ([{"role": "system", "content": "x"}], "history: history turn 1 has role 'system'"),
            ([{"role": "user"}], "history.0.content: Field required"),
            ("not a list", "history: history must be a list"),
            (
                [{"role": "user", "content": "a\x00b"}],
                "history: history turn 1 contains the binary control character NUL",
            ),
        ):
            r = c.post("/v1/ask", json={"question": FOLLOW, "history": bad})
            assert r.status_code == 422 and r.json()["error"]["message"].startswith(where), (bad, r.text)
        r = c.post("/v1/chat/completions", json={"model": "sleuth-rag", "messages": [
            {"role": "user", "content": "a\x00b"}, {"role": "user", "content": FOLLOW}]})  # fmt: skip
        assert r.status_code == 422 and "history turn 1" in r.json()["error"]["message"], r.text


def test_the_mcp_ask_tool_takes_a_history(world) -> None:
    pytest.importorskip("mcp")
    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    history = [{"role": "user", "content": FIRST}, {"role": "assistant", "content": ANSWER1}]

    async def main() -> None:
        async with (
            httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=60)) as hc,
            Client(streamable_http_client(world["url"] + "/mcp", http_client=hc)) as c,
        ):
            tools = {t.name: t for t in (await c.list_tools()).tools}
            assert "history" in tools["ask"].input_schema["properties"]
            steps: list[str] = []

            async def progress(n: float, total: float | None, message: str | None) -> None:
                steps.append(message or "")

            r = await c.call_tool("ask", {"question": FOLLOW, "history": history, "filters": SCOPE},
                                  progress_callback=progress)  # fmt: skip
            assert not r.is_error, r.content
            res = r.structured_content or json.loads(r.content[0].text)
            assert "回国后60个自然日" in res["answer"]
            assert any(s.startswith("rewrite: 境外出差的报销期限是多久？") for s in steps), steps
            bad = await c.call_tool("ask", {"question": FOLLOW, "history": [{"role": "system", "content": "x"}]})
            assert bad.is_error and "role 'system'" in " ".join(getattr(x, "text", "") for x in bad.content)

    anyio.run(main)
