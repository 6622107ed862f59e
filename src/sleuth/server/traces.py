"""Bounded stores of finished runs (in memory, or a SQLite file), each readable only by its owner.

The owner is (principal, canonical scope); any other reader gets nothing, as if the trace did not exist.
Retention is per principal (``capacity`` each); anonymous runs are not stored (:meth:`Runtime.keep_trace`).
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

from sleuth.kvcache import private_sqlite, use_wal

from .encoding import dumps
from .settings import ServerConfigError


class TraceStore:
    """Traces in memory: at most ``capacity`` per principal (its oldest evicted first, so another
    principal's runs never evict yours), and ``max_bytes`` in all (past it, the oldest trace of the
    principal holding the most bytes goes first)."""

    def __init__(self, capacity: int = 256, max_bytes: int = 64 * 1024 * 1024) -> None:
        self.capacity = capacity
        self.max_bytes = max_bytes
        self._items: dict[str, tuple[tuple[str, str], dict[str, Any], int]] = {}
        self._by: dict[str, OrderedDict[str, int]] = {}  # principal id -> its trace ids (oldest first) -> size
        self._held: dict[str, int] = {}  # principal id -> bytes
        self._bytes = 0
        self._lock = threading.Lock()

    def put(self, trace_id: str, owner: tuple[str, str], result: dict[str, Any]) -> None:
        size = len(json.dumps(result, ensure_ascii=False, default=str))
        if size > self.max_bytes:
            return  # one giant run must not evict everything else
        who = owner[0]
        with self._lock:
            self._drop(trace_id)
            self._items[trace_id] = (owner, result, size)
            self._by.setdefault(who, OrderedDict())[trace_id] = size
            self._held[who] = self._held.get(who, 0) + size
            self._bytes += size
            mine = self._by[who]
            while len(mine) > self.capacity:
                self._drop(next(iter(mine)))
            while self._bytes > self.max_bytes:  # never the trace just put (it alone fits)
                held = {p: n - (size if p == who else 0) for p, n in self._held.items() if p != who or len(mine) > 1}
                biggest = max(held, key=lambda p: held[p])
                self._drop(next(t for t in self._by[biggest] if t != trace_id))

    def _drop(self, trace_id: str) -> None:
        old = self._items.pop(trace_id, None)
        if old is None:
            return
        who, size = old[0][0], old[2]
        self._by[who].pop(trace_id, None)
        self._held[who] -= size
        self._bytes -= size
        if not self._by[who]:
            del self._by[who], self._held[who]

    def get(self, trace_id: str, owner: tuple[str, str]) -> dict[str, Any] | None:
        with self._lock:
            item = self._items.get(trace_id)
            if item is None or item[0] != owner:
                return None
            return item[1]

    def count(self, principal_id: str) -> int:
        with self._lock:
            return len(self._by.get(principal_id, ()))

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    @property
    def nbytes(self) -> int:
        return self._bytes


class SqliteTraceStore:
    """The same store in a SQLite file (WAL, created 0600), so traces outlive a restart; owners are stored as a
    salted hash, never anything derived from a key (docs/server.md).
    """

    def __init__(self, path: str | Path, capacity: int = 256, max_bytes: int = 64 * 1024 * 1024) -> None:
        self.path = Path(path)
        self.capacity = capacity
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            private_sqlite(self.path)
            self._db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None)
            use_wal(self._db)
            private_sqlite(self.path)
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS traces (id TEXT PRIMARY KEY, owner TEXT NOT NULL, "
                "seq INTEGER NOT NULL, size INTEGER NOT NULL, body TEXT NOT NULL, who TEXT NOT NULL DEFAULT '')"
            )
            columns = {row[1] for row in self._db.execute("PRAGMA table_info(traces)")}
            if "who" not in columns:  # a file from before per-principal retention: its traces share one quota
                self._db.execute("ALTER TABLE traces ADD COLUMN who TEXT NOT NULL DEFAULT ''")
            self._db.execute("CREATE INDEX IF NOT EXISTS traces_seq ON traces(seq)")
            self._db.execute("CREATE INDEX IF NOT EXISTS traces_who ON traces(who, seq)")
            self._db.execute("CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL)")
            self._db.execute("INSERT OR IGNORE INTO meta VALUES ('salt', ?)", (secrets.token_hex(16),))
            self._salt = self._db.execute("SELECT v FROM meta WHERE k = 'salt'").fetchone()[0]
        except (sqlite3.Error, OSError) as e:
            raise TraceStoreError(f"cannot use {self.path} as a trace store: {e}") from e

    def _owner(self, owner: tuple[str, str]) -> str:
        return hashlib.sha256(f"{self._salt}\0{owner[0]}\0{owner[1]}".encode()).hexdigest()

    def _who(self, principal_id: str) -> str:
        return hashlib.sha256(f"{self._salt}\0principal\0{principal_id}".encode()).hexdigest()

    def put(self, trace_id: str, owner: tuple[str, str], result: dict[str, Any]) -> None:
        body = dumps(result)  # a lone surrogate (from a model or a corpus) escaped: SQLite stores UTF-8
        size = len(body)
        if size > self.max_bytes:
            return
        who = self._who(owner[0])
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                seq = db.execute("SELECT COALESCE(MAX(seq), 0) FROM traces").fetchone()[0] + 1
                db.execute(
                    "INSERT OR REPLACE INTO traces (id, owner, seq, size, body, who) VALUES (?, ?, ?, ?, ?, ?)",
                    (trace_id, self._owner(owner), seq, size, body, who),
                )
                # this principal's oldest beyond its quota
                db.execute(
                    "DELETE FROM traces WHERE id IN (SELECT id FROM traces WHERE who = ? ORDER BY seq DESC "
                    "LIMIT -1 OFFSET ?)",
                    (who, self.capacity),
                )
                # past the byte bound: the oldest of whoever holds the most
                total = db.execute("SELECT COALESCE(SUM(size), 0) FROM traces").fetchone()[0]
                while total > self.max_bytes:  # never the trace just put (it alone fits)
                    biggest = db.execute(
                        "SELECT who FROM traces WHERE id != ? GROUP BY who ORDER BY SUM(size) DESC LIMIT 1",
                        (trace_id,),
                    ).fetchone()[0]
                    old_id, old_size = db.execute(
                        "SELECT id, size FROM traces WHERE who = ? AND id != ? ORDER BY seq LIMIT 1",
                        (biggest, trace_id),
                    ).fetchone()
                    db.execute("DELETE FROM traces WHERE id = ?", (old_id,))
                    total -= old_size
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

    def count(self, principal_id: str) -> int:
        with self._lock:
            row = self._db.execute("SELECT COUNT(*) FROM traces WHERE who = ?", (self._who(principal_id),))
            return int(row.fetchone()[0])

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
