"""The SQLite key-value store under writers that open a new file together."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import threading
from pathlib import Path

from sleuth.kvcache import KVCache


def _open_and_write(path: str, k: int, barrier, errors: list) -> None:
    try:
        barrier.wait()
        store = KVCache(path, table="t")
        for i in range(10):
            key = f"q{(i + k) % 12}"
            if store.get(key) is None:
                store.set(key, {"k": k, "i": i})
        store.close()
    except BaseException as e:  # the test reports every failure
        errors.append(repr(e))


def test_threads_opening_a_new_file_together_all_succeed(tmp_path):
    # Switching a fresh file to WAL takes an exclusive lock and SQLite answers
    # "database is locked" at once (no busy handler) while another connection
    # holds a lock: before the fix about one trial in ten lost a writer here.
    errors: list[str] = []
    for trial in range(60):
        path = str(tmp_path / f"c{trial}.sqlite")
        barrier = threading.Barrier(4)
        threads = [threading.Thread(target=_open_and_write, args=(path, k, barrier, errors)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert KVCache(path, table="t").__len__() == 12
    assert errors == []


def _process_worker(path: str, k: int, barrier, queue) -> None:
    errors: list[str] = []
    _open_and_write(path, k, barrier, errors)
    queue.put(errors)


def test_processes_opening_a_new_file_together_all_succeed(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    errors: list[str] = []
    for trial in range(3):
        path = str(tmp_path / f"p{trial}.sqlite")
        barrier = ctx.Barrier(3)
        queue = ctx.Queue()
        procs = [ctx.Process(target=_process_worker, args=(path, k, barrier, queue)) for k in range(3)]
        for p in procs:
            p.start()
        for _ in procs:
            errors.extend(queue.get(timeout=60))
        for p in procs:
            p.join(timeout=60)
        assert KVCache(path, table="t").__len__() == 12
    assert errors == []


def test_the_file_stays_in_wal_mode_and_a_reopen_changes_nothing(tmp_path):
    path = tmp_path / "w.sqlite"
    a = KVCache(path)
    a.set("x", [1, "二"])
    a.close()
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    b = KVCache(path)
    assert b.get("x") == [1, "二"] and len(b) == 1


def test_a_damaged_row_is_a_miss(tmp_path):
    path = tmp_path / "d.sqlite"
    store = KVCache(path, table="t")
    store.set("x", {"ok": True})
    with sqlite3.connect(path) as c:
        c.execute("UPDATE t SET v='{not json' WHERE k='x'")
    assert store.get("x") is None


def _open_embedding_cache(path: str) -> None:
    from sleuth.search.embedding import EmbeddingCache

    EmbeddingCache(path).conn.close()


def _open_trace_store(path: str) -> None:
    from sleuth.server.traces import SqliteTraceStore

    SqliteTraceStore(path)._db.close()


def test_the_other_sqlite_files_open_together_too(tmp_path):
    # the embedding cache (shared by Dask workers) and the service's trace store
    # (shared by its worker processes) switch their files to WAL the same way
    errors: list[str] = []

    def opener(fn, path, barrier):
        try:
            barrier.wait()
            fn(path)
        except BaseException as e:
            errors.append(repr(e))

    for fn in (_open_embedding_cache, _open_trace_store):
        for trial in range(40):
            path = str(tmp_path / f"{fn.__name__}{trial}.sqlite")
            barrier = threading.Barrier(4)
            threads = [threading.Thread(target=opener, args=(fn, path, barrier)) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    assert errors == []


def test_cache_and_audit_files_are_private_whatever_the_umask(tmp_path: Path) -> None:
    """0600 from creation under umask 000 (WAL side files and rotated audit files too), and an
    existing world-readable cache file is tightened when it is opened."""
    import stat

    from sleuth.kvcache import KVCache
    from sleuth.server.audit import AuditLog

    old = os.umask(0)
    try:
        cache = KVCache(tmp_path / "new" / "c.sqlite")
        cache.set("k", {"passage": "restricted"})
        (tmp_path / "old.sqlite").touch(0o644)
        KVCache(tmp_path / "old.sqlite").set("k", 1)
        audit = AuditLog(tmp_path / "audit" / "a.jsonl", max_bytes=300, backups=2)
        for i in range(10):
            audit.denied(status=403, path="/v1/ask", reason=f"filters: acl {i} is outside your scope")
        audit.close()
    finally:
        os.umask(old)
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    names = {p.name for p in files}
    assert {"c.sqlite", "c.sqlite-wal", "old.sqlite", "a.jsonl", "a.jsonl.1", "a.jsonl.2"} <= names, names
    assert {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in files} == {p.name: "0o600" for p in files}
