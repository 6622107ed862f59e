"""The embedded index: an on-disk folder that can be built, extended, opened and searched.

Writers publish immutable generations (:mod:`sleuth.search.generations`, :mod:`sleuth.search.index_writer`);
this module opens and searches the live one, with :class:`~sleuth.search.base.Filters` enforced inside the
index before the top-k cut and re-checked on each hit.  Layout: docs/knowledge.md.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sleuth.search.base import Filters, Passage, SearchError
from sleuth.search.chunking import DEFAULT_MAX_CHARS
from sleuth.search.generations import (
    SCHEMA_VERSION,
    IndexError_,
    current_gen,
    damaged,
)
from sleuth.search.index_embedder import check_embed_server, query_embed_server
from sleuth.search.index_writer import (
    BuildReport,
    add_generation,
    build_generation,
    remove_generation,
)
from sleuth.search.ingest import DEFAULT_MAX_FILE_MB
from sleuth.search.lexical import LexicalIndex
from sleuth.search.remote import EmbedServer
from sleuth.search.store import PassageStore

MODES = ("lexical", "dense", "hybrid")


class Index:
    """An embedded index folder; also a :class:`~sleuth.search.base.Retriever`.

    Open one with :meth:`open`, create one with :meth:`build`.
    """

    def __init__(self, root: Path, gen: Path, embed_server: EmbedServer | None = None) -> None:
        self.root = root
        self.gen = gen
        rel = f"{gen.name}/"
        try:
            manifest = json.loads((gen / "manifest.json").read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise damaged(root, f"{rel}manifest.json is not valid JSON: {e}") from None
        if not isinstance(manifest, dict) or not isinstance(manifest.get("passages"), int):
            raise damaged(root, f"{rel}manifest.json is not an index manifest")
        self.manifest: dict[str, Any] = manifest
        sources = [str(x) for x in manifest.get("sources", []) if isinstance(x, str)]
        if int(self.manifest.get("schema_version", 0)) != SCHEMA_VERSION:
            raise IndexError_(
                f"{root} has index schema version {self.manifest.get('schema_version')}, this Sleuth reads "
                f"{SCHEMA_VERSION}; rebuild it with `sleuth index build`"
            )
        #: the server the query vectors come from (an index embedded through one); checked against the manifest
        self.embed_server = check_embed_server(root, self.manifest, embed_server)
        if not (gen / "lexical" / "meta.json").is_file():
            raise damaged(root, f"its lexical index {rel}lexical/ is missing", sources)
        try:
            self.lexical = LexicalIndex(gen / "lexical")
        except Exception as e:  # tantivy reports a missing or corrupt segment as ValueError/OSError
            raise damaged(root, f"its lexical index {rel}lexical/ cannot be read: {_first_line(e)}", sources) from None
        self.store = _open_store(root, gen / "passages.sqlite", sources)
        self.name = f"index:{root.name}"
        self._dense: Any = None  # sleuth.search.dense.DenseIndex (vectors opened now, model on first use)
        if manifest.get("dense") and not (gen / "vectors.npy").is_file():
            raise damaged(root, f"it was built with --dense but {rel}vectors.npy is missing", sources)
        if self.has_vectors:
            try:
                self._dense_index()
            except ImportError as e:
                from sleuth.extras import MissingExtra

                raise MissingExtra("dense", f"the index {root} (built with --dense)", [e.name or "faiss"]) from e
            except Exception as e:  # a truncated vectors.npy, a corrupt dense.faiss
                raise damaged(root, f"its vectors in {rel} cannot be read: {_first_line(e)}", sources) from None
        #: the mode used when a search names none (``None``: hybrid where vectors exist)
        self.mode: str | None = None
        self.last_report: BuildReport | None = None

    # ------------------------------------------------------------------ opening

    @classmethod
    def open(
        cls,
        path: str | Path,
        *,
        embed_model: str | None = None,
        embed_base_url: str | None = None,
        embed_server: EmbedServer | None = None,
    ) -> Index:
        """Open the live generation of the index at ``path``.

        An index embedded through a server embeds queries with the same model, on
        ``embed_base_url`` (or ``SLEUTH_EMBED_BASE_URL``, else the server it was built
        with); a query embedder that does not match the index's is refused in one line.
        """
        root = Path(path).expanduser().resolve()
        gen = current_gen(root)
        if embed_server is None:
            embed_server = query_embed_server(root, gen, embed_model, embed_base_url)
        return cls(root, gen, embed_server)

    @staticmethod
    def is_index(path: str | Path) -> bool:
        return (Path(path) / "CURRENT").is_file()

    @staticmethod
    def looks_like_index(path: str | Path) -> bool:
        """An index folder, perhaps a damaged one (a CURRENT file or a generation folder in it)."""
        p = Path(path)
        if Index.is_index(p):
            return True
        try:
            return p.is_dir() and any(c.name.startswith("gen-") and c.is_dir() for c in p.iterdir())
        except OSError:
            return False

    def reload(self) -> Index:
        """This index, or a fresh handle if a writer has published a newer generation."""
        gen = current_gen(self.root)
        return self if gen == self.gen else Index(self.root, gen, self.embed_server)

    # ------------------------------------------------------------------ writing

    @classmethod
    def build(
        cls,
        inputs: Sequence[str | Path],
        out: str | Path,
        *,
        format: str = "auto",
        dense: bool = False,
        embedder: str | None = None,
        max_chars: int = DEFAULT_MAX_CHARS,
        default_acl: Sequence[str] = ("all",),
        max_file_mb: float = DEFAULT_MAX_FILE_MB,
        progress: bool = False,
        embed_server: EmbedServer | None = None,
    ) -> Index:
        """Build a new index of ``inputs`` at ``out`` (replacing any index there, atomically).

        ``default_acl`` labels passages whose source gives no ACL.  With
        ``dense=True`` passages are also embedded (``embedder``, default
        ``auto``: the multilingual model for a Chinese corpus, all-MiniLM-L6-v2
        otherwise) and hybrid search becomes the default mode.  With ``embed_server``
        the vectors come from that server's model (``dense`` is implied) and the index
        records it.  The :class:`BuildReport` is at ``index.last_report``.
        """
        root = Path(out).expanduser().resolve()
        report = build_generation(
            root,
            inputs,
            format=format,
            dense=dense,
            embedder=embedder,
            max_chars=max_chars,
            default_acl=default_acl,
            max_file_mb=max_file_mb,
            progress=progress,
            embed_server=embed_server,
        )
        idx = cls(root, current_gen(root), embed_server)
        idx.last_report = report
        return idx

    def add(
        self,
        inputs: Sequence[str | Path],
        *,
        format: str = "auto",
        max_file_mb: float = DEFAULT_MAX_FILE_MB,
        progress: bool = False,
    ) -> BuildReport:
        """Add (or update) documents.  A document whose ``doc_id`` is already
        indexed with different content replaces the old one; identical ones are
        left as they are.  Publishes a new generation atomically; this handle
        then reads it."""
        report = add_generation(
            self.root, inputs, format=format, max_file_mb=max_file_mb, progress=progress, embed_server=self.embed_server
        )
        return self._adopt(Index(self.root, current_gen(self.root), self.embed_server), report)

    def remove(self, targets: Sequence[str | Path]) -> BuildReport:
        """Remove documents, each named by its id (``sleuth index list``), its file's path, or a
        folder (every document read from below it).  All or nothing: a name that matches no
        document raises :class:`UnknownDocument` and nothing is written; otherwise one new
        generation is published atomically, as :meth:`add` does; this handle then reads it."""
        report = remove_generation(self.root, [str(t) for t in targets])
        return self._adopt(Index.open(self.root), report)

    def _adopt(self, new: Index, report: BuildReport) -> BuildReport:
        """Read the generation ``new`` opened from now on, keeping this handle's search mode."""
        mode = self.mode
        self.__dict__.update(new.__dict__)
        self.mode = mode
        self.last_report = report
        return report

    # ------------------------------------------------------------------ reading

    def documents(self) -> list[dict[str, Any]]:
        """Every live document in index order: id, title, source, metadata
        (version, region, acl, url and the rest) and its passage count."""
        try:
            docs = self.store.documents()
        except sqlite3.DatabaseError as e:
            raise self._damaged_store(e) from None
        fields = ("title", "source", "version", "region", "acl", "url", "metadata")
        return [{"id": doc_id, **{f: getattr(p, f) for f in fields}, "passages": n} for doc_id, n, p in docs]

    def _damaged_store(self, e: sqlite3.DatabaseError) -> IndexError_:
        return damaged(self.root, f"{self.gen.name}/passages.sqlite: {e}", self.manifest.get("sources", []))

    @property
    def has_vectors(self) -> bool:
        return bool(self.manifest.get("dense")) and (self.gen / "vectors.npy").exists()

    @property
    def default_mode(self) -> str:
        return "hybrid" if self.has_vectors else "lexical"

    def _dense_index(self) -> Any:
        if self._dense is None:
            from sleuth.search.dense import DenseIndex

            self._dense = DenseIndex.load(self.gen, self.lexical, self.manifest["embedder"], self.embed_server)
        return self._dense

    def _check_mode(self, mode: str | None) -> str:
        mode = mode or self.mode or self.default_mode
        if mode not in MODES:
            raise SearchError(f"unknown search mode {mode!r}; choose one of {', '.join(MODES)}")
        if mode != "lexical" and not self.has_vectors:
            raise SearchError(f"index {self.root} has no vectors; rebuild it with --dense to use mode={mode}")
        return mode

    def search(
        self, query: str, k: int = 5, filters: Filters | None = None, *, mode: str | None = None
    ) -> list[Passage]:
        """The ``k`` best passages for ``query`` visible within ``filters``.

        ``mode``: ``lexical`` (BM25), ``dense`` (vectors) or ``hybrid``
        (reciprocal rank fusion of both); default hybrid where vectors exist.
        """
        return self.search_batch([query], k, filters, mode=mode)[0]

    def search_batch(
        self, queries: Sequence[str], k: int = 5, filters: Filters | None = None, *, mode: str | None = None
    ) -> list[list[Passage]]:
        """:meth:`search` for several queries (query embeddings are computed in one batch)."""
        mode = self._check_mode(mode)
        if k <= 0:
            return [[] for _ in queries]
        # never ask the engines for more hits than the index has rows: tantivy and faiss allocate
        # for k up front, and a k of 10^9 from a caller would abort the process, not raise
        k = min(k, max(1, int(self.manifest.get("rows") or 0), int(self.manifest.get("passages") or 0)))
        filters = filters if filters is not None and not filters.is_empty() else None
        ranked: list[list[tuple[int, float]]]
        if mode == "lexical":
            ranked = [self.lexical.search(q, k, filters) for q in queries]
        else:
            from sleuth.search.hybrid import rrf

            dense = self._dense_index()
            depth = k if mode == "dense" else max(4 * k, 40)
            dense_hits = dense.search_batch(list(queries), depth, filters)
            if mode == "dense":
                ranked = dense_hits
            else:
                ranked = [
                    rrf([self.lexical.search(q, depth, filters), dh], k)
                    for q, dh in zip(queries, dense_hits, strict=True)
                ]
        return [self._passages(hits, filters) for hits in ranked]

    def _passages(self, hits: list[tuple[int, float]], filters: Filters | None) -> list[Passage]:
        try:
            got = self.store.get_many([r for r, _ in hits])
        except sqlite3.DatabaseError as e:  # a page damaged after the index was opened
            raise self._damaged_store(e) from None
        out = []
        for row, score in hits:
            p = got.get(row)
            if p is None:
                continue
            if filters is not None and not filters.matches(p):
                # defence in depth: the index enforces scope natively; this never fires
                continue
            p.score = float(score)
            out.append(p)
        return out

    def cache_identity(self) -> str:
        """Folder and live generation: a rebuilt or extended index is a different source."""
        return f"index:{self.root}:{self.gen.name}"

    def count(self, filters: Filters | None = None) -> int:
        """Live passages visible within ``filters``."""
        return self.lexical.count(filters if filters is not None and not filters.is_empty() else None)

    def stats(self, filters: Filters | None = None) -> dict[str, Any]:
        """Counts and settings.  With ``filters`` only visible passages are
        counted, and nothing that would describe hidden ones is returned."""
        m = self.manifest
        base = {
            "path": str(self.root),
            "generation": self.gen.name,
            "schema_version": m["schema_version"],
            "dense": self.has_vectors,
            "embedder": m.get("embedder"),
            **({"embed_server": m["embed_server"]} if m.get("embed_server") else {}),
            "default_mode": self.default_mode,
            "created": m.get("created"),
            "updated": m.get("updated"),
        }
        if filters is not None and not filters.is_empty():
            return {**base, "filters": filters.to_dict(), "passages_visible": self.count(filters)}
        return {
            **base,
            "passages": m["passages"],
            "docs": m["docs"],
            "rows": m["rows"],
            "duplicates_skipped": m.get("duplicates_skipped", 0),
            "sources": m.get("sources", []),
            "disk_bytes": sum(p.stat().st_size for p in self.gen.rglob("*") if p.is_file()),
        }

    def close(self) -> None:
        self.store.close()

    def __getstate__(self) -> dict[str, Any]:
        # picklable (e.g. for a Dask worker): reopened by path on the other side
        return {"root": str(self.root), "mode": self.mode, "embed_server": self.embed_server}

    def __setstate__(self, state: dict[str, Any]) -> None:
        fresh = Index.open(state["root"], embed_server=state.get("embed_server"))
        self.__dict__.update(fresh.__dict__)
        self.mode = state["mode"]

    def __repr__(self) -> str:
        return f"Index({str(self.root)!r}, passages={self.manifest.get('passages')}, dense={self.has_vectors})"


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return (text[0] if text else type(e).__name__)[:200]


def _open_store(root: Path, path: Path, sources: Sequence[str]) -> PassageStore:
    """The passage store, checked: present, whole (its size matches its page count) and readable."""
    rel = f"{path.parent.name}/{path.name}"
    if not path.is_file():
        raise damaged(root, f"{rel} is missing", sources)
    store: PassageStore | None = None
    try:
        store = PassageStore(path, readonly=True)
        page_size = store.conn.execute("PRAGMA page_size").fetchone()[0]
        pages = store.conn.execute("PRAGMA page_count").fetchone()[0]
        store.conn.execute("SELECT row, data FROM passages ORDER BY row DESC LIMIT 1").fetchall()
        store.conn.execute("SELECT COUNT(*) FROM docs").fetchone()
    except sqlite3.Error as e:
        if store is not None:
            store.close()
        raise damaged(root, f"{rel} is not a readable SQLite database: {e}", sources) from None
    if path.stat().st_size < page_size * pages:
        store.close()
        raise damaged(root, f"{rel} is truncated", sources)
    return store


def as_filters(filters: Filters | Sequence[str] | dict[str, Any] | None) -> Filters | None:
    """Accept Filters, CLI-style expressions (``["acl=all"]``) or a ``to_dict`` mapping."""
    if filters is None or isinstance(filters, Filters):
        return filters
    if isinstance(filters, dict):
        return Filters.from_dict(filters)
    return Filters.parse(list(filters))
