"""Bounded stores of finished runs (in memory, or a SQLite file), each readable only by its owner.

The owner of a trace is the pair (API key that asked, canonical scope the run had).
A read with another key or another scope gets nothing, exactly as if the trace
did not exist, so neither answers nor the existence of a run leak across scopes.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import sqlite3
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from sleuth.kvcache import use_wal

from .encoding import dumps
from .settings import ServerConfigError


class TraceStore:
    def __init__(self, capacity: int = 256, max_bytes: int = 64 * 1024 * 1024) -> None:
        self.capacity = capacity
        self.max_bytes = max_bytes
        self._items: OrderedDict[str, tuple[tuple[str, str], dict[str, Any], int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def put(self, trace_id: str, owner: tuple[str, str], result: dict[str, Any]) -> None:
        size = len(json.dumps(result, ensure_ascii=False, default=str))
        if size > self.max_bytes:
            return  # one giant run must not evict everything else
        with self._lock:
            old = self._items.pop(trace_id, None)
            if old is not None:
                self._bytes -= old[2]
            self._items[trace_id] = (owner, result, size)
            self._bytes += size
            while len(self._items) > self.capacity or self._bytes > self.max_bytes:
                _, (_, _, sz) = self._items.popitem(last=False)
                self._bytes -= sz

    def get(self, trace_id: str, owner: tuple[str, str]) -> dict[str, Any] | None:
        with self._lock:
            item = self._items.get(trace_id)
            if item is None or item[0] != owner:
                return None
            return item[1]

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    @property
    def nbytes(self) -> int:
        return self._bytes


class SqliteTraceStore:
    """The same store kept in a SQLite file, so traces outlive a server restart.

    Bounded like :class:`TraceStore` (oldest evicted first). Owners are stored as a
    salted hash (the salt is random per file), so the file never holds anything
    derived from an API key that could be checked against a guess without it.
    WAL mode and one short transaction per call: a crash loses at most the trace
    being written, never the file.
    """

    def __init__(self, path: str | Path, capacity: int = 256, max_bytes: int = 64 * 1024 * 1024) -> None:
        self.path = Path(path)
        self.capacity = capacity
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None)
            use_wal(self._db)
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS traces (id TEXT PRIMARY KEY, owner TEXT NOT NULL, "
                "seq INTEGER NOT NULL, size INTEGER NOT NULL, body TEXT NOT NULL)"
            )
            self._db.execute("CREATE INDEX IF NOT EXISTS traces_seq ON traces(seq)")
            self._db.execute("CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL)")
            self._db.execute("INSERT OR IGNORE INTO meta VALUES ('salt', ?)", (secrets.token_hex(16),))
            self._salt = self._db.execute("SELECT v FROM meta WHERE k = 'salt'").fetchone()[0]
        except sqlite3.Error as e:
            raise TraceStoreError(f"cannot use {self.path} as a trace store: {e}") from e

    def _owner(self, owner: tuple[str, str]) -> str:
        return hashlib.sha256(f"{self._salt}\0{owner[0]}\0{owner[1]}".encode()).hexdigest()

    def put(self, trace_id: str, owner: tuple[str, str], result: dict[str, Any]) -> None:
        body = dumps(result)  # a lone surrogate (from a model or a corpus) escaped: SQLite stores UTF-8
        size = len(body)
        if size > self.max_bytes:
            return
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                seq = db.execute("SELECT COALESCE(MAX(seq), 0) FROM traces").fetchone()[0] + 1
                db.execute(
                    "INSERT OR REPLACE INTO traces (id, owner, seq, size, body) VALUES (?, ?, ?, ?, ?)",
                    (trace_id, self._owner(owner), seq, size, body),
                )
                n, total = db.execute("SELECT COUNT(*), COALESCE(SUM(size), 0) FROM traces").fetchone()
                if n > self.capacity or total > self.max_bytes:  # evict the oldest until both bounds hold
                    doomed = []
                    for old_id, old_size in db.execute("SELECT id, size FROM traces ORDER BY seq"):
                        if n <= self.capacity and total <= self.max_bytes:
                            break
                        doomed.append((old_id,))
                        n, total = n - 1, total - old_size
                    db.executemany("DELETE FROM traces WHERE id = ?", doomed)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    def get(self, trace_id: str, owner: tuple[str, str]) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute("SELECT owner, body FROM traces WHERE id = ?", (trace_id,)).fetchone()
        if row is None or not hmac.compare_digest(row[0], self._owner(owner)):
            return None
        return json.loads(row[1])

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM traces").fetchone()[0])

    @property
    def nbytes(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COALESCE(SUM(size), 0) FROM traces").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()


class TraceStoreError(ServerConfigError):
    """The trace store file cannot be opened or created."""


def open_trace_store(path: str | Path | None, capacity: int, max_bytes: int) -> TraceStore | SqliteTraceStore:
    """In memory without a path; a SQLite file that survives restarts with one."""
    if path is None:
        return TraceStore(capacity, max_bytes)
    return SqliteTraceStore(path, capacity, max_bytes)
