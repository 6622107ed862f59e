"""The passage store of an index generation: one SQLite file.

Rows are assigned in insertion order and never reused or renumbered; a replaced document's rows are marked
dead (``alive = 0``).  Scope terms live in the lexical index only.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from sleuth.search.base import Passage

__all__ = ["PassageStore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS passages (
  row INTEGER PRIMARY KEY, id TEXT NOT NULL, doc_id TEXT NOT NULL, hash TEXT NOT NULL,
  alive INTEGER NOT NULL DEFAULT 1, data TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS passages_id ON passages(id);
CREATE INDEX IF NOT EXISTS passages_doc ON passages(doc_id);
CREATE INDEX IF NOT EXISTS passages_hash ON passages(hash);
CREATE TABLE IF NOT EXISTS docs (doc_id TEXT PRIMARY KEY, digest TEXT NOT NULL);
"""


#: what is stored of a passage (its score and routes belong to a search, not to the passage)
_STORED = tuple(f for f in Passage.__dataclass_fields__ if f not in ("score", "found_by"))


class PassageStore:
    """Rows -> passages (JSON) and document digests."""

    def __init__(self, path: str | Path, *, readonly: bool = False) -> None:
        self.path = Path(path)
        self.readonly = readonly
        # one connection, opened now: it stays valid even after a writer publishes a
        # newer generation and removes this one; reads are serialised by a lock
        self._lock = threading.RLock()
        if readonly:
            self.conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False)
        else:
            self.conn = sqlite3.connect(self.path, check_same_thread=False)
            self.conn.execute("PRAGMA journal_mode=OFF")
            self.conn.execute("PRAGMA synchronous=OFF")
            self.conn.executescript(_SCHEMA)

    # -- writing (only ever on a private, not yet published generation)

    def next_row(self) -> int:
        r = self.conn.execute("SELECT MAX(row) FROM passages").fetchone()[0]
        return 0 if r is None else int(r) + 1

    def put_many(self, items: Iterable[tuple[int, str, Passage]]) -> None:
        rows = [
            (row, p.id, p.doc_id, h, json.dumps({f: getattr(p, f) for f in _STORED}, ensure_ascii=False))
            for row, h, p in items
        ]
        self.conn.executemany("INSERT INTO passages (row, id, doc_id, hash, data) VALUES (?,?,?,?,?)", rows)

    def set_docs(self, items: Iterable[tuple[str, str]]) -> None:
        """Record ``(doc_id, digest)`` pairs (:meth:`sleuth.search.doc.Doc.digest`). The SQL names no
        column but the id: indexes written before the digest column got its name keep their own."""
        self.conn.executemany("INSERT OR REPLACE INTO docs VALUES (?, ?)", list(items))

    def kill_doc(self, doc_id: str) -> list[int]:
        """Mark a document's rows dead; returns them."""
        rows = [r for (r,) in self.conn.execute("SELECT row FROM passages WHERE doc_id=? AND alive=1", (doc_id,))]
        self.conn.execute("UPDATE passages SET alive=0 WHERE doc_id=?", (doc_id,))
        self.conn.execute("DELETE FROM docs WHERE doc_id=?", (doc_id,))
        return rows

    def commit(self) -> None:
        self.conn.commit()

    # -- reading

    def doc_digest(self, doc_id: str) -> str | None:
        row = self.conn.execute("SELECT * FROM docs WHERE doc_id=?", (doc_id,)).fetchone()
        return None if row is None else str(row[1])

    def has_hash(self, h: str) -> bool:
        return self.conn.execute("SELECT 1 FROM passages WHERE hash=? AND alive=1 LIMIT 1", (h,)).fetchone() is not None

    def get_many(self, rows: Sequence[int]) -> dict[int, Passage]:
        """Live passages by row (dead or unknown rows are absent)."""
        out: dict[int, Passage] = {}
        for i in range(0, len(rows), 500):
            part = [int(r) for r in rows[i : i + 500]]
            q = f"SELECT row, data FROM passages WHERE alive=1 AND row IN ({','.join('?' * len(part))})"
            with self._lock:
                got = self.conn.execute(q, part).fetchall()
            for r, data in got:
                out[int(r)] = Passage.from_dict(json.loads(data))
        return out

    def iter_live(self, batch: int = 2000) -> Iterator[tuple[int, Passage]]:
        last = -1
        while True:
            with self._lock:
                got = self.conn.execute(
                    "SELECT row, data FROM passages WHERE alive=1 AND row>? ORDER BY row LIMIT ?", (last, batch)
                ).fetchall()
            if not got:
                return
            for r, data in got:
                yield int(r), Passage.from_dict(json.loads(data))
            last = int(got[-1][0])

    def documents(self) -> list[tuple[str, int, Passage]]:
        """``(doc_id, live passages, first passage)`` of every live document, in index order."""
        with self._lock:
            got = self.conn.execute(
                "SELECT doc_id, COUNT(*), MIN(row) FROM passages WHERE alive=1 GROUP BY doc_id ORDER BY MIN(row)"
            ).fetchall()
        first = self.get_many([int(r) for _, _, r in got])
        return [(str(d), int(n), first[int(r)]) for d, n, r in got if int(r) in first]

    def doc_sources(self) -> dict[str, str]:
        """``doc_id -> source`` (the file it was read from) of every live document."""
        return {doc_id: p.source for doc_id, _, p in self.documents()}

    def count_live(self) -> int:
        return int(self.conn.execute("SELECT COUNT(*) FROM passages WHERE alive=1").fetchone()[0])

    def count_docs(self) -> int:
        return int(self.conn.execute("SELECT COUNT(DISTINCT doc_id) FROM passages WHERE alive=1").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self.conn.close()
