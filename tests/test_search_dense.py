"""Dense and hybrid search: the real all-MiniLM-L6-v2 embedder on a small corpus (tens of
passages, embedding is slow on 2 cores), scope enforced before the top-k cut for the
exact path and the faiss IVF path, embeddings cached, RRF fusion."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sleuth.search import Filters, Index, Passage, SearchError
from sleuth.search.dense import DenseIndex, build_faiss
from sleuth.search.embedding import EmbeddingCache
from sleuth.search.hybrid import rrf
from sleuth.search.lexical import LexicalIndex

LABELS = ["all", "hr", "finance"]
TOPICS = [
    "The cat sat on the warm windowsill and purred.",
    "Volcanoes erupt molten lava and ash into the sky.",
    "The stock market fell sharply after the interest rate decision.",
    "A violin concerto was performed by the city orchestra.",
    "Photosynthesis converts sunlight into chemical energy in plants.",
    "The football team won the championship in extra time.",
    "Quantum computers use qubits that can be in superposition.",
    "Bread dough rises because yeast produces carbon dioxide.",
    "Glaciers carve valleys as they slowly move downhill.",
    "The novel tells the story of a sailor lost at sea.",
]


def _corpus(n: int = 40, seed: int = 3) -> list[dict]:
    rnd = random.Random(seed)
    return [
        {
            "id": f"p{i}",
            "title": f"note {i}",
            "text": f"{TOPICS[i % len(TOPICS)]} Entry {i}.",
            "acl": rnd.sample(LABELS, rnd.randint(0, 2)),
            "year": 2000 + i % 7,
        }
        for i in range(n)
    ]


@pytest.fixture(scope="module")
def dense_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Index, list[Passage]]]:
    d = tmp_path_factory.mktemp("dense")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SLEUTH_CACHE_DIR", str(d / "cache"))
        src = d / "c.jsonl"
        src.write_text("\n".join(json.dumps(r) for r in _corpus()), encoding="utf-8")
        idx = Index.build([src], d / "ix", dense=True, default_acl=())
        yield idx, [p for _, p in idx.store.iter_live()]


def test_dense_build_manifest_modes_and_embedding_cache(
    dense_index: tuple[Index, list[Passage]], tmp_path: Path
) -> None:
    idx, _ = dense_index
    assert idx.has_vectors and idx.default_mode == "hybrid"
    assert idx.manifest["embedder"] == "all-MiniLM-L6-v2"
    assert np.load(idx.gen / "vectors.npy").shape == (40, 384)
    q = "lava from an erupting mountain"
    dense = idx.search(q, 3, mode="dense")
    assert "Volcanoes" in dense[0].text, [p.text for p in dense]
    hybrid = idx.search(q, 3)  # default mode: hybrid
    assert "Volcanoes" in hybrid[0].text
    lexical = idx.search(q, 3, mode="lexical")
    assert "Volcanoes" in lexical[0].text  # "lava"
    with pytest.raises(SearchError, match="unknown search mode"):
        idx.search(q, 3, mode="magic")
    # a rebuild of the same texts embeds nothing: every vector comes from the cache
    cache = EmbeddingCache()
    try:
        n_cached = cache.conn.execute("SELECT COUNT(*) FROM emb").fetchone()[0]
    finally:
        cache.close()
    assert n_cached >= 40
    src = tmp_path / "c.jsonl"
    src.write_text("\n".join(json.dumps(r) for r in _corpus()), encoding="utf-8")
    again = Index.build([src], tmp_path / "ix", dense=True, default_acl=())
    assert again.last_report is not None and again.last_report.embed_seconds < 2.0
    assert np.array_equal(np.load(again.gen / "vectors.npy"), np.load(idx.gen / "vectors.npy"))


def test_dense_add_extends_vectors(dense_index: tuple[Index, list[Passage]], tmp_path: Path) -> None:
    idx, _ = dense_index
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(idx.root, copy)
    ix2 = Index.open(copy)
    extra = tmp_path / "x.jsonl"
    extra.write_text(
        json.dumps({"id": "new", "text": "Penguins huddle together in the Antarctic winter.", "acl": "all"})
    )
    ix2.add([extra])
    assert np.load(ix2.gen / "vectors.npy").shape == (41, 384)
    assert ix2.search("birds in the cold south pole", 1, Filters.parse(["acl=all"]), mode="dense")[0].doc_id == "new"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    q=st.sampled_from(
        ["cats and pets", "music performance", "money and banks", "ice and mountains", "yeast bread sea"]
    ),
    k=st.integers(1, 45),
    acl=st.one_of(st.none(), st.lists(st.sampled_from(LABELS), max_size=2)),
    lo=st.one_of(st.none(), st.integers(1999, 2007)),
    mode=st.sampled_from(["dense", "hybrid", "lexical"]),
)
def test_property_no_out_of_scope_passage_dense_hybrid(
    dense_index: tuple[Index, list[Passage]], q: str, k: int, acl: list[str] | None, lo: int | None, mode: str
) -> None:
    idx, corpus = dense_index
    f = Filters.make(acl=acl, ranges={"year": (lo, None)} if lo is not None else None)
    got = idx.search(q, k, f, mode=mode)
    assert all(f.matches(p) for p in got), "an out-of-scope passage was returned"
    visible = [p for p in corpus if f.matches(p)]
    if mode == "dense":
        # every visible passage has a vector: the scope is applied before the cut
        assert len(got) == min(k, len(visible))
    else:
        assert len(got) <= min(k, len(visible))


def test_rrf_fuses_deterministically() -> None:
    a = [(1, 9.0), (2, 8.0), (3, 7.0)]
    b = [(3, 0.9), (1, 0.8), (4, 0.7)]
    fused = rrf([a, b], 3)
    assert [r for r, _ in fused] == [1, 3, 2]
    assert rrf([a, b], 10) == rrf([a, b], 10) and len(rrf([a, b], 10)) == 4
    assert rrf([], 3) == []


def test_ivf_path_respects_scope(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Above EXACT_MAX visible rows the faiss IVF index searches with a bitmap selector
    (the threshold is lowered here so that a small index takes that path)."""
    import sleuth.search.dense as dense_mod

    monkeypatch.setattr(dense_mod, "EXACT_MAX", 500)
    n, dim = 6_000, 16
    rnd = np.random.default_rng(0)
    acl_of = rnd.integers(0, 3, size=n)
    lex = LexicalIndex(tmp_path / "lex", create=True)
    lex.add((i, Passage(id=f"r{i}", text="x", doc_id=f"r{i}", acl=[LABELS[acl_of[i]]])) for i in range(n))
    lex.commit()
    vecs = rnd.normal(size=(n, dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    index = build_faiss(vecs)
    assert index.nlist == 77 and index.ntotal == n
    di = DenseIndex(vecs, index, embedder=None, lexical=lex)  # type: ignore[arg-type]
    q = vecs[:20] + 0.01
    for labels in (["all"], ["hr", "finance"], ["all", "hr", "finance"]):
        f = Filters.make(acl=labels)
        allowed = {i for i in range(n) if LABELS[acl_of[i]] in labels}
        res = di._search_ivf(q, 10, di.visible(f))
        assert all(len(r) == 10 for r in res)
        assert all(row in allowed for r in res for row, _ in r)
        assert di.search_vectors(q, 10, f) == res
        # a query equal to a visible stored vector finds it first
        for i in range(20):
            if i in allowed:
                assert res[i][0][0] == i
    # tiny visible set: exact path over just those rows
    f = Filters.make(acl=["nobody"])
    assert di.search_vectors(q, 10, f) == [[] for _ in range(20)]
