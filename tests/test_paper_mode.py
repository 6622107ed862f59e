"""``mode=paper``: each strategy's published steps, and the mode reaching every surface.

The scripted model answers by which prompt asks (its template's own words), so one script serves
every strategy; the index is real (a few HotpotQA-train paragraphs, shortened).  Per strategy the
paper mode's sequence of LLM steps is asserted, then that the mode arrives through the CLI, the
Python API, ``/v1/ask`` (a field), the OpenAI endpoint (a ``-paper`` model name) and the MCP
``ask`` tool (a parameter): each run's ``start`` event says ``mode: paper`` and lists no repair.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from serverkit import running
from sleuth.llm.scripted import ScriptedLLM
from sleuth.search import open_retriever
from sleuth.search.base import Retriever
from sleuth.server import ServerSettings, create_app
from sleuth.strategies import STRATEGIES, get_strategy

QUESTION = "Harold Brent Wallis as producer and Humphrey Bogart as actor collaborated to make what 1942 film?"
DOCS = {
    "Hal B. Wallis": "Harold Brent Wallis (October 19, 1898 – October 5, 1986) was an American film producer. He is "
    'best remembered for producing "Casablanca" (1942), with such film stars as Humphrey Bogart.',
    "Humphrey Bogart": "Humphrey DeForest Bogart (December 25, 1899 – January 14, 1957) was an American actor whose "
    'films include "The Maltese Falcon" and "Casablanca".',
    "Casablanca (film)": "Casablanca is a 1942 American romantic drama film produced by Hal B. Wallis and starring "
    "Humphrey Bogart.",
}


def reply(payload: Any, params: Any) -> str:
    """A plausible reply to each strategy's prompts, chosen by the prompt's own words."""
    if isinstance(payload, str):  # completion mode: Self-Ask's scaffold, Search-o1's reasoning
        if "Are follow up questions needed here:" in payload:
            mine = payload.rsplit("Are follow up questions needed here:", 1)[-1]
            if "Intermediate answer:" not in mine:
                return " Yes.\nFollow up: What 1942 film did Harold Brent Wallis produce?\n"
            return "So the final answer is: Casablanca\n"
        if "<|begin_search_result|>" in payload.rsplit("Question:", 1)[-1]:
            return "The film is Casablanca. \\boxed{Casablanca}"
        return " I need the film. <|begin_search_query|> Harold Brent Wallis 1942 film "
    text = str(payload[-1]["content"])
    if "Step back from the question" in text or "退一步" in text:
        return "What films did Harold Brent Wallis produce?"
    if "Background:" in text:  # Step-back's answer
        return "Background: Wallis produced Casablanca [1].\nAnswer: Casablanca [1].\nShort answer: Casablanca"
    if "Write one short search query" in text:  # RAT's query
        return "Harold Brent Wallis 1942 film Humphrey Bogart"
    if "Draft answer:" in text:  # RAT's revision
        return "Harold Brent Wallis produced Casablanca (1942) [1].\nSo the answer is: Casablanca"
    if "Facts:" in text:  # Reason-in-Documents
        return "Harold Brent Wallis produced Casablanca (1942) [1]."
    if "Documents" in text:  # Self-Ask's extraction, the reading pass
        return "Casablanca"
    return "Harold Brent Wallis produced Casablanca.\n\nIt starred Humphrey Bogart.\nSo the answer is: Casablanca"


#: the paper's steps, in order, for this question
PAPER_STEPS = {
    "self-ask": ["scaffold 1", "extract 1", "scaffold 2"],
    "rat": ["draft", "query 1", "revise 1", "query 2", "revise 2"],
    "step-back": ["step back", "answer"],
    "search-o1": ["reason 1", "reason-in-documents 1", "reason 2"],
}


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Retriever:
    d = tmp_path_factory.mktemp("paper")
    rows = [{"id": t, "title": t, "text": x, "acl": "all"} for t, x in DOCS.items()]
    (d / "docs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return open_retriever(str(d / "docs.jsonl"), cache_dir=d / "idx")


@pytest.mark.parametrize("name", list(PAPER_STEPS))
def test_the_paper_mode_runs_the_published_steps_and_no_repair(name: str, index: Retriever) -> None:
    r = get_strategy(name, ScriptedLLM(reply), index, k=2, lang="en", mode="paper").run(QUESTION)
    assert [e.data["step"] for e in r.trace.of("llm")] == PAPER_STEPS[name]
    start = r.trace.of("start")[0].data
    assert start["mode"] == "paper" and start["repairs"] == [] and not r.trace.of("repair")
    assert "Casablanca" in r.answer and r.finish_reason == "finished"
    # the default mode runs the same published steps, and its repairs only add to them
    d = get_strategy(name, ScriptedLLM(reply), index, k=2, lang="en").run(QUESTION)
    steps = [e.data["step"] for e in d.trace.of("llm")]
    assert steps[: len(PAPER_STEPS[name])] == PAPER_STEPS[name]
    assert d.trace.of("start")[0].data["repairs"] and d.trace.of("start")[0].data["mode"] == "default"


def test_step_back_paper_mode_shows_both_routes_deduplicated_in_order(index: Retriever) -> None:
    r = get_strategy("step-back", ScriptedLLM(reply), index, k=2, lang="en", mode="paper").run(QUESTION)
    found = [p["id"] for e in r.trace.of("search") for p in e.data["passages"]]
    assert [p.id for p in r.citations] == list(dict.fromkeys(found))  # every passage it drew on, ungrounded
    d = get_strategy("step-back", ScriptedLLM(reply), index, k=2, lang="en").run(QUESTION)
    assert [e.data["name"] for e in d.trace.of("repair")] == ["rerank", "grounding"]


def test_every_strategy_takes_the_mode() -> None:
    for cls in STRATEGIES.values():
        assert cls.Options(mode="paper").mode == "paper"


# -- the surfaces ----------------------------------------------------------------------------------
def test_the_cli_takes_mode_paper(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from sleuth.cli import main

    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps({"id": t, "title": t, "text": x}) + "\n" for t, x in DOCS.items()))
    for command in (["ask", "Q?"], ["chat"]):  # sleuth chat takes the same --mode
        with pytest.raises(SystemExit) as exc:
            main([*command, "-s", "rag", "--mode", "published", "--corpus", str(corpus)])
        assert exc.value.code == 2 and "mode must be default or paper" in " ".join(capsys.readouterr().err.split())


def test_the_cli_runs_mode_paper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """``sleuth ask ... --mode paper --json``: the run's start event says so (the model is the fake server's)."""
    from fake_openai_server import FakeOpenAIServer
    from sleuth.cli import main

    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps({"id": t, "title": t, "text": x}) + "\n" for t, x in DOCS.items()))
    with FakeOpenAIServer() as fake:
        args = ["ask", QUESTION, "-s", "self-ask", "--mode", "paper", "--corpus", str(corpus), "--json", "-q"]
        with contextlib.suppress(SystemExit):
            main([*args, "--base-url", fake.base_url, "--max-steps", "2"])
    out = json.loads(capsys.readouterr().out)
    start = next(e for e in out["trace"] if e["kind"] == "start")["data"]
    assert start["mode"] == "paper" and start["repairs"] == []


@pytest.fixture(scope="module")
def server(index: Retriever) -> Any:
    app = create_app(ServerSettings(model="scripted"), llm=ScriptedLLM(reply), retrievers={"wiki": index})
    with running(app) as url:
        yield url


def _start(trace: list[dict[str, Any]]) -> dict[str, Any]:
    return next(e for e in trace if e["kind"] == "start")["data"]


def test_v1_ask_takes_a_mode_field(server: str) -> None:
    body = {"question": QUESTION, "strategy": "self-ask", "mode": "paper", "lang": "en"}
    r = httpx.post(server + "/v1/ask", json=body, timeout=60)
    assert r.status_code == 200, r.text
    assert _start(r.json()["trace"])["mode"] == "paper" and _start(r.json()["trace"])["repairs"] == []
    bad = httpx.post(server + "/v1/ask", json={**body, "mode": "published"}, timeout=60)
    assert bad.status_code == 422
    by_option = httpx.post(
        server + "/v1/ask", json={"question": QUESTION, "strategy": "rat", "options": {"mode": "paper"}}, timeout=60
    )
    assert _start(by_option.json()["trace"])["mode"] == "paper"


def test_the_openai_endpoint_takes_a_paper_model_name(server: str) -> None:
    import openai

    sdk = openai.OpenAI(base_url=server + "/v1", api_key="unused-on-loopback")
    msg = [{"role": "user", "content": QUESTION}]
    paper = sdk.chat.completions.create(model="sleuth-search-o1-paper", messages=msg)
    default = sdk.chat.completions.create(model="sleuth-search-o1", messages=msg)
    ids = [(c.model_extra or {})["sleuth"]["trace_id"] for c in (paper, default)]
    traces = [httpx.get(f"{server}/v1/traces/{i}", timeout=30).json() for i in ids]
    assert [_start(t["trace"])["mode"] for t in traces] == ["paper", "default"]
    assert "Casablanca" in (paper.choices[0].message.content or "")
    assert sdk.models.retrieve("sleuth-search-o1-paper").id == "sleuth-search-o1-paper"


def test_the_mcp_ask_tool_takes_a_mode(server: str) -> None:
    pytest.importorskip("mcp")
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    @contextlib.asynccontextmanager
    async def client() -> AsyncIterator[Client]:
        async with (
            httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=60)) as hc,
            Client(streamable_http_client(server + "/mcp", http_client=hc)) as c,
        ):
            yield c

    async def main() -> None:
        async with client() as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            assert "mode" in tools["ask"].input_schema["properties"]
            r = await c.call_tool("ask", {"question": QUESTION, "strategy": "self-ask", "mode": "paper"})
            res = json.loads(r.content[0].text)
            trace = json.loads((await c.read_resource(f"trace://{res['trace_id']}")).contents[0].text)
            events = trace["trace"] if isinstance(trace, dict) else trace
            assert _start(events)["mode"] == "paper"

    anyio.run(main)
