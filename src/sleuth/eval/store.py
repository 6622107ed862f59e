"""The run directory: ``results.jsonl`` (and its compacted ``results.jsonl.gz``) and the ``run.json``
manifest that guards resumes (docs/eval.md, "Run directory")."""

from __future__ import annotations

import contextlib
import fcntl
import gzip
import io
import json
import os
import shlex
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from sleuth.eval.items import EvalError

RESULTS = "results.jsonl"
RESULTS_GZ = "results.jsonl.gz"
MANIFEST = "run.json"
LOCK = ".lock"


class RunDirBusy(EvalError):
    """Another process is running (or rescoring) in this run directory."""


@contextlib.contextmanager
def run_lock(out: str | Path) -> Iterator[None]:
    """An exclusive lock on the run directory (released by the kernel even after ``kill -9``).

    Two runners appending to one JSONL would both run the same pairs; the second one is refused.
    """
    path = Path(out) / LOCK
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as e:
            raise RunDirBusy(f"another sleuth eval is running in {out}; wait for it or stop it first") from e
        yield
    finally:
        os.close(fd)  # closing releases the lock


class ManifestMismatch(EvalError):
    """The run directory already holds a run with other settings."""


def results_files(out: str | Path) -> list[Path]:
    """The results files of a run directory that exist, oldest records first."""
    return [p for p in (Path(out) / RESULTS_GZ, Path(out) / RESULTS) if p.is_file()]


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """The newest complete record of each (strategy, qid) of a run directory (``path``, or one of its
    results files: each stands for both, read compressed first)."""
    path = Path(path)
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for f in results_files(path if path.is_dir() else path.parent):
        for rec in iter_lines(f):
            latest.pop((rec["strategy"], rec["qid"]), None)
            latest[(rec["strategy"], rec["qid"])] = rec
    return list(latest.values())


def iter_lines(path: Path) -> Iterator[dict[str, Any]]:
    """Every complete record line of a results file (plain or ``.gz``), oldest first, superseded
    ones included (a torn or invalid line is skipped, a torn gzip tail ends the file); :func:`read_records`
    keeps the newest of each task."""
    with (gzip.open if Path(path).suffix == ".gz" else open)(path, "rb") as f:
        try:
            for raw in f:
                if not raw.endswith(b"\n"):
                    break  # torn tail: never complete
                try:
                    rec = json.loads(raw)
                except (json.JSONDecodeError, UnicodeDecodeError):
                    continue
                if isinstance(rec, dict) and "strategy" in rec and "qid" in rec:
                    yield rec
        except (EOFError, gzip.BadGzipFile):
            return


def _line(rec: Mapping[str, Any]) -> bytes:
    return (json.dumps(rec, ensure_ascii=False, default=str) + "\n").encode("utf-8")


def write_jsonl(path: str | Path, records: Iterable[Mapping[str, Any]]) -> None:
    """Write records as JSONL (gzip when the name ends in ``.gz``, with no name or time in its header,
    so the same records give the same bytes) atomically: a crash leaves the old file (or none)."""
    path, buf = Path(path), io.BytesIO()
    if path.suffix == ".gz":
        with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as gz:
            gz.writelines(_line(r) for r in records)
    else:
        buf.writelines(_line(r) for r in records)
    write_atomic(path, buf.getvalue())


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` by ``data``: a temporary file beside it, ``fsync``, rename, ``fsync`` of the folder."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")  # writers may race
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def rewrite_records(out: str | Path, change: Callable[[dict[str, Any]], dict[str, Any]]) -> int:
    """Apply ``change`` to every record of the run's results files, each
    file rewritten atomically in its own form; returns the number of records. Hold the run lock."""
    n = 0
    for f in results_files(out):
        recs = [change(r) for r in iter_lines(f)]
        n += len(recs)
        write_jsonl(f, recs)
    return n


def compact_run(out: str | Path) -> tuple[int, int]:
    """Compact a run directory (under its lock): the newest record of each (strategy, task) into
    ``results.jsonl.gz`` and ``results.jsonl`` removed. Returns (records kept, older records dropped)."""
    out = Path(out)
    with run_lock(out):
        lines = sum(1 for f in results_files(out) for _ in iter_lines(f))
        newest = read_records(out)
        write_jsonl(out / RESULTS_GZ, newest)
        (out / RESULTS).unlink(missing_ok=True)
    return len(newest), lines - len(newest)


class ResultsWriter:
    """The single writer of ``results.jsonl``: one ``write`` of a whole line and ``fsync`` per record (a
    torn tail is cut off on open). When the file is replaced under it (``git checkout``, an editor), it
    appends there the lines of its own file that the new one lacks, goes on there and tells ``on_notice``."""

    def __init__(self, path: str | Path, on_notice: Callable[[str], None] | None = None) -> None:
        self.path = Path(path)
        self.on_notice = on_notice
        self._lock = threading.Lock()
        self._fd = -1

    def __enter__(self) -> ResultsWriter:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._repair_tail()
        self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        return self

    def _repair_tail(self) -> None:
        data = self.path.read_bytes() if self.path.exists() else b""
        if data and not data.endswith(b"\n"):
            with open(self.path, "rb+") as f:
                f.truncate(data.rfind(b"\n") + 1)  # keep everything up to the last complete line
                os.fsync(f.fileno())

    def _follow(self) -> None:
        """If the path no longer names our file, carry our lines over to the file there (lock held)."""
        mine = os.fstat(self._fd)
        there = os.stat(self.path) if self.path.exists() else None
        if there is not None and os.path.samestat(there, mine):
            return
        ours = os.pread(self._fd, mine.st_size, 0)
        os.close(self._fd)
        self._repair_tail()
        have = set(self.path.read_bytes().splitlines(keepends=True)) if self.path.exists() else set()
        missing = [ln for ln in ours[: ours.rfind(b"\n") + 1].splitlines(keepends=True) if ln not in have]
        self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        self._write_all(b"".join(missing))
        msg = (
            f"{self.path} was {'replaced' if there is not None else 'deleted'} while this run was writing to it; "
            f"{len(missing)} of its records that the file now there lacked were appended to it, "
            "and the run goes on there"
        )
        if self.on_notice is not None:
            self.on_notice(msg)

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]
        os.fsync(self._fd)

    def write(self, record: Mapping[str, Any]) -> None:
        line = _line(record)
        with self._lock:
            self._follow()
            self._write_all(line)

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._follow()
            os.close(self._fd)


def read_manifest(out: str | Path) -> dict[str, Any] | None:
    p = Path(out) / MANIFEST
    if not p.exists():
        return None
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ManifestMismatch(f"{p} is damaged ({e.msg}); use another --out directory") from e


def resume_command(command: str) -> str:
    """A manifest's command as one reruns it on the run's own folder: ``--out DIR`` (the first
    sitting may have written into a scratch copy) and no ``--time-limit`` (a sitting's own limit,
    not part of the run's settings)."""
    try:
        args = iter(shlex.split(command))
    except ValueError:
        return command
    out: list[str] = []
    for a in args:
        name, eq, _ = a.partition("=")
        if name not in ("--out", "--time-limit"):
            out.append(a)
            continue
        if not eq:
            next(args, None)  # the option's value
        if name == "--out":
            out += ["--out=DIR"] if eq else ["--out", "DIR"]
    return shlex.join(out)


def write_manifest(out: str | Path, manifest: Mapping[str, Any]) -> None:
    text = json.dumps(manifest, ensure_ascii=False, indent=2, sort_keys=True) + "\n"
    write_atomic(Path(out) / MANIFEST, text.encode("utf-8"))


def check_manifest(old: Mapping[str, Any], new: Mapping[str, Any], out: str | Path) -> None:
    """Refuse to resume when the comparable parts (``settings``, data hash) differ."""
    a, b = old.get("settings") or {}, new.get("settings") or {}
    diffs = [f"{k}: {a.get(k)!r} then, {b.get(k)!r} now" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    da, db = old.get("data") or {}, new.get("data") or {}
    if da.get("sha256") != db.get("sha256"):
        diffs.append("the data file's content changed")
    elif da.get("question_ids") != db.get("question_ids"):
        diffs.append("the sample drawn now holds other questions")
    if diffs:
        raise ManifestMismatch(
            f"{out} holds a run with different settings ({'; '.join(diffs)}); "
            "resume with the original settings or choose another --out directory"
        )


# -- reading records ------------------------------------------------------------------------------
def is_composed(rec: Mapping[str, Any]) -> bool:
    """A record of a dataset question itself, not of a decomposition hop run for the gap."""
    return (rec.get("task") or {}).get("kind", "main") == "main"


def composed_by_strategy(records: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """The records of composed questions (not gap hops), grouped by strategy."""
    by: dict[str, list[Mapping[str, Any]]] = {}
    for r in records:
        if is_composed(r):
            by.setdefault(r["strategy"], []).append(r)
    return by


def primary_score(rec: Mapping[str, Any]) -> float:
    """The record's primary score (0 when it has none, e.g. a failed run)."""
    return float((rec.get("scores") or {}).get("score") or 0.0)


def in_order(present: Iterable[str], order: Sequence[str]) -> list[str]:
    """Strategy names: those of ``order`` that are present, in that order, then the rest sorted."""
    have = set(present)
    return [s for s in order if s in have] + sorted(have - set(order))
