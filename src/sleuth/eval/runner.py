"""Run strategies over a dataset, resumably: ``sleuth eval --data PATH ...`` (docs/eval.md, "Run directory").
The driver ships the tasks not done yet to an executor and is the single writer of their records.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sleuth.eval.config import EvalConfig, EvalError, load_sample, validate
from sleuth.eval.conversations import REWRITE, is_conversation, mode_units
from sleuth.eval.corpus import plan_retrieval, search_mode
from sleuth.eval.datasets import Dataset, Item
from sleuth.eval.executors import make_executor
from sleuth.eval.gap import question_of, sub_items
from sleuth.eval.manifest import add_sitting, code_state, commit_label, new_manifest, stored_run
from sleuth.eval.metrics import Prices, score
from sleuth.eval.store import (
    RESULTS,
    ResultsWriter,
    check_manifest,
    is_composed,
    primary_score,
    read_manifest,
    read_records,
    rewrite_records,
    run_lock,
    write_manifest,
)
from sleuth.eval.worker import FAILED, kind_of, make_record, now, run_task, worker_config

#: one task: the strategy's name, the question, the task's meta (``{"kind": "main"}`` or a hop's)
Task = tuple[str, Item, dict[str, Any]]


def build_tasks(dataset: Dataset, strategies: Sequence[str], gap: bool) -> list[Task]:
    """Question-major order, so a partial run covers every strategy on the first questions.

    A conversation item also gets its baseline tasks (:func:`sleuth.eval.conversations.mode_units`)."""
    tasks: list[Task] = []
    for item in dataset.items:
        units: list[tuple[Item, dict[str, Any]]] = [(item, {"kind": "main"})]
        if is_conversation(item):
            units = [(item, {"kind": "main", "mode": REWRITE}), *mode_units(item)]
        if gap:
            units += [(s, {"kind": "sub", **s.metadata}) for s in sub_items(item)]
        tasks += [(strat, unit, meta) for unit, meta in units for strat in strategies]
    return tasks


class Sitting:
    """Hands out a run's tasks until ``limit`` seconds after ``started`` (``time.monotonic()``), then
    stops before the next question: the question in progress (every strategy, every hop) is finished.
    The executor asks here for its next task, so no task is started and then thrown away."""

    def __init__(self, limit: float | None, started: float | None = None) -> None:
        start = time.monotonic() if started is None else started
        self.deadline = None if limit is None else start + limit
        self.stopped_before: str | None = None  # the question not started because time was up

    def tasks(self, todo: Sequence[Task]) -> Iterator[Task]:
        current: str | None = None
        for task in todo:
            question = question_of(task[1].id)
            late = self.deadline is not None and time.monotonic() >= self.deadline
            if late and current not in (None, question):  # a new question after the time is up
                self.stopped_before = question
                return
            current = question
            yield task


class RunningScores:
    """Running means of each strategy's primary score (for the progress bar and the summary)."""

    def __init__(self) -> None:
        self.scores: dict[str, list[float]] = defaultdict(list)
        self.failed = 0

    def count(self, rec: Mapping[str, Any]) -> None:
        """Add a record that is done (written now or found on resume), counting it if it failed."""
        if is_composed(rec):
            self.scores[rec["strategy"]].append(primary_score(rec))
        self.failed += rec.get("status") == FAILED

    def bar_text(self, order: Sequence[str]) -> str:
        txt = " | ".join(f"{s} {sum(self.scores[s]) / len(self.scores[s]):.2f}" for s in order if self.scores.get(s))
        return f"{txt}  failed {self.failed}" if self.failed else txt

    def table(self) -> dict[str, dict[str, float]]:
        return {s: {"n": len(v), "score": sum(v) / len(v)} for s, v in self.scores.items()}


def progress_bar(enabled: bool, console: Any) -> Any:
    """A rich progress bar on ``console`` (hidden when not ``enabled``); use it as a context."""
    from rich import progress as rp

    return rp.Progress(
        rp.TextColumn("[bold]eval"),
        rp.BarColumn(),
        rp.MofNCompleteColumn(),
        rp.TimeElapsedColumn(),
        rp.TimeRemainingColumn(),
        rp.TextColumn("{task.fields[scores]}"),
        console=console,
        disable=not enabled,
    )


@dataclass
class RunSummary:
    out: Path
    total: int
    skipped: int  # already in the JSONL
    ran: int
    failed: int
    seconds: float
    per_strategy: dict[str, dict[str, float]]
    stopped_before: str | None = None  # --time-limit: the first question this sitting left for the next

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "out": str(self.out)}


def _resume(
    out: Path, tasks: Sequence[Task], manifest: Mapping[str, Any], *, retry_failed: bool
) -> tuple[list[dict[str, Any]], list[Task], dict[tuple[str, str], dict[str, Any]]]:
    """The records whose tasks are done, the tasks left (in task order) and the records a re-run makes
    again, by (strategy, task id). Done: a task with a record, unless it failed and ``retry_failed``, or
    a re-run is under way (``manifest["rerun"]``) and the record was made before it started."""
    since = str((manifest.get("rerun") or {}).get("started") or "")
    done: dict[tuple[str, str], dict[str, Any]] = {}
    old: dict[tuple[str, str], dict[str, Any]] = {}
    for rec in read_records(out):
        key = (rec["strategy"], str(rec["qid"]))
        if since and str(rec.get("finished_at") or "") < since:
            old[key] = rec
        elif not (retry_failed and rec.get("status") == FAILED):
            done[key] = rec
    return list(done.values()), [t for t in tasks if (t[0], t[1].id) not in done], old


def run_eval(
    cfg: EvalConfig,
    *,
    progress: bool = True,
    console: Any = None,
    on_record: Callable[[dict[str, Any]], None] | None = None,
    write_report: bool = True,
) -> RunSummary:
    """Run (or resume) an evaluation into ``cfg.out``; see the module docstring."""
    started = time.monotonic()  # --time-limit counts from here (index building and model start included)
    validate(cfg)
    prices = Prices.parse(cfg.prices)
    dataset = load_sample(cfg)
    if cfg.gap and not any(sub_items(it) for it in dataset.items):
        raise EvalError(f"--gap needs decompositions with gold answers (MuSiQue); {dataset.name} has none")
    out = Path(cfg.out)
    if out.exists() and not out.is_dir():
        raise EvalError(f"--out {out} is a file, not a directory")
    previous = (read_manifest(out) or {}).get("settings") if out.is_dir() else None  # a resume keeps its mode
    plan = plan_retrieval(dataset, cfg.setting, index=cfg.index, mode=search_mode(cfg.search_mode, previous))
    out.mkdir(parents=True, exist_ok=True)
    manifest = new_manifest(cfg, dataset, plan)
    code = code_state(cfg)
    commit = commit_label(code["commit"], code["dirty"])
    with run_lock(out):
        old_manifest = read_manifest(out)
        if old_manifest is not None:  # a resume: same settings, and the run goes on under its own manifest
            check_manifest(old_manifest, manifest, out)
            manifest = dict(old_manifest)
        if cfg.rerun and "rerun" not in manifest:  # a re-run of every task starts now, unless one is under way
            manifest["rerun"] = {"started": now()}
        add_sitting(manifest, code, now())
        tasks = every = build_tasks(dataset, cfg.strategies, cfg.gap)
        manifest["tasks"] = len(tasks)  # the report's progress line and comparable set read these two
        if cfg.only is not None:  # this sitting runs some strategies; the run keeps them all
            tasks = [t for t in tasks if t[0] in cfg.only]
        if cfg.gap:
            manifest["hops"] = {it.id: len(sub_items(it)) for it in dataset.items}
        done, todo, old = _resume(out, tasks, manifest, retry_failed=cfg.retry_failed)
        if old and console is not None:
            console.print(
                f"[yellow]re-running {len(old)} of {len(old) + len(done)} records of {out} with commit {commit}; "
                "the response cache answers every prompt that did not change.[/]"
            )
        plan.prepare(console=console if progress else None)  # the open index is built once, before any worker
        manifest["index"] = plan.manifest()
        write_manifest(out, manifest)
        running = RunningScores()
        for rec in done:
            running.count(rec)
        sitting = Sitting(cfg.time_limit, started)
        worker_cfg = worker_config(cfg, plan)
        payloads = ({"strategy": s, "item": it, "config": worker_cfg} for s, it, _ in sitting.tasks(todo))
        items_by_id = {it.id: (it, m) for _, it, m in todo}
        notice = None if console is None else lambda msg: console.print(f"[yellow]warning: {msg}[/]")
        t0 = time.perf_counter()
        ran = failed = 0
        executor = make_executor(cfg.executor, cfg.concurrency)
        try:
            with (
                ResultsWriter(out / RESULTS, on_notice=notice) as writer,
                progress_bar(progress, console) as pb,
            ):
                bar = pb.add_task(
                    "eval", total=len(tasks), completed=len(tasks) - len(todo), scores=running.bar_text(cfg.strategies)
                )
                for rec in executor.map_unordered(run_task, payloads):
                    item, meta = items_by_id[rec["qid"]]
                    rec = make_record(rec, item, meta, dataset, prices, commit, old.get((rec["strategy"], item.id)))
                    writer.write(rec)
                    ran += 1
                    failed += rec["status"] == FAILED
                    running.count(rec)
                    pb.update(bar, advance=1, scores=running.bar_text(cfg.strategies))
                    if on_record is not None:
                        on_record(rec)
        finally:
            executor.close()
        seconds = round(time.perf_counter() - t0, 3)
        if "rerun" in manifest and not _resume(out, every, manifest, retry_failed=False)[1]:
            del manifest["rerun"]  # every task of the run made again: the re-run is over
            write_manifest(out, manifest)
        if write_report:
            from sleuth.eval.report import write_report as _write_report

            _write_report(out)
        skipped = len(tasks) - len(todo)
        return RunSummary(out, len(tasks), skipped, ran, failed, seconds, running.table(), sitting.stopped_before)


def rerun_eval(out: str | Path, *, progress: bool = True, console: Any = None, **overrides: Any) -> RunSummary:
    """Run every task of the run directory ``out`` again with the running code, as its ``run.json``
    says (``overrides``: ``data``, ``corpus``, ``index``, ``base_url`` where they moved, and
    :class:`EvalConfig` fields such as ``time_limit`` or ``llm_cache``); each new record replaces
    the old one. A re-run stopped early (``time_limit``) goes on where it stopped when asked again."""
    _, cfg, _ = stored_run(out, **overrides, rerun=True)
    return run_eval(cfg, progress=progress, console=console)


def rescore_run(out: str | Path) -> int:
    """Recompute every record's ``scores`` in the run directory ``out`` (after a metrics change) against
    the questions file named in ``run.json``, without running anything; returns the number of records."""
    manifest, cfg, dataset = stored_run(out)
    items = {it.id: it for _, it, _ in build_tasks(dataset, cfg.strategies[:1], cfg.gap)}
    prices = Prices.parse(manifest.get("prices"))

    def rescore_one(rec: dict[str, Any]) -> dict[str, Any]:
        item = items.get(str(rec["qid"]))
        if item is None:  # not a task of the run: left as it is
            return rec
        return {**rec, "scores": score(item, rec.get("result") or {}, prices), "kind": kind_of(item)}

    with run_lock(out):
        return rewrite_records(out, rescore_one)  # each results file atomically, a torn tail dropped
