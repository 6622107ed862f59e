"""Readers for every corpus shape Sleuth indexes (``format="auto"`` detects them), producing :class:`Doc` records.

The formats are listed in docs/knowledge.md.  Bad files and bad JSON lines are skipped and named or counted
in the :class:`IngestReport`.  This module walks the inputs; JSON corpora go to :mod:`sleuth.search.read_json`,
document files to :mod:`sleuth.search.read_documents`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from sleuth.search.doc import BadFile, Doc, IngestReport
from sleuth.search.metadata import SIDECAR, Sidecars
from sleuth.search.read_documents import doc_type, read_document
from sleuth.search.read_json import read_json_file

FORMATS = ("auto", "flashrag", "hotpotqa", "musique", "policy", "generic", "timeqa", "strategyqa")
JSON_SUFFIXES = (".jsonl", ".json", ".jsonl.gz", ".json.gz", ".ndjson")

DEFAULT_MAX_FILE_MB = 512


def read_inputs(
    inputs: list[str | Path] | tuple[str | Path, ...],
    *,
    format: str = "auto",
    report: IngestReport | None = None,
    max_file_mb: float = DEFAULT_MAX_FILE_MB,
) -> Iterator[Doc]:
    """Yield the documents of every input file or folder (folders recursively, sorted).

    Problems are recorded in ``report`` (if given) and never stop the read.
    """
    if format not in FORMATS:
        raise ValueError(f"unknown corpus format {format!r}; choose one of {', '.join(FORMATS)}")
    report = report if report is not None else IngestReport()
    seen_titles: dict[str, set[str]] = {}  # format -> titles/pages already pooled
    for raw in inputs:
        root = Path(raw).expanduser()
        if not root.exists():
            report.skip(root, "no such file or folder")
            continue
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        sidecars = Sidecars(root if root.is_dir() else root.parent)
        for path in files:
            if any(part.startswith(".") for part in path.relative_to(root).parts) and path != root:
                continue  # hidden files and folders inside a corpus folder
            name = path.name.lower()
            if name == SIDECAR:
                continue
            is_json = name.endswith(JSON_SUFFIXES)
            is_doc = doc_type(name) is not None
            if not (is_json or is_doc):
                report.skip(path, f"unsupported file type {path.suffix or '(none)'!r}")
                continue
            try:
                _check_size(path, max_file_mb)
                rel = path.relative_to(root) if root.is_dir() else Path(path.name)
                it = (
                    read_json_file(path, format, report, seen_titles)
                    if is_json
                    else read_document(path, rel, sidecars.fields_for(path))
                )
                n = 0
                for doc in it:
                    n += 1
                    report.docs += 1
                    yield doc
                if n == 0:
                    raise BadFile("no passages found in it")
                report.files_read.append(str(path))
            except BadFile as e:
                report.skip(path, str(e))
            except OSError as e:
                report.skip(path, f"cannot be read ({e.strerror or e})")


def _check_size(path: Path, max_file_mb: float) -> None:
    size = path.stat().st_size
    if size == 0:
        raise BadFile("empty file")
    if size > max_file_mb * 1024 * 1024:
        raise BadFile(f"file too large ({size / 2**20:.0f} MB > {max_file_mb:g} MB limit)")
