"""Which code produced a result: a short content hash per strategy.

A published comparison is built over many sittings (``sleuth eval`` resumes), and
the code can change between them. Every record therefore carries the fingerprint
of the code that answered it, so a report can say when a strategy's records come
from more than one version, and ``--redo-stale`` can recompute exactly those.

A strategy's fingerprint covers what can change its answers:

* its own module (``strategies/self_ask.py``) and its own prompt templates
  (``prompts/*/self_ask*.txt``);
* the shared strategy code (``base.py``, ``parsing.py``, ...) and the prompts no
  strategy owns (``short_answer.txt``);
* the search and LLM layers (``sleuth/search``, ``sleuth/llm``).

Another strategy's module or prompts do not enter it: fixing Self-Ask leaves the
RAT records current.  A strategy defined outside Sleuth (``module:Class``)
hashes its own source file plus the shared parts.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

#: sub-packages of ``sleuth`` whose every file is shared by all strategies
SHARED_PACKAGES = ("search", "llm")
DIGITS = 12


def _package_root() -> Path:
    import sleuth

    return Path(sleuth.__file__).resolve().parent


def _strategy_stems(strategies_dir: Path) -> set[str]:
    """Module stems of the built-in strategies (the classes registered in ``sleuth.strategies``)."""
    from sleuth.strategies import STRATEGIES

    stems = set()
    for cls in STRATEGIES.values():
        src = inspect.getsourcefile(cls)
        if src and Path(src).resolve().parent == strategies_dir.resolve():
            stems.add(Path(src).stem)
    return stems


def _owner(prompt: Path, stems: Iterable[str]) -> str | None:
    """The strategy stem a prompt template belongs to (longest matching prefix), if any."""
    name = prompt.stem
    best = None
    for s in stems:
        if (name == s or name.startswith(s + "_")) and (best is None or len(s) > len(best)):
            best = s
    return best


def files_for(root: Path, own: Path | None, stems: set[str]) -> list[Path]:
    """The files that make up one strategy's fingerprint, under the package ``root``."""
    sdir = root / "strategies"
    own_stem = own.stem if own is not None and own.parent.resolve() == sdir.resolve() else None
    files: list[Path] = []
    for p in sorted(sdir.glob("*.py")):
        if p.stem in stems and p.stem != own_stem:
            continue  # another strategy's module
        files.append(p)
    for p in sorted(sdir.glob("prompts/*/*.txt")):
        owner = _owner(p, stems)
        if owner is None or owner == own_stem:
            files.append(p)
    for pkg in SHARED_PACKAGES:
        files += sorted(p for p in (root / pkg).rglob("*.py") if "__pycache__" not in p.parts)
    if own is not None and own_stem is None:
        files.append(own)  # a strategy defined outside Sleuth
    return files


def fingerprint_files(files: Iterable[Path], root: Path) -> str:
    h = hashlib.sha256()
    for p in files:
        try:
            rel = p.resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            rel = p.name
        h.update(rel.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:DIGITS]


def fingerprint_in(root: Path, strategy_file: Path | None, stems: set[str]) -> str:
    """The fingerprint of one strategy in a package tree at ``root`` (tests use a copy)."""
    return fingerprint_files(files_for(root, strategy_file, stems), root)


@lru_cache(maxsize=64)
def code_fingerprint(strategy: str) -> str:
    """The fingerprint of ``strategy`` (a built-in name or ``module:Class``) in the running code."""
    from sleuth.eval.config import resolve_strategy_class
    from sleuth.strategies import STRATEGIES, resolve_name

    cls = resolve_strategy_class(strategy)
    if cls is None:
        cls = STRATEGIES[resolve_name(strategy)]
    src = inspect.getsourcefile(cls)
    root = _package_root()
    return fingerprint_in(root, Path(src) if src else None, _strategy_stems(root / "strategies"))
