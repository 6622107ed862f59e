"""What made a run: the ``run.json`` manifest (docs/eval.md, "What made a run"), and the
:class:`EvalConfig` it gives back for a re-run or a verification. Each record names the commit of the
sitting that made it (:func:`commit_label`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import shlex
import subprocess
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

import sleuth
from sleuth.eval.config import SAME_IN_SETTINGS, EvalConfig, EvalError, load_sample
from sleuth.eval.corpus import RetrievalPlan, search_mode
from sleuth.eval.datasets import Dataset
from sleuth.eval.store import MANIFEST, read_manifest
from sleuth.llm.models import file_sha256
from sleuth.strategies.registry import check_run_options

SCHEMA = 2  # 1: runs made before manifests named their commit (read the same way; their records name none)
PACKAGE = Path(sleuth.__file__).resolve().parent


@lru_cache(maxsize=1)
def git_state() -> tuple[str, bool]:
    """The commit Sleuth's source tree is at and whether its package has uncommitted changes
    (``("", False)`` for an installed package outside a git checkout)."""

    def git(*args: str) -> str:
        cmd = ["git", "-C", str(PACKAGE), *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=True).stdout.strip()

    try:
        commit = git("rev-parse", "HEAD")
        dirty = bool(git("status", "--porcelain", "--", "."))
    except (OSError, subprocess.SubprocessError):
        return "", False
    return commit, dirty


def commit_label(commit: str, dirty: bool) -> str:
    """What a record names as the code that made it: 12 digits of the commit, ``+dirty`` when the
    package had uncommitted changes; the package version outside a git checkout."""
    return commit[:12] + ("+dirty" if dirty else "") if commit else f"sleuth {sleuth.__version__}"


def prompts_hash(strategy: str) -> str:
    """16 hex digits of SHA-256 over the prompt templates ``strategy`` reads (``prompts/*/<name>*.txt``)
    and those every strategy shares (``short_answer.txt``); "" for a strategy without templates."""
    from sleuth.strategies.registry import STRATEGIES, strategy_class

    root = PACKAGE / "strategies" / "prompts"
    stem = str(getattr(strategy_class(strategy), "name", "")).replace("-", "_")
    owners = {str(c.name).replace("-", "_") for c in STRATEGIES.values()}
    h, n = hashlib.sha256(), 0
    for p in sorted(root.glob("*/*.txt")):
        owner = max((o for o in owners if p.stem == o or p.stem.startswith(o + "_")), key=len, default=None)
        if owner == stem or (owner is None and p.stem == "short_answer"):
            h.update(f"{p.relative_to(root).as_posix()}\0{p.read_text(encoding='utf-8')}\0".encode())
            n += 1
    return h.hexdigest()[:16] if n else ""


def model_identity(model: str | None, base_url: str | None) -> dict[str, Any]:
    """The model a run asks: the embedded model's name and its file's sha256, or a server's model and URL."""
    from sleuth.llm.models import MODELS
    from sleuth.llm.settings import resolve_llm_settings

    try:
        s = resolve_llm_settings(model, base_url=base_url)
    except Exception as e:  # e.g. a missing API key: the run itself says so when it first calls the model
        return {"name": model or "default", "error": str(e)}
    if s.embedded:
        m = MODELS.get(s.model)
        return {"name": s.model, "sha256": m.sha256 if m else None}
    return {"name": s.model, "base_url": s.base_url}


def code_state(cfg: EvalConfig) -> dict[str, Any]:
    """The code a sitting runs: commit, dirtiness, version, model, prompt hashes and typed options."""
    commit, dirty = git_state()
    typed = check_run_options(cfg.strategies, cfg.run_options())
    return {
        "commit": commit,
        "dirty": dirty,
        "version": sleuth.__version__,
        "model": model_identity(cfg.model, cfg.base_url),
        "prompts": {s: prompts_hash(s) for s in cfg.strategies},
        "options": {s: dataclasses.asdict(o) for s, o in typed.items()},
    }


def new_manifest(cfg: EvalConfig, dataset: Dataset, plan: RetrievalPlan) -> dict[str, Any]:
    """The manifest of a run starting now (a resume keeps the first one's settings and adds its sitting)."""
    return {
        "schema": SCHEMA,
        "command": cfg.command or " ".join(shlex.quote(a) for a in sys.argv),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "data": {
            "path": str(Path(cfg.data)),
            "name": dataset.name,
            "sha256": file_sha256(Path(cfg.data)),
            "questions": len(dataset.items),
            "question_ids": [it.id for it in dataset.items],
        },
        "settings": cfg.settings(dataset, plan),
        "executor": cfg.executor,
        "concurrency": cfg.concurrency,
        "isolated_tasks": cfg.isolated_tasks(),
        "prices": cfg.prices,
    }


def add_sitting(manifest: dict[str, Any], code: Mapping[str, Any], started: str) -> None:
    """Record a sitting's code in ``manifest``: ``code`` is the latest sitting's, ``sittings`` lists them all."""
    manifest["code"] = dict(code)
    label = commit_label(str(code.get("commit") or ""), bool(code.get("dirty")))
    manifest["sittings"] = [*manifest.get("sittings", []), {"started": started, "commit": label}]


def config_from_manifest(manifest: Mapping[str, Any], out: str | Path, **kw: Any) -> EvalConfig:
    """The :class:`EvalConfig` that a run's ``run.json`` records; ``kw``: fields set otherwise (None: as
    recorded), e.g. the ``data``, ``corpus``, ``index`` or ``base_url`` where they moved (by default the
    server the run's last sitting asked) or the sitting's ``time_limit``."""
    s = manifest.get("settings") or {}
    same = ("format", "setting", "strategies", "split", *SAME_IN_SETTINGS)
    fields: dict[str, Any] = {
        **{k: s[k] for k in same if k in s},
        "strategy_options": dict(s.get("strategy_options") or {}),
        "data": str((manifest.get("data") or {}).get("path", "")),
        "out": str(out),
        "model": None if s.get("model") in (None, "default") else str(s["model"]),
        "base_url": ((manifest.get("code") or {}).get("model") or {}).get("base_url"),  # the server the run asked
        "search_mode": search_mode(None, s),
        "concurrency": int(manifest.get("concurrency") or 1),
        "isolate": bool(manifest.get("isolated_tasks", True)),
        "prices": manifest.get("prices"),
        "executor": str(manifest.get("executor") or "local"),
        "command": str(manifest.get("command") or ""),
    }
    moved = {k: str(v) if isinstance(v, Path) else v for k, v in kw.items() if v is not None}
    return EvalConfig(**{**fields, **moved})


def stored_run(out: str | Path, **overrides: Any) -> tuple[dict[str, Any], EvalConfig, Dataset]:
    """A run directory's manifest, the :class:`EvalConfig` it records (``overrides``: as for
    :func:`config_from_manifest`) and the run's sample, drawn again from the same data file."""
    manifest = read_manifest(out)
    if manifest is None:
        raise EvalError(f"{out} has no {MANIFEST}: nothing says how its records were made")
    cfg = config_from_manifest(manifest, out, **overrides)
    path = Path(cfg.data)
    if not path.is_file():
        raise EvalError(f"the data file {path} named in run.json is missing; pass --data PATH")
    if file_sha256(path) != (manifest.get("data") or {}).get("sha256"):
        raise EvalError(f"{path} is not the file the run used (its sha256 differs)")
    dataset = load_sample(cfg)
    if [it.id for it in dataset.items] != list((manifest.get("data") or {}).get("question_ids") or []):
        raise EvalError("the sample drawn now is not the run's sample (question ids differ)")
    return manifest, cfg, dataset
