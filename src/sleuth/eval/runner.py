"""Run strategies over a dataset, resumably: ``sleuth eval --data PATH ...`` (docs/eval.md, "Run directory").

Load and sample the dataset, check or write ``run.json``, read what the results already hold, prepare
retrieval, ship the remaining (strategy, question) tasks to an executor, then score and append each
result as it comes back (the single writer) and write the report. A record counts as done unless it
failed (and ``--retry-failed`` asks for it again) or a re-run is under way and it is older than the re-run.
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
from sleuth.eval.corpus import CorpusError, plan_retrieval, search_mode
from sleuth.eval.datasets import Dataset, DatasetError, Item, load_dataset
from sleuth.eval.executors import make_executor
from sleuth.eval.gap import question_of, sub_items
from sleuth.eval.manifest import add_sitting, check_data, code_state, commit_label, config_from_manifest, new_manifest
from sleuth.eval.metrics import Prices, score
from sleuth.eval.store import (
    MANIFEST,
    RESULTS,
    ManifestMismatch,
    ResultsWriter,
    RunDirBusy,
    check_manifest,
    has_results,
    is_composed,
    primary_score,
    read_manifest,
    read_records,
    rewrite_records,
    run_lock,
    write_manifest,
)
from sleuth.eval.worker import FAILED, kind_of, make_record, now, run_task, worker_config

#: what the eval commands report as a user's mistake: one sentence, no traceback
USER_ERRORS = (DatasetError, EvalError, CorpusError, ManifestMismatch, RunDirBusy)


#: one task: the strategy's name, the question, the task's meta (``{"kind": "main"}`` or a hop's)
Task = tuple[str, Item, dict[str, Any]]


def build_tasks(dataset: Dataset, strategies: Sequence[str], gap: bool) -> list[Task]:
    """Question-major order, so a partial run covers every strategy on the first questions.

    A conversation item also gets its baseline tasks (:func:`sleuth.eval.conversations.mode_units`)."""
    tasks = []
    for item in dataset.items:
        units: list[tuple[Item, dict[str, Any]]] = [(item, {"kind": "main"})]
        if is_conversation(item):
            units = [(item, {"kind": "main", "mode": REWRITE}), *mode_units(item)]
        if gap:
            units += [(s, {"kind": "sub", **s.metadata}) for s in sub_items(item)]
        for unit, meta in units:
            for strat in strategies:
                tasks.append((strat, unit, meta))
    return tasks


class Sitting:
    """Hands out a run's tasks until a time limit, stopping only between questions.

    Once ``limit`` seconds have passed since ``started`` (a ``time.monotonic()`` reading), the
    next task that would start a new question is not handed out: the tasks of the question in
    progress (all strategies, and the hops of a composed question) still run, so a sitting ends
    on a complete question and the next one, resumed with the same command, starts on a fresh
    one. The check sits where the executor asks for its next task, so no task is started and
    then thrown away.
    """

    def __init__(self, limit: float | None, started: float | None = None) -> None:
        start = time.monotonic() if started is None else started
        self.deadline = None if limit is None else start + limit
        self.stopped_before: str | None = None  # the question not started because time was up

    def tasks(self, todo: Sequence[Task]) -> Iterator[Task]:
        current: str | None = None
        for task in todo:
            question = question_of(task[1].id)
            if (
                self.deadline is not None
                and current is not None
                and question != current
                and time.monotonic() >= self.deadline
            ):
                self.stopped_before = question
                return
            current = question
            yield task


class RunningScores:
    """Running means of each strategy's primary score (for the progress bar and the summary)."""

    def __init__(self) -> None:
        self.sum: dict[str, float] = defaultdict(float)
        self.n: dict[str, int] = defaultdict(int)
        self.failed = 0

    def count(self, rec: Mapping[str, Any]) -> None:
        """Add a record that is done (written now or found on resume), counting it if it failed."""
        if is_composed(rec):
            self.sum[rec["strategy"]] += primary_score(rec)
            self.n[rec["strategy"]] += 1
        self.failed += rec.get("status") == FAILED

    def bar_text(self, order: Sequence[str]) -> str:
        txt = " | ".join(f"{s} {self.sum[s] / self.n[s]:.2f}" for s in order if self.n.get(s))
        return f"{txt}  failed {self.failed}" if self.failed else txt

    def table(self) -> dict[str, dict[str, float]]:
        return {s: {"n": self.n[s], "score": self.sum[s] / self.n[s]} for s in self.n if self.n[s]}


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
        transient=False,
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
        d = asdict(self)
        d["out"] = str(self.out)
        return d


@dataclass
class Resume:
    """What a run directory already holds, judged against the tasks."""

    existing: list[dict[str, Any]]
    done: list[dict[str, Any]]  # the records whose tasks are not run again
    todo: list[Task]  # the run's tasks not done yet, in task order
    total: int  # the run's tasks, done or not
    #: the records a re-run makes again, by (strategy, task id): what the new ones are compared with
    rerun: dict[tuple[str, str], dict[str, Any]]


def _parse_prices(spec: str | None) -> Prices:
    try:
        return Prices.parse(spec)
    except ValueError as e:
        raise EvalError(str(e)) from e


def _begin(out: Path, manifest: dict[str, Any], *, rerun: bool) -> dict[str, Any]:
    """The manifest to run under: ``manifest`` for a new run, the stored one for a resume (raises
    when the settings differ, or when results lie there without a manifest). With ``rerun``, a
    re-run of every task starts now (``rerun.started``) unless one is under way: it goes on."""
    old = read_manifest(out)
    if old is not None:
        check_manifest(old, manifest, out)
        manifest = dict(old)
    elif has_results(out):
        raise EvalError(f"{out} holds results but no {MANIFEST}; choose another --out directory")
    if rerun and "rerun" not in manifest:
        manifest["rerun"] = {"started": now()}
    return manifest


def _resume(out: Path, tasks: Sequence[Task], manifest: Mapping[str, Any], *, retry_failed: bool) -> Resume:
    """Which of ``tasks`` are done: those with a record, unless it failed and ``retry_failed``, or a
    re-run is under way (``manifest["rerun"]``) and the record was made before it started."""
    existing = read_records(out / RESULTS)
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
    prices = _parse_prices(cfg.prices)
    dataset = load_sample(cfg)
    if cfg.gap and not any(sub_items(it) for it in dataset.items):
        raise EvalError(f"--gap needs decompositions with gold answers (MuSiQue); {dataset.name} has none")
    previous = read_manifest(cfg.out) if Path(cfg.out).is_dir() else None  # a resume keeps its search mode
    mode = search_mode(cfg.search_mode, (previous or {}).get("settings"))
    try:
        plan = plan_retrieval(dataset, cfg.setting, index=cfg.index, mode=mode)
    except CorpusError as e:
        raise EvalError(str(e)) from e
    out = Path(cfg.out)
    if out.exists() and not out.is_dir():
        raise EvalError(f"--out {out} is a file, not a directory")
    out.mkdir(parents=True, exist_ok=True)
    manifest = new_manifest(cfg, dataset, plan)
    code = code_state(cfg)
    commit = commit_label(code["commit"], code["dirty"])
    with run_lock(out):
        manifest = _begin(out, manifest, rerun=cfg.rerun)
        add_sitting(manifest, code, now())
        tasks = every = build_tasks(dataset, cfg.strategies, cfg.gap)
        manifest["tasks"] = len(tasks)  # the report's progress line and comparable set read these two
        if cfg.only is not None:  # this sitting runs some strategies; the run keeps them all
            tasks = [t for t in tasks if t[0] in cfg.only]
        if cfg.gap:
            manifest["hops"] = {it.id: len(sub_items(it)) for it in dataset.items}
        resume = _resume(out, tasks, manifest, retry_failed=cfg.retry_failed)
        if resume.rerun and console is not None:
            console.print(
                f"[yellow]re-running {len(resume.rerun)} of {len(resume.existing)} records of {out} with "
                f"commit {commit}; the response cache answers every prompt that did not change.[/]"
            )
        try:  # the open index is built once, before any worker
            plan.prepare(console=console if progress else None)
        except CorpusError as e:
            raise EvalError(str(e)) from e
        manifest["index"] = plan.manifest()
        write_manifest(out, manifest)
        sitting = Sitting(cfg.time_limit, started)
        worker_cfg = worker_config(cfg, plan)
        summary = _drive(out, resume, sitting, worker_cfg, cfg, dataset, prices, commit, progress, console, on_record)
        if "rerun" in manifest and not _resume(out, every, manifest, retry_failed=False).todo:
            del manifest["rerun"]  # every task of the run made again: the re-run is over
            write_manifest(out, manifest)
        if write_report:
            from sleuth.eval.report import write_report as _write_report

            _write_report(out)
        return summary


def rerun_eval(out: str | Path, *, progress: bool = True, console: Any = None, **overrides: Any) -> RunSummary:
    """Run every task of the run directory ``out`` again with the running code, as its ``run.json``
    says (``overrides``: ``data``, ``corpus``, ``index``, ``base_url`` where they moved, and
    :class:`EvalConfig` fields such as ``time_limit`` or ``llm_cache``); each new record replaces
    the old one. A re-run stopped early (``time_limit``) goes on where it stopped when asked again."""
    manifest = read_manifest(out)
    if manifest is None:
        raise EvalError(f"{out} has no {MANIFEST}: nothing says how its records were made")
    cfg = config_from_manifest(manifest, out, **{k: v for k, v in overrides.items() if v is not None}, rerun=True)
    return run_eval(cfg, progress=progress, console=console)


def _drive(
    out: Path,
    resume: Resume,
    sitting: Sitting,
    worker_cfg: dict[str, Any],
    cfg: EvalConfig,
    dataset: Dataset,
    prices: Prices,
    commit: str,
    progress: bool,
    console: Any,
    on_record: Callable[[dict[str, Any]], None] | None,
) -> RunSummary:
    """Ship the tasks left to the executor; score, append and show each record as it comes back."""
    total, skipped = resume.total, resume.total - len(resume.todo)
    running = RunningScores()
    for rec in resume.done:
        running.count(rec)
    items_by_id = {t[1].id: (t[1], t[2]) for t in resume.todo}
    payloads = ({"strategy": s, "item": it.to_dict(), "config": worker_cfg} for s, it, _ in sitting.tasks(resume.todo))

    def notice(msg: str) -> None:
        if console is not None:
            console.print(f"[yellow]warning: {msg}[/]")

    t0 = time.perf_counter()
    ran = failed = 0
    executor = make_executor(cfg.executor, cfg.concurrency)
    try:
        with ResultsWriter(out / RESULTS, on_notice=notice) as writer, progress_bar(progress, console) as pb:
            bar = pb.add_task("eval", total=total, completed=skipped, scores=running.bar_text(cfg.strategies))
            for rec in executor.map_unordered(run_task, payloads):
                item, meta = items_by_id[rec["qid"]]
                old = resume.rerun.get((rec["strategy"], str(rec["qid"])))
                rec = make_record(rec, item, meta, dataset, prices, commit, old)
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
    return RunSummary(out, total, skipped, ran, failed, seconds, running.table(), sitting.stopped_before)


def rescore_run(out: str | Path) -> int:
    """Recompute every record's ``scores`` in the run directory ``out`` (after a metrics change)
    without running anything.

    Reads the questions file named in ``run.json`` (its sha256 must still match), rewrites
    the results atomically under the run lock and returns the number of records rescored.
    """
    out = Path(out)
    manifest = read_manifest(out)
    if manifest is None:
        raise EvalError(f"{out} has no {MANIFEST}; cannot tell which data to score against")
    path = Path(str((manifest.get("data") or {}).get("path", "")))
    check_data(manifest, path)
    items: dict[str, Item] = {}
    for it in load_dataset(path, (manifest.get("settings") or {}).get("format")).items:
        items[it.id] = it
        items.update((sub.id, sub) for sub in sub_items(it))
    prices = _parse_prices(manifest.get("prices"))
    n = 0

    def rescore_one(rec: dict[str, Any]) -> dict[str, Any]:
        nonlocal n
        item = items.get(str(rec.get("qid")))
        if item is not None:
            rec["scores"] = score(item, rec.get("result") or {}, prices)
            rec["kind"] = kind_of(item)
            n += 1
        return rec

    with run_lock(out):
        rewrite_records(out, rescore_one)  # each results file atomically, a torn tail dropped
    return n
