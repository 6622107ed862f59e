"""A small persistent key-value store on SQLite, shared by the LLM response
cache and the search cache.

* Safe under concurrent writers (threads and processes): WAL journal, a busy
  timeout, one connection per thread, short transactions.
* Keys are SHA-256 digests of a canonical JSON rendering of whatever the caller
  passes, so callers key on *everything* that changes an answer (backend,
  model, prompt, sampling parameters, search scope...).
* Values are JSON.
* Files are created 0600 (:func:`private_file`) whatever the umask: a cached answer or
  search result may hold passages of a restricted scope.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from sleuth.config import settings


def default_cache_dir() -> Path:
    """``$SLEUTH_CACHE_DIR`` or ``~/.cache/sleuth`` (:meth:`sleuth.config.Settings.cache_dir`)."""
    return settings.cache_dir()


def make_key(*parts: Any) -> str:
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


BUSY_TIMEOUT_S = 30.0
#: the mode of every file that may hold restricted text (caches, traces, the audit log)
PRIVATE = 0o600
SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")


def private_file(path: str | Path) -> Path:
    """Create ``path`` (if missing) readable and writable by its owner only, whatever the umask,
    and tighten an existing file of ours to the same mode.  Returns the path."""
    p = Path(path)
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), PRIVATE)
    try:
        if os.fstat(fd).st_mode & 0o777 != PRIVATE:
            try:
                os.fchmod(fd, PRIVATE)
            except PermissionError:  # not our file: leave it as its owner set it
                pass
    finally:
        os.close(fd)
    return p


def private_sqlite(path: str | Path) -> None:
    """:func:`private_file` for an SQLite file and the side files it has now (``-wal``, ``-shm``).
    SQLite creates side files with its database file's mode, so they are 0600 from then on."""
    private_file(path)
    for suffix in SQLITE_SIDE_FILES:
        side = Path(f"{path}{suffix}")
        if side.exists():
            private_file(side)


def use_wal(conn: sqlite3.Connection) -> None:
    """Put the file in WAL mode (a property of the file, kept once set).

    Changing the journal mode takes an exclusive lock and SQLite answers
    "database is locked" at once, without its busy handler, while another
    connection holds any lock -- which is what several threads or processes
    opening a new cache file together meet.  So: read the mode first (a file
    already in WAL needs nothing) and retry the change until the busy timeout.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    pause = 0.005
    while True:
        try:
            mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
            if str(mode).lower() == "wal":
                return
            conn.execute("PRAGMA journal_mode=WAL")
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) and "busy" not in str(e):
                raise
            if time.monotonic() >= deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 0.2)


class KVCache:
    """``get``/``set`` of JSON values in a named table of an SQLite file."""

    def __init__(self, path: str | Path, table: str = "kv") -> None:
        if not table.isidentifier():
            raise ValueError(f"bad table name {table!r}")
        self.path = Path(path).expanduser()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.table = table
        self._local = threading.local()
        with self._conn() as c:
            c.execute(f"CREATE TABLE IF NOT EXISTS {table} (k TEXT PRIMARY KEY, v TEXT NOT NULL, t REAL NOT NULL)")

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None or getattr(self._local, "pid", None) != os.getpid():
            private_sqlite(self.path)  # answers and passages of restricted scopes: the owner's only
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
            use_wal(conn)
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
            self._local.pid = os.getpid()
        return conn

    def get(self, key: str) -> Any | None:
        row = self._conn().execute(f"SELECT v FROM {self.table} WHERE k=?", (key,)).fetchone()
        if row is None:
            return None
        try:
            return json.loads(row[0])
        except json.JSONDecodeError:  # a damaged row is a miss, never an error
            return None

    def set(self, key: str, value: Any) -> None:
        blob = json.dumps(value, ensure_ascii=False, default=str)
        self._conn().execute(
            f"INSERT OR REPLACE INTO {self.table} (k, v, t) VALUES (?, ?, ?)", (key, blob, time.time())
        )

    def delete(self, key: str) -> None:
        self._conn().execute(f"DELETE FROM {self.table} WHERE k=?", (key,))

    def clear(self) -> int:
        cur = self._conn().execute(f"DELETE FROM {self.table}")
        return cur.rowcount

    def __len__(self) -> int:
        return int(self._conn().execute(f"SELECT COUNT(*) FROM {self.table}").fetchone()[0])

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
