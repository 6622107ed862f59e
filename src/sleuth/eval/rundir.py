"""The run directory as one object: its ``run.json`` manifest, what its results already
hold (resume, re-run), and rescoring them in place.

Files are read and appended through :mod:`sleuth.eval.store`; this module decides what
they mean for a run: a resume must match the manifest's settings, a record counts as done
unless it failed (and ``--retry-failed`` asks for it again) or a re-run is under way and the
record is older than the re-run, and a rescore rewrites the results atomically under the run lock.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sleuth.eval.config import EvalError
from sleuth.eval.datasets import Item, load_dataset
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
from sleuth.eval.worker import FAILED, kind_of, now
from sleuth.llm.models import file_sha256


@dataclass
class Resume:
    """What a run directory already holds, judged against the tasks."""

    existing: list[dict[str, Any]]
    done: list[dict[str, Any]]  # the records whose tasks are not run again
    todo: list[Task]  # the run's tasks not done yet, in task order
    total: int  # the run's tasks, done or not
    #: the records a re-run makes again, by (strategy, task id): what the new ones are compared with
    rerun: dict[tuple[str, str], dict[str, Any]]


class RunDir:
    """One run directory (``--out``): manifest, results, resume, re-run and rescoring."""

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

    def begin(self, manifest: dict[str, Any], *, rerun: bool = False) -> dict[str, Any]:
        """The manifest to run under: ``manifest`` for a new run, the stored one for a resume (raises
        when the settings differ, or when results lie there without a manifest). With ``rerun``, a
        re-run of every task starts now (``rerun.started``) unless one is under way: it goes on."""
        old = read_manifest(self.path)
        if old is not None:
            check_manifest(old, manifest, self.path)
            manifest = dict(old)
        elif has_results(self.path):
            raise EvalError(f"{self.path} holds results but no {MANIFEST}; choose another --out directory")
        if rerun and "rerun" not in manifest:
            manifest["rerun"] = {"started": now()}
        return manifest

    def write_manifest(self, manifest: Mapping[str, Any]) -> None:
        write_manifest(self.path, manifest)

    def records(self) -> list[dict[str, Any]]:
        """The newest record of each task (:func:`sleuth.eval.store.read_records`)."""
        return read_records(self.results)

    def resume(self, tasks: Sequence[Task], manifest: Mapping[str, Any], *, retry_failed: bool) -> Resume:
        """Which of ``tasks`` are done: those with a record, unless it failed and ``retry_failed``, or a
        re-run is under way (``manifest["rerun"]``) and the record was made before it started."""
        existing = self.records()
        since = str((manifest.get("rerun") or {}).get("started") or "")
        old: dict[tuple[str, str], dict[str, Any]] = {}
        done: list[dict[str, Any]] = []
        for rec in existing:
            key = (rec["strategy"], str(rec["qid"]))
            if since and str(rec.get("finished_at") or "") < since:
                old[key] = rec
            elif not (retry_failed and rec.get("status") == FAILED):
                done.append(rec)
        keys = {(r["strategy"], str(r["qid"])) for r in done}
        todo = [t for t in tasks if (t[0], t[1].id) not in keys]
        return Resume(existing, done, todo, len(tasks), old)

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
