"""Writing an index: a new generation from the inputs (``build``) or from a copy of the live one (``add``).

Both ingest the inputs (:mod:`sleuth.search.ingest`), chunk them, skip duplicate passages,
write the passage store, the lexical index and (with ``dense``) the vectors into a private
``gen-….tmp`` folder, write its manifest and publish it (:mod:`sleuth.search.generations`).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sleuth.search.base import Passage
from sleuth.search.chunking import chunk_doc, passage_hash
from sleuth.search.generations import (
    SCHEMA_VERSION,
    IndexError_,
    check_target,
    cleanup,
    current_gen,
    new_gen_dir,
    publish,
    writer_lock,
)
from sleuth.search.ingest import Doc, IngestReport, read_inputs
from sleuth.search.lexical import LexicalIndex
from sleuth.search.multilingual import AUTO
from sleuth.search.remote import EmbedServer
from sleuth.search.store import PassageStore

_BATCH = 2000


class UnknownDocument(IndexError_):
    """``remove`` named something that is no document of the index; nothing was written."""

    reason = "unknown_document"


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
    docs_removed: int = 0
    passages_removed: int = 0
    seconds: float = 0.0
    embed_seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if k != "ingest"}
        d["ingest"] = self.ingest.to_dict()
        return d


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def build_generation(
    root: Path,
    inputs: Sequence[str | Path],
    *,
    format: str,
    dense: bool,
    embedder: str | None,
    max_chars: int,
    default_acl: Sequence[str],
    max_file_mb: float,
    progress: bool,
    embed_server: EmbedServer | None = None,
) -> BuildReport:
    """Write a first (or replacing) generation of ``inputs`` at ``root`` and publish it.

    Raises :class:`EmptyBuild` (publishing nothing) when the inputs hold no passage.
    """
    check_target(root)
    report = BuildReport()
    t0 = time.perf_counter()
    if embed_server is not None:
        if embedder not in (None, AUTO, embed_server.name, embed_server.model):
            raise IndexError_(
                f"--embedder {embedder} and --embed-model {embed_server.model} name two embedders; give one"
            )
        dense, embedder = True, embed_server.name
    if dense:  # an unknown name is refused before any work
        from sleuth.search.dense import check_embedder

        embedder = check_embedder(embedder or "auto")
    settings = {
        "format": format,
        "max_chars": max_chars,
        "default_acl": list(default_acl),
        "dense": bool(dense),
        "embedder": embedder if dense else None,
    }
    with _new_generation(root) as tmp:
        tmp.mkdir()
        _write(tmp, None, inputs, settings, report, max_file_mb=max_file_mb, progress=progress, server=embed_server)
        report.seconds = time.perf_counter() - t0
        if report.passages_added == 0:
            why = "; ".join(f"{p}: {r}" for p, r in report.ingest.skipped[:5])
            raise EmptyBuild(f"no passages found in the inputs{' (' + why + ')' if why else ''}", report)
        _finish_manifest(tmp, settings, report, inputs, created=_now())
    return report


def add_generation(
    root: Path,
    inputs: Sequence[str | Path],
    *,
    format: str,
    max_file_mb: float,
    progress: bool,
    embed_server: EmbedServer | None = None,
) -> BuildReport:
    """Publish a copy of the live generation at ``root`` with ``inputs`` added (or updated).

    An index embedded through a server needs ``embed_server`` (the same model: checked by the caller)."""
    report = BuildReport()
    t0 = time.perf_counter()
    with _new_generation(root) as tmp:
        live, manifest, settings = _live(root)
        shutil.copytree(live, tmp)
        _write(
            tmp,
            manifest,
            inputs,
            {**settings, "format": format},
            report,
            max_file_mb=max_file_mb,
            progress=progress,
            server=embed_server,
        )
        report.seconds = time.perf_counter() - t0
        sources = [*manifest.get("sources", []), *[str(Path(i).expanduser().resolve()) for i in inputs]]
        _finish_manifest(tmp, settings, report, sources, created=manifest.get("created", _now()), previous=manifest)
    return report


def match_documents(store: PassageStore, sources: Sequence[str], targets: Sequence[str]) -> list[str]:
    """The ids of the live documents ``targets`` name (each an id, a file path or a folder path).

    Raises :class:`UnknownDocument` naming every target that matches nothing."""
    docs = store.doc_sources()
    roots = [Path(s) for s in sources]
    chosen: list[str] = []
    unknown: list[str] = []
    for t in targets:
        hits: list[str] = []
        if t in docs:
            hits = [t]
        else:
            p = Path(t).expanduser().resolve()
            for doc_id, src in docs.items():
                if not src:
                    continue
                s = Path(src).expanduser().resolve()  # a relative source: from the working folder
                if s == p or p in s.parents:
                    hits.append(doc_id)
            if not hits:  # a path relative to an input folder (the document's id), e.g. "sub/a.md"
                for r in roots:
                    if r == p or r in p.parents:
                        rel = p.relative_to(r).as_posix() if r != p else ""
                        hits += [d for d in docs if d == rel or (rel == "" or d.startswith(rel + "/"))]
        if hits:
            chosen += [h for h in hits if h not in chosen]
        else:
            unknown.append(t)
    if unknown:
        raise UnknownDocument(
            f"no document matches {', '.join(repr(u) for u in unknown)} (see `sleuth index list`); nothing was removed"
        )
    return chosen


def remove_generation(root: Path, targets: Sequence[str]) -> BuildReport:
    """Publish a copy of the live generation at ``root`` without the documents ``targets`` name."""
    report = BuildReport()
    t0 = time.perf_counter()
    with _new_generation(root) as tmp:
        live, manifest, settings = _live(root)
        live_store = PassageStore(live / "passages.sqlite", readonly=True)
        try:
            doc_ids = match_documents(live_store, manifest.get("sources", []), targets)
        finally:
            live_store.close()
        shutil.copytree(live, tmp)
        store = PassageStore(tmp / "passages.sqlite")
        lex = LexicalIndex(tmp / "lexical")
        for doc_id in doc_ids:
            report.passages_removed += len(store.kill_doc(doc_id))
            lex.delete_doc(doc_id)
            report.docs_removed += 1
        store.commit()
        lex.commit()
        store.close()
        report.seconds = time.perf_counter() - t0
        _finish_manifest(tmp, settings, report, manifest.get("sources", []), created=manifest.get("created", _now()),
                         previous=manifest)  # fmt: skip
    return report


@contextlib.contextmanager
def _new_generation(root: Path) -> Iterator[Path]:
    """Under the writer lock: the path of a private generation folder for the block to write (``gen-….tmp``),
    published when the block ends and removed if it raises (a missing reader, an interrupt, an empty build):
    nothing half-written stays behind."""
    with writer_lock(root):
        cleanup(root)
        tmp = new_gen_dir(root)
        try:
            yield tmp
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        publish(root, tmp)
        cleanup(root)


def _live(root: Path) -> tuple[Path, dict[str, Any], dict[str, Any]]:
    """The live generation, its manifest and the build settings it records (kept by ``add`` and ``remove``)."""
    live = current_gen(root)
    manifest = json.loads((live / "manifest.json").read_text(encoding="utf-8"))
    settings = {k: manifest[k] for k in ("format", "max_chars", "default_acl", "dense", "embedder")}
    if manifest.get("embed_server"):
        settings["embed_server"] = manifest["embed_server"]
    return live, manifest, settings


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
    server: EmbedServer | None = None,
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
    restricted = False

    def flush() -> None:
        store.set_docs(doc_batch)
        store.put_many(batch)
        lex.add((row, p) for row, _, p in batch)
        batch.clear()
        doc_batch.clear()
        # what was flushed is found in the store from now on: the sets stay small, memory flat
        seen_hashes.clear()
        if fresh:
            seen_ids.clear()

    def seen_id(doc_id: str) -> bool:
        # a fresh build's store holds only this run's documents; an add's also the live ones (kept in the set)
        return doc_id in seen_ids or (fresh and store.doc_digest(doc_id) is not None)

    docs: Iterable[Doc] = read_inputs(
        list(inputs), format=settings["format"], report=report.ingest, max_file_mb=max_file_mb
    )
    with _progress(progress) as bar:
        task = bar.add_task("indexing passages", total=None)
        for doc in docs:
            fp = doc.digest()
            if seen_id(doc.doc_id):
                # two different documents with one id in this run: keep both, deterministically
                doc.doc_id = f"{doc.doc_id}~{fp[:8]}"
                if seen_id(doc.doc_id):
                    report.ingest.duplicate_docs += 1
                    continue
            seen_ids.add(doc.doc_id)
            old = None if fresh else store.doc_digest(doc.doc_id)
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
                if h in seen_hashes or store.has_hash(h):
                    report.duplicate_passages += 1
                    continue
                seen_hashes.add(h)
                if not restricted and set(p.acl) - PUBLIC_GROUPS:  # for some callers only: the owner's index
                    restricted = True
                    keep_private(gen)
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
        known = (settings.get("embed_server") or {}).get("dim")
        dim = DenseIndex.extend(
            gen, store, settings["embedder"], first_new_row, next_row, progress=progress, server=server, dim=known
        )
        report.embed_seconds = time.perf_counter() - t
        if server is not None:
            # which embedder made the vectors: checked against every later query and add
            settings["embed_server"] = {
                "model": server.model,
                "dim": dim,
                "base_url": server.base_urls[0],
                "query_prefix": server.query_prefix,
                "passage_prefix": server.passage_prefix,
            }
    store.close()


#: the ACL group that publishes a passage to everyone (docs/server.md); any other label restricts it
PUBLIC_GROUPS = frozenset({"all"})


def keep_private(gen: Path) -> None:
    """Make an index that holds restricted passages (an ACL group other than ``all``) readable by its owner only:
    its folder and the generation folder 0700, whatever the umask (a copy made by ``index add``
    keeps the mode).  Whoever needs to share such an index sets the modes themselves."""
    for folder in (gen.parent, gen):
        with contextlib.suppress(PermissionError):  # a folder of someone else's: left as its owner set it
            folder.chmod(0o700)


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
