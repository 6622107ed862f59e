"""The generations of an index folder: the live pointer ``CURRENT``, the writer ``LOCK`` and the atomic swap.

:func:`publish` fsyncs and renames a ``gen-….tmp`` folder, then replaces ``CURRENT`` with ``os.replace``;
a killed writer leaves the previous generation live, and :func:`cleanup` removes its leftovers.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shlex
import shutil
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from sleuth.search.base import SearchError

SCHEMA_VERSION = 1


class IndexError_(SearchError):  # trailing _: ``IndexError`` is a builtin
    """The index folder is unusable (wrong kind of folder, damaged, wrong schema)."""

    reason = "index_error"


class IndexNotFound(IndexError_):
    """The path holds no Sleuth index."""

    reason = "index_not_found"


class IndexDamaged(IndexError_):
    """A file of the index is missing, truncated or corrupt; the message names the folder and the fix."""

    reason = "index_damaged"


def rebuild_command(root: Path, sources: Iterable[str] = ()) -> str:
    """The command that rebuilds the index at ``root`` from ``sources`` (its manifest's inputs)."""
    inputs = " ".join(f"--input {shlex.quote(str(s))}" for s in sources) or "--input YOUR_FILES"
    return f"sleuth index build {inputs} --out {shlex.quote(str(root))}"


def damaged(root: Path, what: str, sources: Iterable[str] = ()) -> IndexDamaged:
    """The one-sentence error for a damaged index: the folder, what is wrong and the command that fixes it."""
    return IndexDamaged(f"the index {root} is damaged ({what}); rebuild it with `{rebuild_command(root, sources)}`")


def fsync_tree(path: Path) -> None:
    """fsync every file and folder under ``path`` (and ``path`` itself)."""
    files = [p for p in sorted(path.rglob("*")) if p.is_file()]
    for p in [*files, path, *[p for p in path.rglob("*") if p.is_dir()]]:
        fd = os.open(p, os.O_RDONLY)
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


def writer_lock(root: Path) -> contextlib.AbstractContextManager[None]:
    """The lock every writer of the index at ``root`` holds."""
    return file_lock(root / "LOCK")


def check_target(root: Path) -> None:
    """Refuse to build into a file or into a folder that holds something other than an index."""
    if root.exists() and not root.is_dir():
        raise IndexError_(f"{root} is a file, not an index folder")
    if root.is_dir() and not (root / "CURRENT").exists():
        foreign = [p.name for p in root.iterdir() if p.name != "LOCK" and not p.name.startswith("gen-")]
        if foreign:
            raise IndexError_(f"{root} is not empty and is not a Sleuth index; choose a new or empty folder")


def current_gen(root: Path) -> Path:
    """The live generation folder of the index at ``root``."""
    try:
        name = (root / "CURRENT").read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        gens = [p.name for p in root.iterdir() if p.name.startswith("gen-")] if root.is_dir() else []
        if any(not g.endswith(".tmp") for g in gens):
            raise damaged(root, "its CURRENT file is missing") from None
        if gens:
            raise damaged(root, "no build into it finished: only a half-written generation is there") from None
        raise IndexNotFound(f"{root} is not a Sleuth index (no CURRENT file)") from None
    except (OSError, UnicodeDecodeError) as e:
        raise damaged(root, f"its CURRENT file cannot be read: {e}") from None
    gen = root / name
    if not name.startswith("gen-") or name.endswith(".tmp") or "/" in name:
        raise damaged(root, f"its CURRENT file names no generation ({name[:40]!r})")
    if not gen.is_dir():
        raise damaged(root, f"its live generation {name} is missing")
    if not (gen / "manifest.json").is_file():
        raise damaged(root, f"its live generation {name} has no manifest.json")
    return gen


def publish(root: Path, tmp: Path) -> Path:
    """Rename the finished generation and atomically point CURRENT at it."""
    final = tmp.with_name(tmp.name.removesuffix(".tmp"))
    fsync_tree(tmp)
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


def cleanup(root: Path) -> None:
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


def new_gen_dir(root: Path) -> Path:
    """A fresh name for a generation being written (``gen-<ms>-<pid>.tmp``)."""
    return root / f"gen-{time.time_ns() // 1_000_000:013d}-{os.getpid()}.tmp"
