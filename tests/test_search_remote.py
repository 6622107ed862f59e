"""Embeddings and reranking from model servers, against real HTTP servers on 127.0.0.1
(``tests/fake_model_server.py``): the bundled models served over HTTP, and a server that
misbehaves on purpose (429, 500, timeouts, wrong dimensions, malformed answers)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from fake_model_server import ModelServer
from sleuth.cli import UserError, app
from sleuth.llm.scripted import ScriptedLLM
from sleuth.search import EmbedServer, Filters, Index, IndexError_, SearchError, SearchUnavailable, open_retriever
from sleuth.search.dense import get_embedder
from sleuth.search.remote import HttpEmbedder, HttpReranker, RerankServer
from sleuth.search.rerank import LLMReranker, RerankedRetriever, parse_ranking

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def cli(*args: str) -> tuple[int, str]:
    """``sleuth ARGS`` in-process: exit code and output, a user mistake ending as ``main`` ends it (code 2)."""
    r = runner.invoke(app, list(args))
    if isinstance(r.exception, UserError):
        return 2, str(r.exception)
    return r.exit_code, r.output


TOPICS = [
    "The cat sat on the warm windowsill and purred.",
    "Volcanoes erupt molten lava and ash into the sky.",
    "The stock market fell sharply after the interest rate decision.",
    "A violin concerto was performed by the city orchestra.",
    "Photosynthesis converts sunlight into chemical energy in plants.",
    "Bread dough rises because yeast produces carbon dioxide.",
]


def _corpus(path: Path, n: int = 60, offset: int = 0) -> Path:
    rows = [
        {
            "id": f"p{i}",
            "title": f"note {i}",
            "text": f"{TOPICS[i % len(TOPICS)]} Entry {i}." + (" secret-hr-payroll" if i % 5 == 0 else ""),
            "acl": ["hr"] if i % 5 == 0 else ["all"],
        }
        for i in range(offset, offset + n)
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    return path


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLEUTH_CACHE_DIR", str(tmp_path / "cache"))
    for var in ("SLEUTH_EMBED_BASE_URL", "SLEUTH_EMBED_MODEL", "SLEUTH_RERANK_BASE_URL", "SLEUTH_EMBED_API_KEY"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def fake() -> Iterator[ModelServer]:
    with ModelServer() as srv:
        yield srv


def _server(url: str, **kw: Any) -> EmbedServer:
    es = EmbedServer.resolve("fake-embed", url, **kw)
    assert es is not None
    return es


# -- the bundled models served over HTTP give what they give in-process ----------------------------
@pytest.mark.parametrize("model", ["all-MiniLM-L6-v2", "multilingual-e5-small"])
def test_bundled_model_over_http_ranks_as_in_process(model: str, tmp_path: Path, data_dir: Path) -> None:
    corpus = data_dir / "policy_zh" / "corpus.jsonl" if "e5" in model else _corpus(tmp_path / "c.jsonl", 40)
    queries = (
        ["差旅住宿标准是多少", "内部审计抽查比例", "海外出差补贴"]
        if "e5" in model
        else ["lava from a volcano", "orchestra music", "yeast in bread"]
    )
    local = Index.build([corpus], tmp_path / "local", dense=True, embedder=model)
    with ModelServer(embedder=get_embedder(model), model=model) as srv:
        code, out = cli("index", "build", "-i", str(corpus), "-o", str(tmp_path / "http"),
                        "--embed-base-url", srv.url + "/v1", "--embed-model", model, "--json")  # fmt: skip
        assert code == 0, out
        remote = Index.open(tmp_path / "http")
        assert remote.manifest["embedder"] == f"http:{model}"
        assert remote.manifest["embed_server"]["dim"] == 384
        v_local = np.load(local.gen / "vectors.npy")
        v_http = np.load(remote.gen / "vectors.npy")
        assert v_http.shape == v_local.shape
        assert float(np.min(np.sum(v_local * v_http, axis=1))) > 0.999  # same vectors, up to batching
        for q in queries:
            for mode in ("dense", "hybrid"):
                assert [p.id for p in remote.search(q, 5, mode=mode)] == [p.id for p in local.search(q, 5, mode=mode)]
        if "e5" in model:  # e5 needs its prefixes: sent by the client, read by the server
            assert any(t.startswith("query: ") for t in srv.stats.inputs)
            assert any(t.startswith("passage: ") for t in srv.stats.inputs)


# -- build, add, query through the server ------------------------------------------------------------
def test_build_add_and_query_through_a_server_with_the_cache(fake: ModelServer, tmp_path: Path) -> None:
    src = _corpus(tmp_path / "a.jsonl", 60)
    es = _server(fake.url, batch_size=8, concurrency=3)
    idx = Index.build([src], tmp_path / "ix", embed_server=es)
    assert idx.has_vectors and idx.default_mode == "hybrid"
    assert fake.stats.texts == 60 + 1  # every passage once, plus one dimension probe
    assert max(len(b) for b in [fake.stats.inputs]) and fake.stats.requests == 1 + 8  # ceil(60 / 8)
    hits = idx.search("volcanoes erupt lava", 3, Filters.parse(["acl=all"]), mode="dense")
    assert hits and "Volcanoes" in hits[0].text and all("all" in p.acl for p in hits)

    before = fake.stats.texts
    more = _corpus(tmp_path / "b.jsonl", 10, offset=60)
    code, out = cli("index", "add", "--index", str(tmp_path / "ix"), "-i", str(more), "--json")
    assert code == 0, out  # the server recorded in the index is used
    assert fake.stats.texts - before == 10  # only the new passages go to the server
    again = Index.open(tmp_path / "ix")
    assert again.manifest["rows"] == 70 and np.load(again.gen / "vectors.npy").shape == (70, 64)
    reader = Index.open(tmp_path / "ix")
    again.remove(["p1"])  # a removal keeps the record of the server that made the vectors
    after = Index.open(tmp_path / "ix")
    assert after.manifest["embed_server"]["model"] == "fake-embed" and after.manifest["passages"] == 69
    assert after.search("volcanoes erupt lava", 3, mode="dense")
    assert reader.reload().search("volcanoes erupt lava", 3, mode="dense")  # with the same query embedder

    before = fake.stats.texts
    Index.build([src], tmp_path / "ix2", embed_server=es)
    assert fake.stats.texts == before  # the embedding cache, keyed on the model, answered every passage


def test_a_query_embedder_that_does_not_match_is_refused_in_one_line(fake: ModelServer, tmp_path: Path) -> None:
    src = _corpus(tmp_path / "a.jsonl", 12)
    Index.build([src], tmp_path / "ix", embed_server=_server(fake.url))
    with pytest.raises(IndexError_, match="embedded with 'fake-embed' \\(64 dims\\); the query embedder is 'other'"):
        Index.open(tmp_path / "ix", embed_model="other")
    code, out = cli("search", "lava", "--index", str(tmp_path / "ix"), "--embed-model", "other")
    assert code == 2 and "use --embed-model fake-embed" in out and "\n" not in out
    Index.build([src], tmp_path / "lexical", dense=False)
    code, out = cli("search", "lava", "--index", str(tmp_path / "lexical"), "--embed-model", "x")
    assert code == 0, out  # no vectors: nothing to embed a query for


def test_a_pool_survives_a_dead_server(fake: ModelServer, tmp_path: Path) -> None:
    dead = ModelServer()
    dead_url = dead.url  # never started: connections are refused
    dead.stop()
    es = EmbedServer.resolve("fake-embed", f"{dead_url},{fake.url}", batch_size=4, concurrency=2, max_retries=3)
    assert es is not None and len(es.base_urls) == 2
    emb = HttpEmbedder(es)
    vecs = emb.embed([f"text number {i}" for i in range(40)])
    assert vecs.shape == (40, 64) and np.allclose(np.linalg.norm(vecs, axis=1), 1, atol=1e-5)
    assert emb.pool.retries >= 1  # attempts on the dead server went to the live one


# -- faults -----------------------------------------------------------------------------------------
def test_429_and_500_are_retried(fake: ModelServer) -> None:
    emb = HttpEmbedder(_server(fake.url, max_retries=3))
    fake.push_faults("429", "500", "429")
    assert emb.embed(["one", "two"]).shape == (2, 64)
    assert emb.pool.retries == 3


@pytest.mark.parametrize(
    ("faults", "error", "message"),
    [
        (["500"] * 3, SearchUnavailable, "answered HTTP 500: fault 500 (after 3 attempts)"),
        (["slow"] * 3, SearchUnavailable, "did not answer in time"),
        (["wrong-dim"], SearchError, "returned 63-dimensional vectors for model 'fake-embed', expected 64"),
        (["short"], SearchError, "returned 1 embeddings for 2 texts"),
        (["malformed"], SearchError, "not JSON"),
        (["401"], SearchUnavailable, "check SLEUTH_EMBED_API_KEY"),
    ],
)
def test_faults_end_in_one_clear_error(fake: ModelServer, faults: list[str], error: type, message: str) -> None:
    fake.slow_s = 1.5
    emb = HttpEmbedder(_server(fake.url, max_retries=2, timeout=0.5), dim=64)
    fake.push_faults(*faults)
    with pytest.raises(error) as e:
        emb.embed(["one", "two"])
    assert message in str(e.value) and "\n" not in str(e.value)


def test_a_failed_build_says_why_in_one_line_and_publishes_nothing(fake: ModelServer, tmp_path: Path) -> None:
    src = _corpus(tmp_path / "a.jsonl", 20)
    fake.fault = "wrong-dim"
    fake.push_faults("ok")  # the dimension probe answers 64, every batch after it 63
    code, out = cli("index", "build", "-i", str(src), "-o", str(tmp_path / "ix"), "--embed-base-url", fake.url,
                    "--embed-model", "fake-embed", "--json")  # fmt: skip
    assert code == 2, out
    assert "63-dimensional vectors" in out and "\n" not in out
    assert not Index.is_index(tmp_path / "ix")


def test_the_key_is_sent_and_never_shown(fake: ModelServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLEUTH_EMBED_API_KEY", "sk-embed-secret")
    es = _server(fake.url)
    assert "sk-embed-secret" not in repr(es)
    emb = HttpEmbedder(es)
    emb.embed(["one"])
    assert fake.stats.auth[-1] == "Bearer sk-embed-secret"
    fake.push_faults("401")
    with pytest.raises(SearchUnavailable) as e:
        emb.embed(["two"])
    assert "sk-embed-secret" not in str(e.value) and "the API key was rejected" in str(e.value)


@pytest.mark.parametrize("bad", ["ftp://x", "http://", "not a url"])
def test_bad_server_urls_are_refused(bad: str, tmp_path: Path) -> None:
    code, out = cli("index", "build", "-i", str(_corpus(tmp_path / "a.jsonl", 3)), "-o", str(tmp_path / "ix"),
                    "--embed-base-url", bad, "--embed-model", "m")  # fmt: skip
    assert code == 2 and "is not a usable embedding server URL" in out


# -- a killed build resumes where it was ------------------------------------------------------------
_BUILD = """
import sys
from sleuth.search import EmbedServer, Index
es = EmbedServer.resolve("fake-embed", sys.argv[3], batch_size=10, concurrency=1)
Index.build([sys.argv[1]], sys.argv[2], embed_server=es)
"""


def test_a_killed_build_resumes_without_re_embedding(tmp_path: Path) -> None:
    src = _corpus(tmp_path / "a.jsonl", 400)
    with ModelServer(slots=1, batch_latency_s=0.05) as srv:
        env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
        proc = subprocess.Popen([sys.executable, "-c", _BUILD, str(src), str(tmp_path / "ix"), srv.url], env=env)
        deadline = time.monotonic() + 120
        while srv.stats.texts < 150 and time.monotonic() < deadline:
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        first = srv.stats.texts
        assert 150 <= first < 401, first
        assert not Index.is_index(tmp_path / "ix")  # nothing half-written was published
        Index.build([src], tmp_path / "ix", embed_server=EmbedServer.resolve("fake-embed", srv.url, batch_size=10))
        resent = srv.stats.texts - first
        # what was embedded before the kill is not sent again (at most the batch in flight and a probe)
        assert resent <= 400 - first + 2 * 10 + 1, (first, resent)
    idx = Index.open(tmp_path / "ix")
    assert idx.manifest["rows"] == 400 and np.load(idx.gen / "vectors.npy").shape == (400, 64)


# -- rerank --------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", ["jina", "tei"])
def test_rerank_server_orders_candidates_within_the_scope(shape: str, tmp_path: Path) -> None:
    src = _corpus(tmp_path / "a.jsonl", 60)
    base = open_retriever(str(src), cache_dir=tmp_path / "idx", rerank="none")
    with ModelServer(rerank_shape=shape) as srv:
        rr = open_retriever(str(src), cache_dir=tmp_path / "idx", rerank=srv.url, rerank_depth=10)
        assert isinstance(rr, RerankedRetriever)
        f = Filters.parse(["acl=all"])
        got = rr.search("cat windowsill purred entry", 5, f)
        assert len(got) == 5 and all(p.acl == ["all"] for p in got)
        assert got[0].score >= got[-1].score and "cat" in got[0].text
        assert all(p.metadata["first_stage_rank"] >= 1 for p in got)
        assert srv.stats.inputs and not any("secret-hr-payroll" in t for t in srv.stats.inputs)
        assert {p.id for p in got} <= {p.id for p in base.search("cat windowsill purred entry", 10, f)}
        expected = "/rerank" if shape == "tei" else "/v1/rerank"
        assert srv.stats.paths[-1] == expected


def test_rerank_faults_are_retried_then_reported(tmp_path: Path) -> None:
    with ModelServer() as srv:
        rk = HttpReranker(RerankServer(base_url=srv.url, max_retries=2))
        srv.push_faults("429", "500")
        assert rk.scores("cat", ["the cat", "a dog"]) == [1.0, 0.0]
        srv.push_faults("500", "500", "500")
        with pytest.raises(SearchUnavailable, match="after 3 attempts"):
            rk.scores("cat", ["the cat", "a dog"])
        srv.push_faults("malformed")
        with pytest.raises(SearchError, match="not JSON"):
            rk.scores("cat", ["the cat", "a dog"])


def test_parse_ranking_reads_what_small_models_write() -> None:
    assert parse_ranking("[3] > [1] > [2]", 3) == [2, 0, 1]
    assert parse_ranking("Ranking: 2 > 2 > 9 > 1", 3) == [1, 0]
    assert parse_ranking("none of them", 3) == []


def test_llm_reranker_orders_by_the_llm_and_keeps_the_rest(tmp_path: Path) -> None:
    src = _corpus(tmp_path / "a.jsonl", 30)
    inner = open_retriever(str(src), cache_dir=tmp_path / "idx", rerank="none")
    llm = ScriptedLLM(["[4] > [2]", "I cannot tell."])
    rr = RerankedRetriever(inner, LLMReranker(llm), depth=5)
    f = Filters.parse(["acl=all"])
    first = inner.search("cat lava orchestra", 5, f)
    got = rr.search("cat lava orchestra", 5, f)
    assert [p.id for p in got] == [first[3].id, first[1].id, first[0].id, first[2].id, first[4].id]
    assert "secret-hr-payroll" not in llm.calls[0].payload[0]["content"]  # type: ignore[index]
    got = rr.search("cat lava orchestra", 5, f)  # an unreadable answer keeps the source's order
    assert [p.id for p in got] == [p.id for p in first]


def test_ask_reranks_every_search_through_the_server(tmp_path: Path, fake_server: Any) -> None:
    src = _corpus(tmp_path / "a.jsonl", 40)
    with ModelServer() as rk:
        code, out = cli("ask", "What did the cat do?", "--strategy", "rag", "--corpus", str(src), "--filter",
                        "acl=all", "--base-url", fake_server.url, "--model", "echo", "--rerank-base-url", rk.url,
                        "--json")  # fmt: skip
        assert code == 0, out
        assert rk.stats.requests >= 1 and not any("secret-hr-payroll" in t for t in rk.stats.inputs)
    code, out = cli("ask", "What did the cat do?", "--strategy", "rag", "--corpus", str(src), "--filter", "acl=all",
                    "--base-url", fake_server.url, "--model", "echo", "--rerank", "llm", "--rerank-depth", "6",
                    "--json")  # fmt: skip
    assert code == 0, out
    prompts = [json.dumps(b) for b in fake_server.requests]
    assert any("Rank the 5 passages" in b for b in prompts)  # the 5 in-scope passages that match "cat"
    assert not any("secret-hr-payroll" in b for b in prompts if "Rank the" in b)  # none outside the scope
    code, out = cli("ask", "q?", "--strategy", "rag", "--corpus", str(src), "--rerank", "bogus")
    assert code == 2 and "--rerank must be none, llm or a rerank server" in out


def test_server_and_mcp_runtime_rerank_every_source(tmp_path: Path) -> None:
    from sleuth.server import ServerSettings
    from sleuth.server.runtime import Runtime

    src = _corpus(tmp_path / "a.jsonl", 40)
    with ModelServer() as rk:
        rt = Runtime(ServerSettings(sources=(("docs", str(src)),), rerank=rk.url), llm=ScriptedLLM(["x"]))
        r = rt.retriever("docs")
        assert isinstance(r, RerankedRetriever)
        got = r.search("cat windowsill", 3, Filters.parse(["acl=all"]))
        assert got and not any("secret-hr-payroll" in t for t in rk.stats.inputs)
        rt2 = Runtime(ServerSettings(sources=(("docs", str(src)),), rerank="llm"), llm=ScriptedLLM(["[2] > [1]"]))
        assert isinstance(rt2.retriever("docs").reranker, LLMReranker)
        rt.shutdown()
        rt2.shutdown()


def test_http_server_reranks_within_the_request_scope(tmp_path: Path) -> None:
    import httpx

    from serverkit import running
    from sleuth.server import ServerSettings, create_app

    src = _corpus(tmp_path / "a.jsonl", 40)
    with ModelServer() as rk:
        app_ = create_app(
            ServerSettings(sources=(("docs", str(src)),), rerank=rk.url, rerank_depth=8),
            llm=ScriptedLLM(lambda payload, params: "The cat sat on the windowsill."),
        )
        with running(app_) as url, httpx.Client(base_url=url, timeout=120) as c:
            r = c.post(
                "/v1/ask",
                json={"question": "What did the cat do?", "strategy": "rag", "filters": ["acl=all"], "k": 3},
            )
            assert r.status_code == 200, r.text
            found = [p for e in r.json()["trace"] if e["kind"] == "search" for p in e["data"]["passages"]]
            assert found and all(int(p["id"].split("#")[0][1:]) % 5 for p in found)  # no hr passage
        assert rk.stats.requests >= 1 and not any("secret-hr-payroll" in t for t in rk.stats.inputs)
