"""The transport seam: the in-process scripted model, the full client over httpx.MockTransport,
and the ``on_delta`` streaming option through every wrapper."""

from __future__ import annotations

import asyncio
import math

import pytest

from sleuth.llm import (
    LLM,
    CachedLLM,
    GenParams,
    LLMBadRequest,
    LLMUnavailable,
    OpenAICompatLLM,
    RateLimits,
    ScriptedLLM,
)
from sleuth.llm.scripted import ScriptedServer, ScriptExhausted, generate, tokens
from sleuth.server.guards import GuardedLLM, RunStopped, _Stop
from sleuth.strategies import get_strategy

MSG = [{"role": "user", "content": "capital of France?"}]
REPLY = "Paris is the capital.\nQuestion: and of Spain?"


def test_scripted_llm_answers_in_turn_and_records_calls() -> None:
    llm = ScriptedLLM(["one two three", "four"])
    assert isinstance(llm, LLM)
    a = llm.complete("p", GenParams(max_tokens=2))
    assert (a.text, a.finish_reason, a.usage.completion_tokens) == ("one two", "length", 2)
    b = llm.chat(MSG, GenParams(stop=["ou"], temperature=0.5))
    assert (b.text, b.finish_reason, b.model) == ("f", "stop", "scripted")
    assert [(c.kind, c.payload, c.streamed) for c in llm.calls] == [("complete", "p", False), ("chat", MSG, False)]
    # recorded parameters are resolved: what a client would send
    assert llm.calls[1].params == GenParams(max_tokens=256, temperature=0.5, stop=("ou",), seed=0)
    with pytest.raises(ScriptExhausted, match="no reply left"):
        llm.complete("again")


def test_scripted_llm_from_a_function_sees_payload_and_params() -> None:
    llm = ScriptedLLM(lambda payload, params: f"{len(payload)} {params.max_tokens}")
    assert llm.complete("abc", GenParams(max_tokens=9)).text == "3 9"
    assert llm.chat(MSG * 2).text == "2 256"


def test_stop_strings_cut_the_same_streamed_or_not_and_as_the_client_does() -> None:
    """ScriptedLLM, the client over MockTransport and a server ignoring stop all give one answer."""
    params = GenParams(stop=["on: a", "\n\n"], max_tokens=50)
    plain = ScriptedLLM([REPLY]).complete("q", params)
    pieces: list[str] = []
    streamed = ScriptedLLM([REPLY]).complete("q", params, on_delta=pieces.append)
    assert plain.text == streamed.text == "".join(pieces) == "Paris is the capital.\nQuesti"
    assert len(pieces) > 1 and plain.finish_reason == streamed.finish_reason == "stop"

    client = ScriptedServer([REPLY, REPLY]).client()
    over_http = client.complete("q", params)
    http_pieces: list[str] = []
    over_sse = client.complete("q", params, on_delta=http_pieces.append)
    assert over_http.text == over_sse.text == "".join(http_pieces) == plain.text
    assert (over_http.finish_reason, over_sse.finish_reason) == ("stop", "stop")


def test_generate_and_tokens() -> None:
    assert "".join(tokens(REPLY)) == REPLY and len(tokens(REPLY)) == 8
    text, finish, kept = generate("a b c d", GenParams(max_tokens=3, stop=()))
    assert (text, finish, kept) == ("a b c", "length", ["a", " b", " c"])
    assert generate("a b c", GenParams(max_tokens=3, stop=()))[1] == "stop"


def test_client_over_mock_transport_sends_the_usual_bodies() -> None:
    srv = ScriptedServer(lambda body: f"saw {len(body.get('messages') or [])}")
    llm = srv.client(model="", extra_body={"cache_prompt": True})  # model asked from /v1/models
    c = llm.chat(MSG, GenParams(max_tokens=7, stop="\n", seed=3))
    assert c.text == "saw 1" and llm.model == "scripted" and c.usage.prompt_tokens == 3
    assert list(srv.requests[-1]) == ["model", "messages", "max_tokens", "temperature", "seed", "stop", "cache_prompt"]
    assert srv.requests[-1]["stop"] == ["\n"] and srv.requests[-1]["seed"] == 3
    pieces: list[str] = []
    s = llm.complete("x y", on_delta=pieces.append)
    assert srv.requests[-1]["stream"] is True and "".join(pieces) == s.text == "saw 0"
    assert llm.stats.calls == 2 and llm.stats.failures == 0


def test_a_schema_reaches_the_scripted_model_and_the_scripted_servers_body() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    llm = ScriptedLLM(lambda payload, params: '{"n": 1}' if params.schema == schema else "plain")
    assert llm.chat(MSG, GenParams(schema=schema)).text == '{"n": 1}' and llm.calls[-1].params.schema == schema
    assert llm.chat(MSG).text == "plain"
    srv = ScriptedServer(lambda body: str(body.get("response_format", {}).get("type")))
    assert srv.client().chat(MSG, GenParams(schema=schema)).text == "json_schema"
    assert srv.requests[-1]["response_format"]["json_schema"]["schema"] == schema


def test_client_over_mock_transport_async_and_errors() -> None:
    srv = ScriptedServer(["alpha beta", "gamma"])
    llm = srv.client(max_retries=1)

    async def go() -> tuple[str, list[str]]:
        got: list[str] = []
        a = await llm.achat(MSG)
        await llm.acomplete("p", on_delta=got.append)
        await llm.aclose()
        return a.text, got

    text, got = asyncio.run(go())
    assert text == "alpha beta" and "".join(got) == "gamma"
    # a script that runs out answers 503: retried once, then LLMUnavailable after 2 attempts
    with pytest.raises(LLMUnavailable, match=r"HTTP 503.*after 2 attempts"):
        llm.complete("more")
    assert len(srv.requests) == 4 and llm.stats.failures == 1


def test_bad_request_through_the_seam() -> None:
    import httpx

    llm = OpenAICompatLLM(
        "http://x.invalid", "m", transport=httpx.MockTransport(lambda r: httpx.Response(400, json={"error": "nope"}))
    )
    with pytest.raises(LLMBadRequest, match="HTTP 400: nope"):
        llm.complete("p")


def test_cache_and_guard_forward_on_delta(tmp_path) -> None:
    srv = ScriptedServer(["one two three"])
    cached = CachedLLM(srv.client(), tmp_path / "c.sqlite")
    first: list[str] = []
    a = cached.complete("p", on_delta=first.append)
    again: list[str] = []
    b = cached.complete("p", on_delta=again.append)
    assert "".join(first) == a.text == "one two three" and len(first) == 3
    assert b.from_cache and again == [a.text] and len(srv.requests) == 1

    stop = _Stop(math.inf)
    scripted = ScriptedLLM(["w1 w2 w3 w4"])
    guarded = GuardedLLM(scripted, stop, temperature=0.2, seed=9)
    got: list[str] = []

    def on_delta(piece: str) -> None:
        got.append(piece)
        stop.cancelled.set()  # the run is cancelled after the first piece

    with pytest.raises(RunStopped, match="cancelled"):
        guarded.chat(MSG, GenParams(max_tokens=10), on_delta=on_delta)
    assert got == ["w1"]
    assert scripted.calls[0].params == GenParams(max_tokens=10, temperature=0.2, stop=(), seed=9)

    # through the real client: the stream is abandoned, the limiter slot given back, the failure counted
    srv = ScriptedServer(["w1 w2 w3 w4"])
    client = srv.client(limits=RateLimits(max_concurrency=1))
    stop = _Stop(math.inf)
    got.clear()
    with pytest.raises(RunStopped):
        GuardedLLM(client, stop).complete("p", on_delta=on_delta)
    assert got == ["w1"] and client.stats.failures == 1 and srv.requests[-1]["stream"] is True
    assert (
        client.limiter is not None and client.limiter._sem is not None and client.limiter._sem.acquire(blocking=False)
    )


def test_a_strategy_runs_on_the_scripted_model() -> None:
    llm = ScriptedLLM(["Let me think.\nSo the answer is: Paris"])
    r = get_strategy("cot", llm, None).run("What is the capital of France?")
    assert r.short_answer == "Paris" and r.llm_calls == 1
    (call,) = llm.calls
    assert call.kind == "chat" and "What is the capital of France?" in call.payload[-1]["content"]
