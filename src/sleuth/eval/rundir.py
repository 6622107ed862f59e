"""The run directory as one object: its ``run.json`` manifest, what its results already
hold (resume), which of them are stale, and rescoring them in place.

Files are read and appended through :mod:`sleuth.eval.store`; this module decides what
they mean for a run: a resume must match the manifest's settings, a record counts as done
unless it is stale (and ``--redo-stale`` asks for it again) or failed (and
``--retry-failed`` does), and a rescore rewrites the results atomically under the run lock.
"""

from __future__ import annotations

import shlex
import sys
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sleuth.eval.config import EvalConfig, EvalError
from sleuth.eval.corpus import RetrievalPlan
from sleuth.eval.datasets import Dataset, Item, load_dataset
from sleuth.eval.fingerprint import code_fingerprint, code_lang
from sleuth.eval.gap import sub_items
from sleuth.eval.metrics import Prices, score
from sleuth.eval.store import (
    MANIFEST,
    RESULTS,
    ResultsWriter,
    check_manifest,
    has_results,
    read_manifest,
    read_records,
    rewrite_records,
    run_lock,
    write_manifest,
)
from sleuth.eval.tasks import Task
from sleuth.eval.worker import FAILED, SCHEMA, kind_of
from sleuth.llm.models import file_sha256

#: why a stored record is stale (see :func:`stale_reason`)
OTHER_CODE, REWORDED = "made by other code", "asked a differently worded question"


def code_fingerprints(strategies: Sequence[str], lang: str | None) -> dict[str, str]:
    """The running code's fingerprint for each strategy of a run in fingerprint language ``lang``
    (the manifest's ``code_lang``: ``en``, ``zh`` or ``en+zh``; None, as in a manifest without one: combined)."""
    try:
        return {s: code_fingerprint(s, lang) for s in strategies}
    except Exception as e:  # an unknown name fails later, per question, with its own message
        raise EvalError(f"cannot fingerprint the strategies' code: {e}") from e


def run_code_lang(cfg: EvalConfig, tasks: Sequence[Task]) -> str:
    """The fingerprint language of a run of ``tasks`` (:func:`sleuth.eval.fingerprint.code_lang`): the
    languages of the questions its tasks ask, or the ``lang`` option it gives its strategies."""
    return code_lang((t[1].prompt() for t in tasks), cfg.strategy_options.get("lang"))


def _reworded(rec: Mapping[str, Any], items_by_id: Mapping[str, tuple[Item, Any]]) -> bool:
    """Whether ``rec`` answered a question worded differently from the one its id asks now."""
    entry = items_by_id.get(str(rec.get("qid")))
    return entry is not None and "question" in rec and rec["question"] != entry[0].prompt()


def stale_reason(rec: Mapping[str, Any], code: Mapping[str, str], items_by_id: Mapping[str, tuple[Item, Any]]) -> str:
    """Why ``rec`` is stale: :data:`OTHER_CODE`, :data:`REWORDED`, or "" when the running code would make it.

    ``code`` maps each strategy of the run to its fingerprint (records of other strategies are not
    judged by code); ``items_by_id`` maps a task id to its (item, task meta).
    """
    if rec.get("code") != code.get(rec["strategy"], rec.get("code")):
        return OTHER_CODE
    if _reworded(rec, items_by_id):
        return REWORDED
    return ""


def _by_strategy(records: Sequence[Mapping[str, Any]]) -> str:
    by = Counter(r["strategy"] for r in records)
    return ", ".join(f"{s}: {n}" for s, n in sorted(by.items()))


@dataclass
class Resume:
    """What a run directory already holds, judged against the tasks and the running code."""

    existing: list[dict[str, Any]]
    other_code: list[dict[str, Any]]  # stale: made by other code
    reworded: list[dict[str, Any]]  # stale: the question's id asks a differently worded question now
    done: list[dict[str, Any]]  # the records whose tasks are not run again
    todo: list[Task]  # the run's tasks not done yet, in task order
    total: int  # the run's tasks, done or not
    redo_stale: bool
    redone: list[dict[str, Any]] = field(default_factory=list)  # records --redo named: run again

    def redo_message(self) -> str:
        """One sentence on the records ``--redo`` named (rich markup)."""
        ids = sorted({str(r["qid"]) for r in self.redone})
        shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
        return (
            f"[yellow]--redo: {len(self.redone)} recorded task(s) run again ({_by_strategy(self.redone)}) "
            f"on {shown}; the old records stay in the run's history.[/]"
        )

    @property
    def stale(self) -> list[dict[str, Any]]:
        return self.other_code + self.reworded

    def stale_message(self, out: Path) -> str:
        """One sentence on the stale records (rich markup): how many, why, and what happens to them."""
        why = [
            f"{len(self.other_code)} {OTHER_CODE} ({_by_strategy(self.other_code)})" if self.other_code else "",
            f"{len(self.reworded)} {REWORDED} ({_by_strategy(self.reworded)})" if self.reworded else "",
        ]
        return (
            f"[yellow]{len(self.stale)} of {len(self.existing)} records in {out} are stale: "
            + "; ".join(w for w in why if w)
            + "; "
            + ("they are run again.[/]" if self.redo_stale else "they are kept: --redo-stale runs them again.[/]")
        )


def new_manifest(cfg: EvalConfig, dataset: Dataset, plan: RetrievalPlan) -> dict[str, Any]:
    """The manifest of a run starting now (a resume keeps the first one's and adds to it)."""
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


class RunDir:
    """One run directory (``--out``): manifest, results, resume, staleness and rescoring."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.results = self.path / RESULTS

    @classmethod
    def create(cls, path: str | Path) -> RunDir:
        """The run directory at ``path``, made if missing (raises :class:`EvalError` for a file)."""
        out = Path(path)
        if out.exists() and not out.is_dir():
            raise EvalError(f"--out {out} is a file, not a directory")
        out.mkdir(parents=True, exist_ok=True)
        return cls(out)

    def lock(self) -> AbstractContextManager[None]:
        """The exclusive lock of the directory (:func:`sleuth.eval.store.run_lock`)."""
        return run_lock(self.path)

    def begin(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """The manifest to run under: ``manifest`` for a new run, the stored one plus this resume's date
        for a resume (raises when the settings differ, or when results lie there without a manifest)."""
        old = read_manifest(self.path)
        if old is not None:
            check_manifest(old, manifest, self.path)
            return {**old, "resumed": [*old.get("resumed", []), manifest["created"]]}
        if has_results(self.path):
            raise EvalError(f"{self.path} holds results but no {MANIFEST}; choose another --out directory")
        return manifest

    def write_manifest(self, manifest: Mapping[str, Any]) -> None:
        write_manifest(self.path, manifest)

    def records(self) -> list[dict[str, Any]]:
        """The newest record of each task (:func:`sleuth.eval.store.read_records`)."""
        return read_records(self.results)

    def resume(
        self,
        tasks: Sequence[Task],
        code: Mapping[str, str],
        *,
        retry_failed: bool,
        redo_stale: bool,
        redo: Collection[str] = (),
    ) -> Resume:
        """Which of ``tasks`` are done: those with a record, unless it failed and ``retry_failed``,
        it is stale (made by other code than ``code``, or for a reworded question) and ``redo_stale``,
        or its question id is in ``redo``."""
        existing = self.records()
        items_by_id = {t[1].id: (t[1], t[2]) for t in tasks}
        # stale: made by other code, or asked a question worded differently from what this
        # code asks for that id (e.g. a changed sub-question rendering); the code fingerprint
        # covers strategies, search and llm, the question text covers the dataset side
        reasons = [stale_reason(r, code, items_by_id) for r in existing]
        other_code = [r for r, why in zip(existing, reasons, strict=True) if why == OTHER_CODE]
        reworded = [r for r, why in zip(existing, reasons, strict=True) if why == REWORDED]
        again = {(r["strategy"], r["qid"]) for r in other_code + reworded} if redo_stale else set()
        named = {(t[0], t[1].id) for t in tasks if t[1].id in redo}  # of this sitting's strategies only
        again |= named
        done: list[dict[str, Any]] = []
        keys: set[tuple[str, str]] = set()
        for rec in existing:
            if retry_failed and rec.get("status") == FAILED:
                continue
            if (rec["strategy"], rec["qid"]) in again:
                continue
            keys.add((rec["strategy"], rec["qid"]))
            done.append(rec)
        todo = [t for t in tasks if (t[0], t[1].id) not in keys]
        redone = [r for r in existing if (r["strategy"], r["qid"]) in named]
        return Resume(existing, other_code, reworded, done, todo, len(tasks), redo_stale, redone)

    def writer(self, on_notice: Callable[[str], None] | None = None) -> ResultsWriter:
        """The single appender of the results (a context manager)."""
        return ResultsWriter(self.results, on_notice=on_notice)

    def rescore(self) -> int:
        """Recompute every record's ``scores`` (after a metrics change) without running anything.

        Reads the questions file named in ``run.json`` (its sha256 must still match), rewrites
        the results atomically under the run lock and returns the number of records rescored.
        """
        manifest = read_manifest(self.path)
        if manifest is None:
            raise EvalError(f"{self.path} has no {MANIFEST}; cannot tell which data to score against")
        data = manifest.get("data") or {}
        path = Path(str(data.get("path", "")))
        if not path.is_file():
            raise EvalError(f"the data file {path} named in {self.path / MANIFEST} is missing")
        if file_sha256(path) != data.get("sha256"):
            raise EvalError(f"{path} changed since the run; rescoring against it would be wrong")
        settings = manifest.get("settings") or {}
        items: dict[str, Item] = {}
        for it in load_dataset(path, settings.get("format")).items:
            items[it.id] = it
            for sub in sub_items(it):
                items[sub.id] = sub
        try:
            prices = Prices.parse(manifest.get("prices"))
        except ValueError as e:
            raise EvalError(str(e)) from e
        n = 0

        def rescore_one(rec: dict[str, Any]) -> dict[str, Any]:
            nonlocal n
            item = items.get(str(rec.get("qid")))
            if item is not None:
                rec["scores"] = score(item, rec.get("result") or {}, prices)
                rec["kind"] = kind_of(item)
                n += 1
            return rec

        with self.lock():
            rewrite_records(self.path, rescore_one)  # each results file atomically, a torn tail dropped
        return n
