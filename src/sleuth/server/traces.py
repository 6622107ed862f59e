"""Bounded stores of finished runs (a SQLite file, or the same in memory), each readable only by its owner.

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
from pathlib import Path
from typing import Any

from sleuth.kvcache import private_sqlite, use_wal

from .encoding import dumps
from .settings import ServerConfigError


class SqliteTraceStore:
    """Traces in a SQLite file (WAL, created 0600), so they outlive a restart, or in memory without a ``path`` (a
    restart empties it).  At most ``capacity`` per principal (its oldest evicted first, so another principal's
    runs never evict yours), and ``max_bytes`` in all (past it, the oldest trace of the principal holding the most
    bytes goes first).  Owners are stored as a salted hash, never anything derived from a key (docs/server.md).
    """

    def __init__(self, path: str | Path | None, capacity: int = 256, max_bytes: int = 64 * 1024 * 1024) -> None:
        self.path = Path(path) if path is not None else None
        self.capacity = capacity
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        try:
            if self.path is None:
                self._db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
            else:
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


def open_trace_store(path: str | Path | None, capacity: int, max_bytes: int) -> SqliteTraceStore:
    """In memory without a path; a SQLite file that survives restarts with one."""
    return SqliteTraceStore(path, capacity, max_bytes)
