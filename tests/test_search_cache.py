"""The search cache keys on source (and its generation), query, k, mode and scope:
one user's results are never served to another."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sleuth.kvcache import KVCache
from sleuth.search import Filters, Index, open_retriever
from sleuth.search.cache import CachedRetriever


@pytest.fixture()
def policy_dir(tmp_path: Path, data_dir: Path) -> Path:
    Index.build([data_dir / "policy_zh/corpus.jsonl"], tmp_path / "ix")
    return tmp_path / "ix"


def test_cache_keys_on_scope_and_never_crosses_users(policy_dir: Path, tmp_path: Path) -> None:
    kv = KVCache(tmp_path / "c.sqlite", table="search")
    r = open_retriever(policy_dir, cache=kv)
    assert isinstance(r, CachedRetriever)
    q = "内部审计对差旅报销的抽查比例是多少？"
    finance = Filters.parse(["acl=all,finance"])
    everyone = Filters.parse(["acl=all"])
    first = r.search(q, 5, finance)
    assert "fin-audit-2025" in {p.doc_id for p in first}
    assert (r.hits, r.misses) == (0, 1)
    second = r.search(q, 5, everyone)
    assert "fin-audit-2025" not in {p.doc_id for p in second}, "a finance user's cached results leaked"
    assert (r.hits, r.misses) == (0, 2)
    again = r.search(q, 5, finance)
    assert [p.to_dict() for p in again] == [p.to_dict() for p in first] and r.hits == 1
    assert r.key(q, 5, finance) != r.key(q, 5, everyone) != r.key(q, 5, None)
    assert r.key(q, 5, finance) != r.key(q, 4, finance) != r.key(q, 5, finance, mode="hybrid")
    # every stored entry holds only passages within its own scope
    rows = kv._conn().execute("SELECT v FROM search").fetchall()
    assert len(rows) == 2
    stored = [[d["doc_id"] for d in json.loads(v)] for (v,) in rows]
    assert sum("fin-audit-2025" in s for s in stored) == 1


def test_cache_invalidated_by_a_new_generation_and_switches(
    policy_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "c2.sqlite"
    r = open_retriever(policy_dir, cache=path)
    assert isinstance(r, CachedRetriever)
    k1 = r.key("预算", 3, None)
    extra = tmp_path / "e.jsonl"
    extra.write_text(
        json.dumps({"id": "n1", "title": "预算补充", "text": "预算调整的补充说明。", "acl": "all"}), encoding="utf-8"
    )
    idx = Index.open(policy_dir)
    idx.add([extra])
    r2 = open_retriever(policy_dir, cache=path)
    assert isinstance(r2, CachedRetriever)
    assert r2.key("预算", 3, None) != k1, "an extended index is a different source"
    assert "n1" in {p.doc_id for p in r2.search("预算 补充", 3)}
    monkeypatch.setenv("SLEUTH_SEARCH_CACHE", "0")
    off = open_retriever(policy_dir, cache=path)
    assert isinstance(off, CachedRetriever) and not off.enabled
    off.search("预算", 3)
    off.search("预算", 3)
    assert off.hits == 0
    monkeypatch.delenv("SLEUTH_SEARCH_CACHE")
    fresh = CachedRetriever(Index.open(policy_dir), path=path, refresh=True)
    fresh.search("预算 补充", 3)
    assert fresh.hits == 0 and fresh.misses == 1
    assert isinstance(open_retriever(policy_dir), Index), "local indexes are not cached unless asked"
