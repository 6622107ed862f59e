"""PostgreSQL + pgvector as the external engine, started for real on 127.0.0.1:
same filters (inside SQL, before LIMIT) and the same provenance as the embedded index."""

from __future__ import annotations

import json
import random
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sleuth.search import Filters, Index, Passage, SearchUnavailable, open_retriever
from sleuth.search.tokenize import tokenize

pytestmark = pytest.mark.pg

pg_mod = pytest.importorskip("sleuth.search.pg")
pytest.importorskip("pgserver")
RESTRICTED = {"fin-audit-2025", "hr-reward-2025"}
LABELS = ["all", "hr", "finance", "legal"]
WORDS = [f"w{i}" for i in range(30)]


@pytest.fixture(scope="module")
def pg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = pg_mod.LocalPostgres(tmp_path_factory.mktemp("pg") / "data")
    server.start()
    try:
        yield server.dsn
    finally:
        server.stop()


@pytest.fixture(scope="module")
def policy_pg(pg: str, tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Iterator[tuple[object, Index]]:
    d = tmp_path_factory.mktemp("pgpol")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SLEUTH_CACHE_DIR", str(d / "cache"))
        idx = Index.build([data_dir / "policy_zh/corpus.jsonl"], d / "ix", dense=True)
        r = pg_mod.PgRetriever(pg, table="policy")
        assert r.load_index(idx) == 12
        yield r, idx


def test_pg_server_listens_on_localhost(pg: str) -> None:
    host, port = pg.rsplit("@", 1)[1].split("/")[0].split(":")
    assert host == "127.0.0.1"
    with socket.create_connection((host, int(port)), timeout=5):
        pass


def test_pg_policy_scope_and_provenance(policy_pg: tuple[object, Index], data_dir: Path) -> None:
    r, idx = policy_pg
    assert isinstance(r, pg_mod.PgRetriever)
    recs = [
        json.loads(ln) for ln in (data_dir / "policy_zh/corpus.jsonl").read_text(encoding="utf-8").splitlines() if ln
    ]
    queries = []
    for rec in recs:
        if rec["id"] in RESTRICTED:
            queries += [rec["text"], rec["title"], *tokenize(rec["text"])]
    everyone = Filters.parse(["acl=all"])
    for mode in ("lexical", "dense", "hybrid"):
        batch = r.search_batch(queries, 12, everyone, mode=mode)
        assert not {p.doc_id for hits in batch for p in hits} & RESTRICTED, mode
    assert any(p.doc_id in RESTRICTED for p in r.search(queries[0], 12, mode="lexical")), "found without a scope"
    assert r.count(everyone) == 10 and r.count(None) == 12
    q6 = Filters.make(equals={"version": "2025", "region": "境内"}, acl=["all", "finance"])
    top = r.search("内部审计对差旅报销的抽查比例是多少？", 3, q6, mode="lexical")
    assert top[0].doc_id == "fin-audit-2025"
    # provenance identical to the embedded index's
    mine = {p.id: p for _, p in idx.store.iter_live()}
    got = top[0]
    ref = mine[got.id]
    assert (got.doc_id, got.title, got.section, got.version, got.region, got.acl, got.source, got.metadata) == (
        ref.doc_id,
        ref.title,
        ref.section,
        ref.version,
        ref.region,
        ref.acl,
        ref.source,
        ref.metadata,
    )
    assert r.search("境外 报销 期限", 3, Filters.parse(["acl=all", "region=境外"]))[0].doc_id == "trv-ovs-2025-01"


def _generated(n: int = 300) -> list[Passage]:
    rnd = random.Random(11)
    return [
        Passage(
            id=f"g{i}#0",
            doc_id=f"g{i}",
            text=" ".join(rnd.choices(WORDS, k=rnd.randint(2, 8))),
            acl=rnd.sample(LABELS, rnd.randint(0, 2)),
            version=rnd.choice(["1", "2", "3"]),
            metadata={"year": rnd.randint(2000, 2010)} if rnd.random() < 0.8 else {},
        )
        for i in range(n)
    ]


@pytest.fixture(scope="module")
def generated_pg(pg: str) -> tuple[object, list[Passage]]:
    r = pg_mod.PgRetriever(pg, table="generated")
    r.create(drop=True)
    corpus = _generated()
    assert r.load(corpus) == len(corpus)
    return r, corpus


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
    k=st.integers(1, 40),
    acl=st.one_of(st.none(), st.lists(st.sampled_from(LABELS), max_size=3)),
    version=st.one_of(st.none(), st.sampled_from(["1", "2", "3"])),
    lo=st.one_of(st.none(), st.integers(1999, 2011)),
)
def test_property_pg_never_returns_out_of_scope(
    generated_pg: tuple[object, list[Passage]],
    words: list[str],
    k: int,
    acl: list[str] | None,
    version: str | None,
    lo: int | None,
) -> None:
    r, corpus = generated_pg
    assert isinstance(r, pg_mod.PgRetriever)
    f = Filters.make(
        equals={"version": version} if version else None, ranges={"year": (lo, None)} if lo else None, acl=acl
    )
    got = r.search(" ".join(words), k, f)
    assert all(f.matches(p) for p in got)
    matching = [p for p in corpus if f.matches(p) and set(words) & set(p.text.split())]
    assert len(got) == min(k, len(matching)), "filters act before LIMIT"
    assert r.count(f) == sum(f.matches(p) for p in corpus)


def test_pg_open_retriever_and_unreachable(pg: str, generated_pg: tuple[object, list[Passage]]) -> None:
    r = open_retriever(f"pg:{pg}", table="generated")
    assert r.search("w1 w2", 3) and r.name == "pg:generated"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(SearchUnavailable, match="unreachable"):
        open_retriever(f"pg:postgresql://postgres@127.0.0.1:{port}/postgres")
