"""The OpenAI-compatible client against a real HTTP server on 127.0.0.1 (tests/fake_openai_server.py)."""

from __future__ import annotations

import asyncio
import threading
import time

import httpx
import pytest

from fake_openai_server import FakeOpenAIServer
from sleuth.config import load_env
from sleuth.llm import (
    CachedLLM,
    GenParams,
    LLMAuthError,
    LLMBadRequest,
    LLMBadResponse,
    LLMTimeout,
    LLMUnavailable,
    OpenAICompatLLM,
    RateLimits,
    get_llm,
)
from sleuth.llm.http_policy import parse_retry_after
from sleuth.llm.limits import TokenBucket
from sleuth.llm.settings import resolve_llm_settings
from sleuth.llm.stops import StopCutter
from sleuth.llm.urls import api_base
from sleuth.llm.wire import usage_from

MSG = [{"role": "user", "content": "what is the capital of France?"}]


def streamed(call, payload, params=None) -> str:
    """The pieces a streamed call hands to ``on_delta``, joined (checked against the returned text)."""
    pieces: list[str] = []
    c = call(payload, params, on_delta=pieces.append)
    assert "".join(pieces) == c.text
    return c.text


def client(srv: FakeOpenAIServer, **kw) -> OpenAICompatLLM:
    kw.setdefault("backoff_base", 0.01)
    kw.setdefault("timeout", 10)
    return OpenAICompatLLM(srv.base_url, "fake-model", **kw)


# ------------------------------------------------------------------ basics
def test_chat_and_completion_roundtrip(fake_server):
    llm = client(fake_server)
    c = llm.chat(MSG, GenParams(max_tokens=50, temperature=0.0, seed=7, stop=["\n\n"]))
    assert c.text == "Echo: what is the capital of France?"
    assert c.finish_reason == "stop"
    assert c.usage.completion_tokens == 7 and c.usage.prompt_tokens > 0
    assert c.latency_s > 0 and c.model == "fake-model" and not c.from_cache
    body = fake_server.requests[-1]["body"]
    assert body["max_tokens"] == 50 and body["seed"] == 7 and body["stop"] == ["\n\n"] and body["temperature"] == 0.0
    assert fake_server.requests[-1]["path"] == "/v1/chat/completions"

    c = llm.complete("Question: who?\nAnswer:", GenParams(max_tokens=3))
    assert c.text == "Echo: Answer:"
    assert fake_server.requests[-1]["path"] == "/v1/completions"
    c = llm.complete("one two three four five six", GenParams(max_tokens=3))
    assert c.finish_reason == "length" and c.usage.completion_tokens == 3
    llm.close()


def test_api_base_normalisation():
    assert api_base("http://127.0.0.1:8080") == "http://127.0.0.1:8080/v1"
    assert api_base("http://127.0.0.1:8080/") == "http://127.0.0.1:8080/v1"
    assert api_base("https://api.openai.com/v1/") == "https://api.openai.com/v1"
    assert (
        api_base("https://dashscope.aliyuncs.com/compatible-mode/v1")
        == "https://dashscope.aliyuncs.com/compatible-mode/v1"
    )
    assert api_base("http://h:1/v1/chat/completions") == "http://h:1/v1"


def test_server_url_without_v1_and_model_discovery(fake_server):
    llm = OpenAICompatLLM(fake_server.url)  # no /v1, no model: asked from /v1/models
    assert llm.chat(MSG, GenParams(max_tokens=5)).text.startswith("Echo:")
    assert llm.model == "fake-model"
    assert llm.health()


def test_client_side_stop_when_server_ignores_it():
    with FakeOpenAIServer(fault="ignore-stop", script=["Paris.\nQuestion: next one"]) as srv:
        llm = client(srv)
        c = llm.complete("Q", GenParams(stop=["\nQuestion:"], max_tokens=50))
        assert c.text == "Paris." and c.finish_reason == "stop"
        # streamed: the stop string arrives split over two chunks ("\nQuestion: " is its own token)
        assert streamed(llm.complete, "Q", GenParams(stop=["on: next"], max_tokens=50)) == "Paris.\nQuesti"
        assert streamed(llm.chat, MSG, GenParams(stop=["\n"], max_tokens=50)) == "Paris."
        assert llm.complete("Q", GenParams(stop="\nQuestion:")).text == "Paris."  # a lone string is one stop sequence


def test_stop_cutter_holds_back_partial_stop():
    cut = StopCutter(["<END>"])
    out = [cut.feed(x) for x in ["abc<", "EN", "D>tail"]]
    assert "".join(out) == "abc" and cut.done
    cut = StopCutter(["<END>"])
    assert "".join([cut.feed("ab<E"), cut.feed("x"), cut.flush()]) == "ab<Ex"


def test_max_tokens_on_never_ending_output():
    with FakeOpenAIServer(fault="endless") as srv:
        c = client(srv).complete("go", GenParams(max_tokens=12))
        assert c.finish_reason == "length" and c.usage.completion_tokens == 12
        assert c.text.split() == ["more"] * 12


def test_empty_completion(fake_server):
    fake_server.push_faults("empty")
    c = client(fake_server).chat(MSG)
    assert c.text == "" and c.usage.completion_tokens == 0


# ------------------------------------------------------------------ retries
def test_429_retry_after_seconds_is_honoured():
    with FakeOpenAIServer(retry_after=0.4) as srv:
        srv.push_faults("429")
        llm = client(srv)
        t0 = time.perf_counter()
        c = llm.chat(MSG)
        assert time.perf_counter() - t0 >= 0.4
        assert c.text.startswith("Echo:") and c.latency_s >= 0.4
        assert srv.stats.requests == 2 and llm.stats.retries == 1


def test_429_retry_after_http_date_and_missing_header():
    with FakeOpenAIServer(retry_after=1) as srv:
        srv.push_faults("429-date", "429-no-retry-after")
        llm = client(srv)
        assert llm.chat(MSG).text.startswith("Echo:")
        assert srv.stats.requests == 3


def test_parse_retry_after():
    assert parse_retry_after("2", cap=60) == 2.0
    assert parse_retry_after("1000", cap=30) == 30.0
    assert parse_retry_after("garbage", cap=30) is None
    assert parse_retry_after(None, cap=30) is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", cap=30) == 0.0  # in the past


@pytest.mark.parametrize("fault", ["500", "502", "503"])
def test_5xx_retried_then_ok(fake_server, fault):
    fake_server.push_faults(fault, fault)
    llm = client(fake_server)
    assert llm.chat(MSG).text.startswith("Echo:")
    assert fake_server.stats.requests == 3


def test_persistent_5xx_raises_unavailable_after_retries():
    with FakeOpenAIServer(fault="503") as srv:
        with pytest.raises(LLMUnavailable, match=r"HTTP 503.*after 3 attempts") as ei:
            client(srv, max_retries=2).complete("x")
        assert ei.value.status == 503 and ei.value.reason == "llm_unavailable"
        assert srv.stats.requests == 3


def test_auth_error_not_retried_and_key_not_leaked():
    secret = "sk-test-SECRET-123"
    with FakeOpenAIServer(api_key="right-key") as srv:
        llm = client(srv, api_key=secret)
        with pytest.raises(LLMAuthError) as ei:
            llm.chat(MSG)
        assert srv.stats.requests == 1
        assert secret not in str(ei.value) and "rejected" in str(ei.value)
        assert secret not in repr(llm)
        assert srv.requests[-1]["auth"] == f"Bearer {secret}"
        ok = client(srv, api_key="right-key")
        assert ok.chat(MSG).text.startswith("Echo:")


def test_bad_request_not_retried(fake_server):
    fake_server.push_faults("400")
    with pytest.raises(LLMBadRequest, match="HTTP 400"):
        client(fake_server).chat(MSG)
    assert fake_server.stats.requests == 1


SCHEMA = {"title": "city", "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def test_a_schema_is_sent_as_response_format_and_a_refusal_says_so(fake_server):
    """Structured output: ``GenParams(schema=...)`` is OpenAI's ``response_format`` (llama.cpp's server honours it
    as a grammar); a server that rejects it answers 400, and the error says what the request asked for."""
    llm = client(fake_server)
    llm.chat(MSG, GenParams(schema=SCHEMA))
    sent = fake_server.requests[-1]["body"]["response_format"]
    assert sent == {"type": "json_schema", "json_schema": {"name": "city", "schema": SCHEMA, "strict": True}}
    llm.complete("p", GenParams(schema={"type": "object"}))  # no valid title: a fixed name
    assert fake_server.requests[-1]["body"]["response_format"]["json_schema"]["name"] == "answer"
    llm.chat(MSG)
    assert "response_format" not in fake_server.requests[-1]["body"]
    fake_server.push_faults("400")
    with pytest.raises(LLMBadRequest, match=r"HTTP 400: fake fault 400 \(the request asked for structured output"):
        llm.chat(MSG, GenParams(schema=SCHEMA))
    fake_server.push_faults("400")
    with pytest.raises(LLMBadRequest) as plain:  # a call without a schema says nothing of one
        llm.chat(MSG)
    assert "structured" not in str(plain.value)


def test_timeout_raises_llm_timeout_after_retries():
    with FakeOpenAIServer(fault="slow", slow_s=1.0) as srv:
        llm = client(srv, max_retries=1)
        t0 = time.perf_counter()
        with pytest.raises(LLMTimeout):
            llm.chat(MSG, timeout=0.2)
        assert time.perf_counter() - t0 < 1.5
        assert srv.stats.requests == 2


@pytest.mark.parametrize("fault", ["malformed", "truncated", "no-choices"])
def test_bad_response_is_clear(fake_server, fault):
    fake_server.push_faults(fault)
    with pytest.raises(LLMBadResponse) as ei:
        client(fake_server).chat(MSG)
    assert ei.value.reason == "llm_bad_response"
    assert "malformed JSON" in str(ei.value) or "no choices" in str(ei.value)


def test_connection_drop_is_retried(fake_server):
    fake_server.push_faults("disconnect")
    assert client(fake_server).complete("hello").text == "Echo: hello"
    assert fake_server.stats.requests == 2


def test_unreachable_server_raises_unavailable():
    with FakeOpenAIServer() as srv:
        url = srv.base_url
    with pytest.raises(LLMUnavailable, match="cannot reach"):
        OpenAICompatLLM(url, "m", max_retries=1, backoff_base=0.01).chat(MSG)


# ---------------------------------------------------------------- streaming
def test_streaming_sync_and_async_match_plain_call(fake_server):
    llm = client(fake_server)
    full = llm.chat(MSG).text
    chunks: list[str] = []
    assert llm.chat(MSG, on_delta=chunks.append).text == full
    assert len(chunks) > 1 and "".join(chunks) == full
    assert streamed(llm.complete, "say hi") == "Echo: say hi"

    async def go() -> tuple[str, str]:
        pa: list[str] = []
        pb: list[str] = []
        await llm.achat(MSG, on_delta=pa.append)
        await llm.acomplete("say hi", on_delta=pb.append)
        a, b = "".join(pa), "".join(pb)
        await llm.aclose()
        return a, b

    assert asyncio.run(go()) == (full, "Echo: say hi")


def test_stream_midway_disconnect_raises(fake_server):
    fake_server.push_faults("disconnect")
    llm = client(fake_server)
    got: list[str] = []
    with pytest.raises(LLMUnavailable):
        llm.chat([{"role": "user", "content": "a b c d e f g h"}], on_delta=got.append)
    assert got  # partial text was delivered before the failure, and no silent retry duplicated it
    assert fake_server.stats.requests == 1


def test_stream_error_before_first_byte_is_retried(fake_server):
    fake_server.push_faults("503")
    assert streamed(client(fake_server).complete, "x y") == "Echo: x y"


def test_stream_malformed_event(fake_server):
    fake_server.push_faults("malformed")
    with pytest.raises(LLMBadResponse, match="malformed stream event"):
        streamed(client(fake_server).chat, [{"role": "user", "content": "a b c d"}])


# ------------------------------------------------------------------- async
def test_async_calls_queue_on_server_slots():
    with FakeOpenAIServer(slots=2, token_latency_s=0.01) as srv:
        llm = client(srv)

        async def go():
            r = await asyncio.gather(*(llm.achat([{"role": "user", "content": f"n{i}"}]) for i in range(8)))
            await llm.aclose()
            return r

        res = asyncio.run(go())
        assert [c.text for c in res] == [f"Echo: n{i}" for i in range(8)]
        assert srv.stats.max_generating == 2 and srv.stats.max_in_flight > 2


def test_async_cancellation_closes_the_request():
    with FakeOpenAIServer(token_latency_s=0.05, script=[" ".join(["w"] * 200)]) as srv:
        llm = client(srv)

        async def go():
            got: list[str] = []

            async def consume():
                await llm.achat(MSG, GenParams(max_tokens=200), on_delta=got.append)

            task = asyncio.create_task(consume())
            while not got:
                await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # the slow non-streaming call is cancelled promptly too
            t = asyncio.create_task(llm.achat(MSG, GenParams(max_tokens=200)))
            await asyncio.sleep(0.1)
            t0 = time.perf_counter()
            t.cancel()
            with pytest.raises(asyncio.CancelledError):
                await t
            assert time.perf_counter() - t0 < 0.5
            await llm.aclose()
            return got

        got = asyncio.run(go())
        assert 0 < len(got) < 200
        deadline = time.time() + 3
        while srv.stats.client_disconnects == 0 and time.time() < deadline:
            time.sleep(0.05)
        assert srv.stats.client_disconnects >= 1


def test_client_usable_from_several_event_loops(fake_server):
    llm = client(fake_server)
    for _ in range(2):
        assert asyncio.run(llm.acomplete("loop")).text == "Echo: loop"


# -------------------------------------------------------------- rate limits
def test_requests_per_minute_limit_spreads_calls(fake_server):
    llm = client(fake_server, limits=RateLimits(requests_per_min=600))  # 10/s, burst 10
    t0 = time.perf_counter()
    for i in range(16):
        llm.complete(f"r{i}")
    assert time.perf_counter() - t0 >= 0.5


def test_tokens_per_minute_bucket():
    b = TokenBucket(6000)  # 100 tokens/s, burst 100
    assert b.reserve(100) == 0.0
    assert b.reserve(50) == pytest.approx(0.5, abs=0.05)


def test_max_concurrency_shared_by_threads_and_tasks():
    with FakeOpenAIServer(token_latency_s=0.01) as srv:
        llm = client(srv, limits=RateLimits(max_concurrency=2))

        def worker():
            for _ in range(2):
                llm.complete("a b c d")

        threads = [threading.Thread(target=worker) for _ in range(3)]
        for t in threads:
            t.start()

        async def go():
            await asyncio.gather(*(llm.acomplete("a b c d") for _ in range(4)))
            await llm.aclose()

        asyncio.run(go())
        for t in threads:
            t.join()
        assert srv.stats.completed == 10
        assert srv.stats.max_in_flight <= 2


# --------------------------------------------------------------- usage
def test_usage_reports_cached_prompt_tokens(fake_server):
    llm = client(fake_server)
    base = "word " * 30
    llm.complete(base + "first")
    c = llm.complete(base + "second and more")
    assert c.usage.cached_prompt_tokens == 30
    assert c.usage.processed_prompt_tokens == c.usage.prompt_tokens - 30


def test_usage_from_llamacpp_timings_and_deepseek():
    u = usage_from(
        {"usage": {"prompt_tokens": 100, "completion_tokens": 5}, "timings": {"prompt_n": 12, "cache_n": 88}}
    )
    assert (u.prompt_tokens, u.cached_prompt_tokens, u.processed_prompt_tokens) == (100, 88, 12)
    u = usage_from({"usage": {"prompt_tokens": 50, "completion_tokens": 2, "prompt_cache_hit_tokens": 40}})
    assert (u.cached_prompt_tokens, u.processed_prompt_tokens) == (40, 10)
    assert usage_from({}).prompt_tokens == 0


def test_llamacpp_timings_through_the_client():
    with FakeOpenAIServer(llamacpp_timings=True) as srv:
        llm = client(srv)
        llm.complete("alpha beta gamma delta ")
        c = llm.complete("alpha beta gamma delta epsilon")
        assert c.usage.cached_prompt_tokens == 4 and c.usage.processed_prompt_tokens == 1


# ------------------------------------------------------------ configuration
@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    for v in (
        "SLEUTH_LLM_BASE_URL", "SLEUTH_LLM_API_KEY", "SLEUTH_LLM_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL",
        "QWEN_API_KEY", "QWEN_BASE_URL", "DASHSCOPE_API_KEY", "DEEPSEEK_API_KEY", "SLEUTH_MODEL",
    ):  # fmt: skip
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv("SLEUTH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    return monkeypatch


def test_settings_default_to_embedded(clean_env):
    s = resolve_llm_settings()
    assert s.embedded and s.base_url is None and s.model == s.embedded_model
    assert resolve_llm_settings("qwen2.5-0.5b").model == "qwen2.5-0.5b"
    clean_env.setenv("SLEUTH_MODEL", "smollm2-135m")
    assert resolve_llm_settings().model == "smollm2-135m"


def test_settings_from_env_and_per_call_override(clean_env):
    clean_env.setenv("SLEUTH_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    clean_env.setenv("SLEUTH_LLM_MODEL", "m-env")
    s = resolve_llm_settings()
    assert (s.base_url, s.model, s.api_key) == ("http://127.0.0.1:9/v1", "m-env", None)
    s = resolve_llm_settings("m-arg", base_url="http://127.0.0.1:10", api_key="k-arg")
    assert (s.base_url, s.model, s.api_key) == ("http://127.0.0.1:10", "m-arg", "k-arg")
    assert "k-arg" not in repr(s)


def test_settings_openai_and_qwen_variables(clean_env):
    clean_env.setenv("QWEN_API_KEY", "qk")
    s = resolve_llm_settings("qwen:qwen-turbo")
    assert s.base_url.startswith("https://dashscope.aliyuncs.com") and s.api_key == "qk" and s.model == "qwen-turbo"
    clean_env.setenv("OPENAI_BASE_URL", "https://api.openai.com/v1")
    clean_env.setenv("OPENAI_API_KEY", "ok")
    s = resolve_llm_settings()
    assert s.provider == "openai" and s.api_key == "ok" and s.model == "gpt-4o-mini"


def test_missing_key_is_one_clear_sentence(clean_env):
    with pytest.raises(LLMAuthError) as ei:
        resolve_llm_settings("openai:gpt-4o-mini")
    msg = str(ei.value)
    assert "OPENAI_API_KEY" in msg and msg.endswith(".") and "\n" not in msg


def test_dotenv_file_does_not_override_real_env(clean_env, tmp_path):
    (tmp_path / ".env").write_text("SLEUTH_LLM_BASE_URL=http://127.0.0.1:7/v1\nSLEUTH_LLM_MODEL=from-dotenv\n")
    clean_env.setenv("SLEUTH_LLM_MODEL", "from-env")
    load_env(tmp_path / ".env", force=True)
    s = resolve_llm_settings()
    assert s.base_url == "http://127.0.0.1:7/v1" and s.model == "from-env"


def test_get_llm_remote_with_cache_and_limits(clean_env, fake_server, tmp_path):
    llm = get_llm(base_url=fake_server.base_url, api_key="k", cache_path=tmp_path / "c.sqlite", max_concurrency=2)
    assert isinstance(llm, CachedLLM)
    assert llm.chat(MSG).text.startswith("Echo:")
    assert llm.model == "fake-model"  # discovered from /v1/models
    assert fake_server.requests[-1]["auth"] == "Bearer k"
    assert llm.inner.limiter is not None
    plain = get_llm(base_url=fake_server.base_url, cache=False)
    assert isinstance(plain, OpenAICompatLLM)


def test_get_llm_wrong_key_is_auth_error(clean_env):
    with FakeOpenAIServer(api_key="good") as srv:
        llm = get_llm(base_url=srv.base_url, api_key="bad", cache=False)
        with pytest.raises(LLMAuthError):
            llm.complete("x")


def test_httpx_is_real_http(fake_server):
    # guard: the fake server is a real socket server, not an in-process transport
    r = httpx.get(fake_server.url + "/health")
    assert r.json() == {"status": "ok"}


@pytest.mark.parametrize("url", ["garbage", "htp://host", "http://", "http://127.0.0.1:notaport", "   "])
def test_bad_base_url_is_one_sentence(clean_env, url):
    with pytest.raises(LLMBadRequest, match=r"Invalid LLM base URL.*SLEUTH_LLM_BASE_URL"):
        get_llm("m", base_url=url, cache=False)


def test_stall_mid_answer_times_out():
    with FakeOpenAIServer(fault="stall", slow_s=1.0, script=["one two three four five six"]) as srv:
        llm = client(srv, max_retries=0, timeout=0.3)
        with pytest.raises(LLMTimeout):
            llm.complete("x")
        got: list[str] = []
        with pytest.raises(LLMTimeout):
            llm.complete("x", on_delta=got.append)
        assert got and srv.stats.requests == 2
