"""The embedded index: an on-disk folder that can be built, extended, opened and searched.

Layout of an index folder ``DIR``::

    DIR/CURRENT            name of the live generation (replaced atomically)
    DIR/LOCK               writers hold an exclusive flock on it
    DIR/gen-<ms>-<pid>/    one immutable generation:
        manifest.json      counts, schema version, embedder, sources
        lexical/           tantivy BM25 index (tokens from sleuth.search.tokenize)
        passages.sqlite    rows -> passages with provenance, scope terms
        vectors.npy        (optional) one unit vector per row
        dense.faiss        (optional) faiss index over vectors.npy

``build`` and ``add`` write a new generation in ``DIR/gen-….tmp`` (``add``
starts from a copy of the live one), fsync it, rename it, then replace
``CURRENT`` with ``os.replace`` - the only step that publishes anything.  A
writer killed at any point leaves the previous generation live and intact;
the next writer removes the leftovers.

Every search path enforces :class:`~sleuth.search.base.Filters` inside the
index before the top-k cut (tantivy term-set clauses; bitmaps over the
vectors), and re-checks each hit with :meth:`Filters.matches` before it leaves.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sleuth.search.base import Filters, Passage, SearchError
from sleuth.search.chunking import DEFAULT_MAX_CHARS, chunk_doc, passage_hash
from sleuth.search.ingest import DEFAULT_MAX_FILE_MB, Doc, IngestReport, read_inputs
from sleuth.search.lexical import LexicalIndex
from sleuth.search.store import PassageStore

__all__ = ["MODES", "SCHEMA_VERSION", "BuildReport", "EmptyBuild", "Index", "IndexError_", "IndexNotFound"]

SCHEMA_VERSION = 1
MODES = ("lexical", "dense", "hybrid")
_BATCH = 2000


class IndexError_(SearchError):  # trailing _: ``IndexError`` is a builtin
    """The index folder is unusable (wrong kind of folder, damaged, wrong schema)."""

    reason = "index_error"


class IndexNotFound(IndexError_):
    """The path holds no Sleuth index."""

    reason = "index_not_found"


class EmptyBuild(IndexError_):
    """A build found no passages at all; nothing was published (``report`` says why)."""

    reason = "empty_build"

    def __init__(self, message: str, report: BuildReport) -> None:
        super().__init__(message)
        self.report = report


@dataclass
class BuildReport:
    """What one ``build`` or ``add`` did."""

    ingest: IngestReport = field(default_factory=IngestReport)
    passages_added: int = 0
    duplicate_passages: int = 0
    docs_added: int = 0
    docs_replaced: int = 0
    docs_unchanged: int = 0
    seconds: float = 0.0
    embed_seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if k != "ingest"}
        d["ingest"] = self.ingest.to_dict()
        return d


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _fsync_tree(path: Path) -> None:
    for p in sorted(path.rglob("*")):
        if p.is_file():
            fd = os.open(p, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    for d in [path, *[p for p in path.rglob("*") if p.is_dir()]]:
        fd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created if missing) for the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _writer_lock(root: Path) -> contextlib.AbstractContextManager[None]:
    return file_lock(root / "LOCK")


def _check_target(root: Path) -> None:
    if root.exists() and not root.is_dir():
        raise IndexError_(f"{root} is a file, not an index folder")
    if root.is_dir() and not (root / "CURRENT").exists():
        foreign = [p.name for p in root.iterdir() if p.name != "LOCK" and not p.name.startswith("gen-")]
        if foreign:
            raise IndexError_(f"{root} is not empty and is not a Sleuth index; choose a new or empty folder")


def _current_gen(root: Path) -> Path:
    try:
        name = (root / "CURRENT").read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise IndexNotFound(f"{root} is not a Sleuth index (no CURRENT file)") from None
    gen = root / name
    if not name.startswith("gen-") or not (gen / "manifest.json").is_file():
        raise IndexError_(f"{root} is damaged: its live generation {name!r} is missing")
    return gen


def _publish(root: Path, tmp: Path) -> Path:
    """Rename the finished generation and atomically point CURRENT at it."""
    final = tmp.with_name(tmp.name.removesuffix(".tmp"))
    _fsync_tree(tmp)
    os.rename(tmp, final)
    ptr = root / f"CURRENT.{os.getpid()}.tmp"
    with open(ptr, "w", encoding="utf-8") as f:
        f.write(final.name + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(ptr, root / "CURRENT")
    fd = os.open(root, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return final


def _cleanup(root: Path) -> None:
    """Remove generations that are not live and leftovers of killed writers (caller holds the lock)."""
    try:
        live = (root / "CURRENT").read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        live = ""
    for p in root.iterdir():
        if p.name.startswith("gen-") and p.name != live:
            shutil.rmtree(p, ignore_errors=True)
        elif p.name.startswith("CURRENT.") and p.name.endswith(".tmp"):
            p.unlink(missing_ok=True)


def _new_gen_dir(root: Path) -> Path:
    return root / f"gen-{time.time_ns() // 1_000_000:013d}-{os.getpid()}.tmp"


class Index:
    """An embedded index folder; also a :class:`~sleuth.search.base.Retriever`.

    Open one with :meth:`open`, create one with :meth:`build`.
    """

    def __init__(self, root: Path, gen: Path) -> None:
        self.root = root
        self.gen = gen
        self.manifest: dict[str, Any] = json.loads((gen / "manifest.json").read_text(encoding="utf-8"))
        if int(self.manifest.get("schema_version", 0)) != SCHEMA_VERSION:
            raise IndexError_(
                f"{root} has index schema version {self.manifest.get('schema_version')}, this Sleuth reads "
                f"{SCHEMA_VERSION}; rebuild it with `sleuth index build`"
            )
        self.lexical = LexicalIndex(gen / "lexical")
        self.store = PassageStore(gen / "passages.sqlite", readonly=True)
        self.name = f"index:{root.name}"
        self._dense: Any = None  # sleuth.search.dense.DenseIndex (vectors opened now, model on first use)
        if self.has_vectors:
            self._dense_index()
        #: the mode used when a search names none (``None``: hybrid where vectors exist)
        self.mode: str | None = None
        self.last_report: BuildReport | None = None

    # ------------------------------------------------------------------ opening

    @classmethod
    def open(cls, path: str | Path) -> Index:
        """Open the live generation of the index at ``path``."""
        root = Path(path).expanduser().resolve()
        return cls(root, _current_gen(root))

    @staticmethod
    def is_index(path: str | Path) -> bool:
        return (Path(path) / "CURRENT").is_file()

    def reload(self) -> Index:
        """This index, or a fresh handle if a writer has published a newer generation."""
        gen = _current_gen(self.root)
        return self if gen == self.gen else Index(self.root, gen)

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
    ) -> Index:
        """Build a new index of ``inputs`` at ``out`` (replacing any index there, atomically).

        ``default_acl`` labels passages whose source gives no ACL.  With
        ``dense=True`` passages are also embedded (``embedder``, default
        ``auto``: the multilingual model for a Chinese corpus, all-MiniLM-L6-v2
        otherwise) and hybrid search becomes the default mode.
        The :class:`BuildReport` is at ``index.last_report``.
        """
        root = Path(out).expanduser().resolve()
        _check_target(root)
        report = BuildReport()
        t0 = time.perf_counter()
        if dense:  # an unknown name is refused before any work
            from sleuth.search.dense import check_embedder

            embedder = check_embedder(embedder or "auto")
        with _writer_lock(root):
            _cleanup(root)
            tmp = _new_gen_dir(root)
            tmp.mkdir()
            settings = {
                "format": format,
                "max_chars": max_chars,
                "default_acl": list(default_acl),
                "dense": bool(dense),
                "embedder": embedder if dense else None,
            }
            _write(tmp, None, inputs, settings, report, max_file_mb=max_file_mb, progress=progress)
            report.seconds = time.perf_counter() - t0
            if report.passages_added == 0:
                shutil.rmtree(tmp, ignore_errors=True)
                why = "; ".join(f"{p}: {r}" for p, r in report.ingest.skipped[:5])
                raise EmptyBuild(f"no passages found in the inputs{' (' + why + ')' if why else ''}", report)
            _finish_manifest(tmp, settings, report, inputs, created=_now())
            _publish(root, tmp)
            _cleanup(root)
        idx = cls.open(root)
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
        report = BuildReport()
        t0 = time.perf_counter()
        with _writer_lock(self.root):
            _cleanup(self.root)
            live = _current_gen(self.root)
            tmp = _new_gen_dir(self.root)
            shutil.copytree(live, tmp)
            manifest = json.loads((live / "manifest.json").read_text(encoding="utf-8"))
            settings = {k: manifest[k] for k in ("format", "max_chars", "default_acl", "dense", "embedder")}
            _write(tmp, manifest, inputs, {**settings, "format": format}, report, max_file_mb=max_file_mb, progress=progress)
            report.seconds = time.perf_counter() - t0
            sources = [*manifest.get("sources", []), *[str(Path(i).expanduser().resolve()) for i in inputs]]
            _finish_manifest(tmp, settings, report, sources, created=manifest.get("created", _now()), previous=manifest)
            _publish(self.root, tmp)
            _cleanup(self.root)
        new = Index.open(self.root)
        mode = self.mode
        self.__dict__.update(new.__dict__)
        self.mode = mode
        self.last_report = report
        return report

    # ------------------------------------------------------------------ reading

    @property
    def has_vectors(self) -> bool:
        return bool(self.manifest.get("dense")) and (self.gen / "vectors.npy").exists()

    @property
    def default_mode(self) -> str:
        return "hybrid" if self.has_vectors else "lexical"

    def _dense_index(self) -> Any:
        if self._dense is None:
            from sleuth.search.dense import DenseIndex

            self._dense = DenseIndex.load(self.gen, self.lexical, self.manifest["embedder"])
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
                    rrf([self.lexical.search(q, depth, filters), dh], k) for q, dh in zip(queries, dense_hits, strict=True)
                ]
        return [self._passages(hits, filters) for hits in ranked]

    def _passages(self, hits: list[tuple[int, float]], filters: Filters | None) -> list[Passage]:
        got = self.store.get_many([r for r, _ in hits])
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
        return {"root": str(self.root), "mode": self.mode}

    def __setstate__(self, state: dict[str, Any]) -> None:
        fresh = Index.open(state["root"])
        self.__dict__.update(fresh.__dict__)
        self.mode = state["mode"]

    def __repr__(self) -> str:
        return f"Index({str(self.root)!r}, passages={self.manifest.get('passages')}, dense={self.has_vectors})"


# ---------------------------------------------------------------------- the writer


def _progress(enabled: bool) -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        disable=not enabled,
        transient=False,
    )


def _write(
    gen: Path,
    manifest: dict[str, Any] | None,
    inputs: Sequence[str | Path],
    settings: dict[str, Any],
    report: BuildReport,
    *,
    max_file_mb: float,
    progress: bool,
) -> None:
    """Ingest ``inputs`` into the (private) generation folder ``gen``."""
    store = PassageStore(gen / "passages.sqlite")
    lex = LexicalIndex(gen / "lexical", create=manifest is None)
    next_row = store.next_row()
    first_new_row = next_row
    seen_ids: set[str] = set()
    seen_hashes: set[str] = set()
    fresh = manifest is None
    batch: list[tuple[int, str, Passage]] = []
    doc_batch: list[tuple[str, str]] = []
    default_acl = tuple(settings["default_acl"])

    def flush() -> None:
        store.set_docs(doc_batch)
        store.put_many(batch)
        lex.add((row, p) for row, _, p in batch)
        batch.clear()
        doc_batch.clear()

    docs: Iterable[Doc] = read_inputs(list(inputs), format=settings["format"], report=report.ingest, max_file_mb=max_file_mb)
    with _progress(progress) as bar:
        task = bar.add_task("indexing passages", total=None)
        for doc in docs:
            fp = doc.fingerprint()
            if doc.doc_id in seen_ids:
                # two different documents with one id in this run: keep both, deterministically
                doc.doc_id = f"{doc.doc_id}~{fp[:8]}"
                if doc.doc_id in seen_ids:
                    report.ingest.duplicate_docs += 1
                    continue
            seen_ids.add(doc.doc_id)
            old = None if fresh else store.doc_fingerprint(doc.doc_id)
            if old == fp:
                report.docs_unchanged += 1
                continue
            if old is not None:
                store.kill_doc(doc.doc_id)
                lex.delete_doc(doc.doc_id)
                report.docs_replaced += 1
            else:
                report.docs_added += 1
            doc_batch.append((doc.doc_id, fp))
            for p in chunk_doc(doc, max_chars=settings["max_chars"], default_acl=default_acl):
                h = passage_hash(p)
                if h in seen_hashes or (not fresh and store.has_hash(h)):
                    report.duplicate_passages += 1
                    continue
                seen_hashes.add(h)
                batch.append((next_row, h, p))
                next_row += 1
                report.passages_added += 1
            if len(batch) >= _BATCH:
                flush()
                bar.update(task, completed=report.passages_added)
        flush()
        bar.update(task, completed=report.passages_added, total=report.passages_added)
    store.commit()
    lex.commit()
    if settings["dense"]:
        from sleuth.search.dense import DenseIndex, resolve_embedder

        settings["embedder"] = resolve_embedder(settings["embedder"], store, first_new_row, next_row)
        t = time.perf_counter()
        DenseIndex.extend(gen, store, settings["embedder"], first_new_row, next_row, progress=progress)
        report.embed_seconds = time.perf_counter() - t
    store.close()


def _finish_manifest(
    gen: Path,
    settings: dict[str, Any],
    report: BuildReport,
    sources: Sequence[str | Path],
    *,
    created: str,
    previous: dict[str, Any] | None = None,
) -> None:
    store = PassageStore(gen / "passages.sqlite", readonly=True)
    try:
        manifest = {
            "schema_version": SCHEMA_VERSION,
            "created": created,
            "updated": _now(),
            "passages": store.count_live(),
            "docs": store.count_docs(),
            "rows": store.next_row(),
            "duplicates_skipped": int((previous or {}).get("duplicates_skipped", 0)) + report.duplicate_passages,
            "sources": [str(Path(s).expanduser().resolve()) for s in sources],
            "tokenizer": "sleuth.search.tokenize/1 (words + stopwords, jieba for Chinese)",
            **settings,
            "last_build": report.to_dict(),
        }
    finally:
        store.close()
    (gen / "manifest.json").write_text(json.dumps(manifest, ensure_ascii=False, indent=2), encoding="utf-8")


def as_filters(filters: Filters | Sequence[str] | dict[str, Any] | None) -> Filters | None:
    """Accept Filters, CLI-style expressions (``["acl=all"]``) or a ``to_dict`` mapping."""
    if filters is None or isinstance(filters, Filters):
        return filters
    if isinstance(filters, dict):
        return Filters.from_dict(filters)
    return Filters.parse(list(filters))
