"""Issue 53: every surface gives the reader the same answer text, without the format's scaffold lines.

A real uvicorn server on 127.0.0.1 over the real policy_zh index; the model is scripted with the embedded
1.5B model's real replies to policy_zh q1 (its step-back question, its verdict, and RAG's reply as the
issue recorded it) and to q5 (its answerability reply), answered by which prompt asks, so the order of calls does not matter."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from serverkit import running
from sleuth.llm.scripted import ScriptedLLM
from sleuth.search import open_retriever
from sleuth.server import ServerSettings, create_app

Q1 = "行程取消后，退票费用还要按普通差旅期限提交吗？"
SCOPE = ["version=2025", "region=境内", "acl=all"]
RAG_REPLY = (
    "根据文档，行程取消后退票费用的报销期限是30个自然日。第十五条规定，退票费用应在退款结算完成后15个自然日内提交[1]。"
    "\n所以答案是：30"
)


def _reply(prompt: Any, params: Any) -> str:
    text = json.dumps(prompt, ensure_ascii=False)
    if "退一步的问题" in text:
        return "行程取消后，退票费用的计算依据是什么？"
    if "结论：<先写" in text:
        return "依据：第十五条\n结论：不是"
    if "结论：<问题的答案>" in text:  # the answerability call, on q5 (the model's real reply)
        return "依据：第21条\n结论：无"
    return RAG_REPLY


@pytest.fixture(scope="module")
def server(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    policy = open_retriever(data_dir / "policy_zh" / "corpus.jsonl", cache_dir=tmp_path_factory.mktemp("idx"))
    app = create_app(ServerSettings(model="scripted"), llm=ScriptedLLM(_reply), retrievers={"policy": policy})
    with running(app) as url:
        yield url, app


def test_the_openai_endpoint_and_v1_ask_give_step_backs_answer_with_the_clause(server: Any) -> None:
    url, _ = server
    sdk = openai.OpenAI(base_url=url + "/v1", api_key="unused-on-loopback")
    reply = sdk.chat.completions.create(
        model="sleuth-step-back", messages=[{"role": "user", "content": Q1}], extra_body={"filters": SCOPE}
    )
    content = reply.choices[0].message.content or ""
    assert content.startswith("不是。\n依据：第十五条 因公取消行程产生的退票费用") and "15个自然日" in content
    asked = httpx.post(url + "/v1/ask", json={"question": Q1, "strategy": "step-back", "filters": SCOPE}, timeout=60)
    body = asked.json()
    assert body["answer"] == content.split("\n\n")[0] or content.startswith(body["answer"])
    assert body["short_answer"] == "不是" and [c["doc_id"] for c in body["citations"]] == ["trv-2025-02"]


def test_no_surface_shows_the_scaffold_line(server: Any) -> None:
    url, _ = server
    sdk = openai.OpenAI(base_url=url + "/v1", api_key="unused-on-loopback")
    reply = sdk.chat.completions.create(
        model="sleuth-rag", messages=[{"role": "user", "content": Q1}], extra_body={"filters": SCOPE}
    )
    content = reply.choices[0].message.content or ""
    assert "所以答案是" not in content and "15个自然日" in content
    asked = httpx.post(url + "/v1/ask", json={"question": Q1, "strategy": "rag", "filters": SCOPE}, timeout=60).json()
    assert "所以答案是" not in asked["answer"] and asked["answer"].endswith("15个自然日内提交[1]。")


def test_every_surface_says_the_accessible_documents_do_not_settle_an_out_of_scope_question(server: Any) -> None:
    """policy_zh q5 in the all-staff scope (the audit ratio is in a finance-only file): the same fixed sentence
    on /v1/ask and the OpenAI endpoint, citing nothing."""
    url, _ = server
    q5 = "内部审计对差旅报销的抽查比例是多少？"
    asked = httpx.post(url + "/v1/ask", json={"question": q5, "strategy": "step-back", "filters": SCOPE}, timeout=60)
    body = asked.json()
    assert body["answer"] == body["short_answer"] == "根据现有可查阅的材料无法回答" and body["citations"] == []
    sdk = openai.OpenAI(base_url=url + "/v1", api_key="unused-on-loopback")
    reply = sdk.chat.completions.create(
        model="sleuth-step-back", messages=[{"role": "user", "content": q5}], extra_body={"filters": SCOPE}
    )
    content = reply.choices[0].message.content or ""
    assert content.startswith("根据现有可查阅的材料无法回答") and "fin-audit" not in content and "5%" not in content
