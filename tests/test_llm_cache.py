"""The SQLite response cache around a real client talking to a real (fake) HTTP server."""

from __future__ import annotations

import threading

import pytest

from fake_openai_server import FakeOpenAIServer
from sleuth.llm import CachedLLM, GenParams, OpenAICompatLLM, get_llm

MSG = [{"role": "user", "content": "capital of France?"}]


def make(server: FakeOpenAIServer, path, **kw) -> CachedLLM:
    return CachedLLM(OpenAICompatLLM(server.base_url, "fake-model", backoff_base=0.01), path, **kw)


def test_hit_returns_from_cache_with_zero_processed_tokens(fake_server, tmp_path):
    llm = make(fake_server, tmp_path / "c.sqlite")
    a = llm.chat(MSG, GenParams(max_tokens=20))
    b = llm.chat(MSG, GenParams(max_tokens=20))
    assert not a.from_cache and b.from_cache
    assert b.text == a.text and b.finish_reason == a.finish_reason
    assert b.usage.processed_prompt_tokens == 0 and b.usage.cached_prompt_tokens == a.usage.prompt_tokens
    assert b.usage.completion_tokens == a.usage.completion_tokens
    assert fake_server.stats.requests == 1 and (llm.hits, llm.misses) == (1, 1)


def test_key_covers_prompt_model_backend_and_sampling_params(fake_server, tmp_path):
    path = tmp_path / "c.sqlite"
    llm = make(fake_server, path)
    llm.complete("p", GenParams(max_tokens=10, stop=["\n"], seed=1))
    variants = [
        lambda: llm.complete("p ", GenParams(max_tokens=10, stop=["\n"], seed=1)),
        lambda: llm.complete("p", GenParams(max_tokens=11, stop=["\n"], seed=1)),
        lambda: llm.complete("p", GenParams(max_tokens=10, stop=["\n\n"], seed=1)),
        lambda: llm.complete("p", GenParams(max_tokens=10, stop=["\n"], seed=2)),
        lambda: llm.chat([{"role": "user", "content": "p"}], GenParams(max_tokens=10, stop=["\n"], seed=1)),
        lambda: CachedLLM(OpenAICompatLLM(fake_server.base_url, "other-model"), path).complete(
            "p", GenParams(max_tokens=10, stop=["\n"], seed=1)
        ),
        lambda: CachedLLM(OpenAICompatLLM(fake_server.url + "/other/v1", "fake-model"), path, backend="elsewhere"),
    ]
    for i, v in enumerate(variants[:-1]):
        c = v()
        assert not c.from_cache, f"variant {i} must miss"
    assert fake_server.stats.requests == 7
    assert llm.complete("p", GenParams(max_tokens=10, stop=["\n"], seed=1)).from_cache
    other = variants[-1]()
    assert other._key("complete", "p", GenParams(max_tokens=10)) != llm._key("complete", "p", GenParams(max_tokens=10))


def test_key_covers_the_schema_and_is_unchanged_without_one(fake_server, tmp_path):
    """A structured call has a key of its own; a call without a schema keeps the key of earlier versions, so
    existing caches still answer."""
    from sleuth.kvcache import make_key
    from sleuth.llm.cache import CACHE_VERSION

    llm = make(fake_server, tmp_path / "c.sqlite")
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    llm.chat(MSG, GenParams(max_tokens=20))
    assert not llm.chat(MSG, GenParams(max_tokens=20, schema=schema)).from_cache
    assert llm.chat(MSG, GenParams(max_tokens=20, schema=schema)).from_cache
    assert not llm.chat(MSG, GenParams(max_tokens=20, schema={**schema, "required": ["a"]})).from_cache
    assert fake_server.stats.requests == 3
    sampling = {"max_tokens": 20, "temperature": 0.0, "stop": [], "seed": 0}
    old = make_key(CACHE_VERSION, fake_server.base_url, "fake-model", "chat", MSG, sampling, {})
    assert llm._key("chat", MSG, GenParams(max_tokens=20)) == old


def test_only_temperature_zero_is_cached_by_default(fake_server, tmp_path):
    llm = make(fake_server, tmp_path / "c.sqlite")
    llm.complete("x", GenParams(temperature=0.7))
    assert not llm.complete("x", GenParams(temperature=0.7)).from_cache
    assert fake_server.stats.requests == 2
    every = make(fake_server, tmp_path / "c2.sqlite", all_temperatures=True)
    every.complete("x", GenParams(temperature=0.7))
    assert every.complete("x", GenParams(temperature=0.7)).from_cache


def test_refresh_recomputes_and_overwrites(tmp_path):
    with FakeOpenAIServer(script=["old answer", "new answer"]) as server:
        path = tmp_path / "c.sqlite"
        assert make(server, path).complete("q").text == "old answer"
        assert make(server, path).complete("q").text == "old answer"  # hit
        fresh = make(server, path, refresh=True).complete("q")
        assert fresh.text == "new answer" and not fresh.from_cache
        again = make(server, path).complete("q")
        assert again.text == "new answer" and again.from_cache
        assert server.stats.requests == 2


def test_persistent_across_instances_and_errors_not_cached(fake_server, tmp_path):
    path = tmp_path / "c.sqlite"
    make(fake_server, path).complete("persist")
    assert make(fake_server, path).complete("persist").from_cache
    fake_server.push_faults("400")
    llm = make(fake_server, path)
    with pytest.raises(Exception, match="HTTP 400"):
        llm.complete("will fail")
    assert not llm.complete("will fail").from_cache


def test_streams_use_the_cache(fake_server, tmp_path):
    llm = make(fake_server, tmp_path / "c.sqlite")
    a = llm.chat(MSG)
    b = llm.chat(MSG)
    pieces: list[str] = []
    c = llm.chat(MSG, on_delta=pieces.append)
    s = "".join(pieces)
    assert b.from_cache and s == a.text and c.from_cache
    assert fake_server.stats.requests == 1
    parts: list[str] = []
    streamed = llm.complete("stream me", on_delta=parts.append).text
    assert "".join(parts) == streamed and fake_server.requests[-1]["body"]["stream"] is True
    assert llm.complete("stream me").from_cache and llm.complete("stream me").text == streamed


def test_concurrent_writers_share_one_file(fake_server, tmp_path):
    path = tmp_path / "c.sqlite"
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        try:
            llm = make(fake_server, path)
            for i in range(15):
                llm.complete(f"q{(i + k) % 20}")
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    llm = make(fake_server, path)
    assert all(llm.complete(f"q{i}").from_cache for i in range(18))
    assert len(llm.store) >= 18


def test_get_llm_cache_switches(fake_server, tmp_path, monkeypatch):
    monkeypatch.setenv("SLEUTH_CACHE_DIR", str(tmp_path / "home"))
    a = get_llm("fake-model", base_url=fake_server.base_url)
    assert isinstance(a, CachedLLM) and a.path == tmp_path / "home" / "llm_cache.sqlite"
    a.complete("z")
    assert get_llm("fake-model", base_url=fake_server.base_url).complete("z").from_cache
    assert not get_llm("fake-model", base_url=fake_server.base_url, refresh_cache=True).complete("z").from_cache
    b = get_llm("fake-model", base_url=fake_server.base_url, cache_path=tmp_path / "elsewhere.sqlite")
    assert b.path == tmp_path / "elsewhere.sqlite" and not b.complete("z").from_cache
    assert isinstance(get_llm("fake-model", base_url=fake_server.base_url, cache=False), OpenAICompatLLM)
    monkeypatch.setenv("SLEUTH_LLM_CACHE", "0")
    assert isinstance(get_llm("fake-model", base_url=fake_server.base_url), OpenAICompatLLM)
