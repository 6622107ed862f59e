"""PostgreSQL (+ pgvector) as an external search engine: :class:`PgRetriever` over one ``sleuth_passages`` table.

Full text as ``simple`` tsvectors, optional HNSW vectors (scoped vector queries answered exactly), the scope
terms as GIN-indexed arrays in ``WHERE``, hybrid by RRF (docs/knowledge.md).  :class:`LocalPostgres` starts
a private PostgreSQL 16 from the ``pgserver`` package on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import platform
import socket
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sleuth.search.base import Filters, Passage, SearchError, SearchUnavailable
from sleuth.search.hybrid import rrf
from sleuth.search.scope import passage_terms, values_in_range
from sleuth.search.tokenize import tokenize

__all__ = ["LocalPostgres", "PgRetriever"]

#: the passage fields stored as text columns, in column order
_TEXT_FIELDS = ("id", "doc_id", "title", "text", "source", "section", "version", "region", "url")
_COLUMNS = f"row, {', '.join(_TEXT_FIELDS)}, acl, metadata"


def _connect(dsn: str) -> Any:
    try:
        import psycopg2
    except ImportError as e:  # pragma: no cover - depends on the install
        raise SearchUnavailable("the PostgreSQL source needs psycopg2-binary (the 'pg' extra)") from e
    try:
        conn = psycopg2.connect(dsn, connect_timeout=10)
    except psycopg2.OperationalError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise SearchUnavailable(f"PostgreSQL is unreachable ({first})") from e
    conn.autocommit = True
    return conn


class PgRetriever:
    """Search passages stored in PostgreSQL; see the module doc."""

    def __init__(
        self,
        dsn: str,
        *,
        table: str = "sleuth_passages",
        mode: str | None = None,
        embedder: str | None = None,
    ) -> None:
        if not table.isidentifier():
            raise SearchError(f"bad table name {table!r}")
        self.dsn = dsn
        self.table = table
        self.conn = _connect(dsn)
        self.embedder_name = embedder
        self.mode = mode
        self.name = f"pg:{table}"
        self._dim: int | None = None

    # ------------------------------------------------------------------ schema and loading

    def create(self, *, dim: int | None = None, drop: bool = False) -> None:
        """Create the table and its indexes (``dim``: vector size, ``None`` for full text only)."""
        t = self.table
        with self.conn.cursor() as cur:
            if drop:
                cur.execute(f"DROP TABLE IF EXISTS {t}")
            if dim:
                cur.execute("CREATE EXTENSION IF NOT EXISTS vector")
            emb = f", embedding vector({int(dim)})" if dim else ""
            cur.execute(
                f"""CREATE TABLE IF NOT EXISTS {t} (
                    row bigint PRIMARY KEY, id text UNIQUE NOT NULL, doc_id text NOT NULL, title text, text text,
                    source text, section text, version text, region text, url text,
                    acl text[] NOT NULL, eq text[] NOT NULL, rng text[] NOT NULL, metadata jsonb,
                    tsv tsvector NOT NULL{emb})"""
            )
            cur.execute(f"CREATE INDEX IF NOT EXISTS {t}_tsv ON {t} USING gin (tsv)")
            for col in ("acl", "eq", "rng"):
                cur.execute(f"CREATE INDEX IF NOT EXISTS {t}_{col} ON {t} USING gin ({col})")
            if dim:
                cur.execute(f"CREATE INDEX IF NOT EXISTS {t}_hnsw ON {t} USING hnsw (embedding vector_cosine_ops)")
            cur.execute(f"COMMENT ON TABLE {t} IS %s", (json.dumps({"embedder": self.embedder_name, "dim": dim}),))

    def load(self, passages: Iterable[Passage], vectors: np.ndarray | None = None, *, start_row: int = 0) -> int:
        """Insert passages (and their unit vectors, row-aligned); returns how many."""
        from psycopg2.extras import execute_values

        rows = []
        for i, p in enumerate(passages):
            acl, eq, rng = passage_terms(p)
            rec = [
                start_row + i,
                *(getattr(p, f) for f in _TEXT_FIELDS),
                acl,
                eq,
                rng,
                json.dumps(p.metadata, ensure_ascii=False),
                " ".join(tokenize(f"{p.title}\n{p.section}\n{p.text}")),
            ]
            if vectors is not None:
                rec.append(_vec(vectors[i]))
            rows.append(tuple(rec))
        if not rows:
            return 0
        cols = f"row, {', '.join(_TEXT_FIELDS)}, acl, eq, rng, metadata, tsv"
        tmpl = "(%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s::jsonb,to_tsvector('simple', %s)"
        if vectors is not None:
            cols += ", embedding"
            tmpl += ", %s::vector"
        with self.conn.cursor() as cur:
            execute_values(
                cur, f"INSERT INTO {self.table} ({cols}) VALUES %s", rows, template=tmpl + ")", page_size=500
            )
            cur.execute(f"ANALYZE {self.table}")
        return len(rows)

    def load_index(self, index: Any, *, drop: bool = True) -> int:
        """Copy every live passage (and vector) of an embedded :class:`~sleuth.search.index.Index`."""
        vectors = np.load(index.gen / "vectors.npy") if index.has_vectors else None
        if index.has_vectors:
            self.embedder_name = index.manifest["embedder"]
        self.create(dim=None if vectors is None else vectors.shape[1], drop=drop)
        live = list(index.store.iter_live())
        vecs = None if vectors is None else vectors[[r for r, _ in live]]
        return self.load([p for _, p in live], vecs)

    # ------------------------------------------------------------------ searching

    def _has_vectors(self) -> bool:
        if self._dim is None:
            with self.conn.cursor() as cur:
                cur.execute(
                    "SELECT atttypmod FROM pg_attribute WHERE attrelid = %s::regclass AND attname = 'embedding' AND NOT attisdropped",
                    (self.table,),
                )
                r = cur.fetchone()
                self._dim = int(r[0]) if r else 0
                cur.execute("SELECT obj_description(%s::regclass)", (self.table,))
                c = cur.fetchone()
                if c and c[0] and not self.embedder_name:
                    self.embedder_name = json.loads(c[0]).get("embedder")
        return bool(self._dim)

    def _where(self, cur: Any, filters: Filters | None) -> tuple[str, list[Any]]:
        if filters is None or filters.is_empty():
            return "TRUE", []
        clauses, args = [], []
        if filters.acl is not None:
            clauses.append("acl && %s::text[]")
            args.append(sorted(filters.acl))
        for key, allowed in filters.equals:
            clauses.append("eq && %s::text[]")
            args.append([f"{key}={v}" for v in allowed])
        for key, (lo, hi) in filters.ranges:
            prefix = f"{key}="
            cur.execute(
                f"SELECT DISTINCT t FROM (SELECT unnest(rng) AS t FROM {self.table}) s WHERE left(t, %s) = %s",
                (len(prefix), prefix),
            )
            rendered = [t[len(prefix) :] for (t,) in cur.fetchall()]
            clauses.append("rng && %s::text[]")
            args.append([prefix + r for r in values_in_range(key, rendered, lo, hi)])
        return " AND ".join(clauses), args

    def _lexical(self, cur: Any, query: str, k: int, where: str, args: list[Any]) -> list[tuple[int, float]]:
        toks = list(dict.fromkeys(tokenize(query)))
        if not toks:
            return []
        tsq = " | ".join(f"'{t}'" for t in toks)
        cur.execute(
            f"""SELECT row, ts_rank_cd(tsv, q) AS score FROM {self.table}, to_tsquery('simple', %s) q
                WHERE tsv @@ q AND {where} ORDER BY score DESC, row LIMIT %s""",
            [tsq, *args, k],
        )
        return [(int(r), float(s)) for r, s in cur.fetchall()]

    def _dense(
        self, cur: Any, qv: np.ndarray, k: int, where: str, args: list[Any], scoped: bool
    ) -> list[tuple[int, float]]:
        if scoped:
            cur.execute("SET LOCAL enable_indexscan = off")
        cur.execute(
            f"""SELECT row, 1 - (embedding <=> %s::vector) AS score FROM {self.table}
                WHERE embedding IS NOT NULL AND {where} ORDER BY embedding <=> %s::vector, row LIMIT %s""",
            [_vec(qv), *args, _vec(qv), k],
        )
        return [(int(r), float(s)) for r, s in cur.fetchall()]

    def search(
        self, query: str, k: int = 5, filters: Filters | None = None, *, mode: str | None = None
    ) -> list[Passage]:
        return self.search_batch([query], k, filters, mode=mode)[0]

    def search_batch(
        self, queries: Sequence[str], k: int = 5, filters: Filters | None = None, *, mode: str | None = None
    ) -> list[list[Passage]]:
        import psycopg2

        has_vec = self._has_vectors()
        mode = mode or self.mode or ("hybrid" if has_vec else "lexical")
        if mode not in ("lexical", "dense", "hybrid"):
            raise SearchError(f"unknown search mode {mode!r}")
        if mode != "lexical" and not has_vec:
            raise SearchError(f"table {self.table} has no vectors; mode={mode} needs them")
        if k <= 0:
            return [[] for _ in queries]
        qvs = None
        if mode != "lexical":
            from sleuth.search.dense import get_embedder

            qvs = get_embedder(self.embedder_name).embed(list(queries), is_query=True)
        out = []
        try:
            with self.conn.cursor() as cur:
                cur.execute("BEGIN")
                where, args = self._where(cur, filters)
                scoped = bool(args) or where != "TRUE"
                for i, q in enumerate(queries):
                    if mode == "lexical":
                        hits = self._lexical(cur, q, k, where, args)
                    elif mode == "dense":
                        assert qvs is not None
                        hits = self._dense(cur, qvs[i], k, where, args, scoped)
                    else:
                        assert qvs is not None
                        depth = max(4 * k, 40)
                        hits = rrf(
                            [
                                self._lexical(cur, q, depth, where, args),
                                self._dense(cur, qvs[i], depth, where, args, scoped),
                            ],
                            k,
                        )
                    out.append(self._fetch(cur, hits, filters))
                cur.execute("COMMIT")
        except psycopg2.OperationalError as e:
            raise SearchUnavailable(f"PostgreSQL connection failed ({type(e).__name__})") from e
        except psycopg2.Error as e:
            raise SearchError(f"PostgreSQL search failed: {str(e).strip().splitlines()[0]}") from e
        return out

    def _fetch(self, cur: Any, hits: list[tuple[int, float]], filters: Filters | None) -> list[Passage]:
        if not hits:
            return []
        cur.execute(f"SELECT {_COLUMNS} FROM {self.table} WHERE row = ANY(%s)", ([r for r, _ in hits],))
        by_row = {}
        for row, *values in cur.fetchall():
            d = {k: v or "" for k, v in zip((*_TEXT_FIELDS, "acl", "metadata"), values, strict=True)}
            meta = d["metadata"]
            d.update(acl=list(d["acl"] or []), metadata=meta if isinstance(meta, dict) else json.loads(meta or "{}"))
            by_row[int(row)] = Passage.from_dict(d)
        out = []
        for row, score in hits:
            p = by_row.get(row)
            if p is None or (filters is not None and not filters.matches(p)):
                continue
            p.score = score
            out.append(p)
        return out

    def count(self, filters: Filters | None = None) -> int:
        """Rows visible within ``filters``."""
        with self.conn.cursor() as cur:
            where, args = self._where(cur, filters)
            cur.execute(f"SELECT COUNT(*) FROM {self.table} WHERE {where}", args)
            return int(cur.fetchone()[0])

    def cache_identity(self) -> str:
        return f"pg:{self.dsn.split('@')[-1]}:{self.table}"

    def close(self) -> None:
        self.conn.close()


def _vec(v: np.ndarray) -> str:
    return "[" + ",".join(f"{float(x):.7g}" for x in np.asarray(v).ravel()) + "]"


class LocalPostgres:
    """A private PostgreSQL 16 + pgvector (pgserver's binaries) on 127.0.0.1.

    ``with LocalPostgres(datadir) as pg: pg.dsn`` - initialised on first use,
    started on a free port, stopped (fast shutdown) on exit.  When run as root,
    the server runs as the unprivileged ``pgserver`` user, as pgserver does.
    """

    def __init__(self, datadir: str | Path, *, host: str = "127.0.0.1", port: int | None = None) -> None:
        self.datadir = Path(datadir).resolve()
        self.host = host
        self.port = port or _free_port(host)
        self.user: str | None = None
        self.dsn = f"postgresql://postgres@{host}:{self.port}/postgres"

    def start(self) -> LocalPostgres:
        try:
            import warnings

            with warnings.catch_warnings():  # platformdirs warns about XDG_RUNTIME_DIR on import
                warnings.simplefilter("ignore")
                from pgserver._commands import POSTGRES_BIN_PATH, initdb, pg_ctl
        except ImportError as e:
            raise SearchUnavailable("starting a local PostgreSQL needs the 'pg' extra (pgserver)") from e
        self._pg_ctl = pg_ctl
        self.datadir.mkdir(parents=True, exist_ok=True)
        if platform.system() != "Windows" and os.geteuid() == 0:
            import pwd
            import stat

            from pgserver.utils import ensure_folder_permissions, ensure_prefix_permissions, ensure_user_exists

            self.user = "pgserver"
            ensure_user_exists(self.user)
            ensure_prefix_permissions(self.datadir)
            ensure_prefix_permissions(POSTGRES_BIN_PATH)
            ensure_folder_permissions(POSTGRES_BIN_PATH, stat.S_IRGRP | stat.S_IROTH | stat.S_IXGRP | stat.S_IXOTH)
            ensure_folder_permissions(POSTGRES_BIN_PATH.parent / "lib", stat.S_IRGRP | stat.S_IROTH)
            pw = pwd.getpwnam(self.user)
            os.chown(self.datadir, pw.pw_uid, pw.pw_gid)
        if not (self.datadir / "PG_VERSION").exists():
            initdb(["--auth=trust", "--encoding=utf8", "-U", "postgres"], pgdata=self.datadir, user=self.user)
        log = self.datadir / "server.log"
        pg_ctl(
            ["-w", "-t", "60", "-o", f"-h {self.host} -p {self.port} -k ''", "-l", str(log), "start"],
            pgdata=self.datadir,
            user=self.user,
            timeout=90,
        )
        return self

    def stop(self) -> None:
        if (self.datadir / "postmaster.pid").exists():
            self._pg_ctl(["-w", "-m", "fast", "stop"], pgdata=self.datadir, user=self.user, timeout=60)

    def __enter__(self) -> LocalPostgres:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
