"""Run strategies over a dataset, resumably: ``sleuth eval --data PATH ...``.

Flow: load and sample the dataset -> check/write ``run.json`` -> read what
``results.jsonl`` already holds -> prepare retrieval (the open-setting index is
built once and cached) -> ship the remaining (strategy, question) tasks to an
executor -> score each result as it streams back and append it (single writer,
fsync per line) -> write the report.

Tasks are plain dicts and :func:`run_task` is a module-level function, so a
distributed executor can run them in other processes: each process builds its
LLM, retrievers and strategies once from the task's ``config`` and reuses them.
"""

from __future__ import annotations

import json
import shlex
import sys
import threading
import time
import traceback
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sleuth.eval.corpus import RetrievalPlan, plan_retrieval
from sleuth.eval.datasets import Dataset, Item, load_dataset
from sleuth.eval.executors import make_executor
from sleuth.eval.fingerprint import code_fingerprint
from sleuth.eval.gap import question_of, sub_items
from sleuth.eval.metrics import Prices, score
from sleuth.eval.store import (
    MANIFEST,
    RESULTS,
    ResultsWriter,
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
from sleuth.llm.models import file_sha256
from sleuth.strategies.registry import build_strategy, check_run_options, resolve_name, resolve_strategy_class

SCHEMA = 1
OK, FAILED = "ok", "failed"
#: finish reasons that count as a completed run (anything else is a recorded failure)
COMPLETED_REASONS = ("finished", "step_limit")
SETTINGS = ("open", "distractor", "closed")
#: why a stored record is stale (see :func:`stale_reason`)
OTHER_CODE, REWORDED = "made by other code", "asked a differently worded question"


@dataclass
class EvalConfig:
    """Everything that defines a run; ``settings()`` is what a resume must match."""

    data: str
    out: str
    format: str | None = None
    setting: str | None = None  # open | distractor | closed (None: open when a corpus exists)
    strategies: list[str] = field(default_factory=lambda: ["direct"])
    limit: int | None = None
    seed: int | None = 0
    k: int = 5
    max_steps: int | None = None
    max_tokens: int | None = None
    model: str | None = None
    base_url: str | None = None
    index: str | None = None  # an existing index dir / retriever spec for the open setting
    corpus: str | None = None  # a corpus file to pool instead of the dataset's own paragraphs
    gap: bool = False  # also run every decomposition hop (compositionality gap)
    strategy_options: dict[str, Any] = field(default_factory=dict)
    prices: str | None = None
    concurrency: int = 1
    executor: str = "local"
    retry_failed: bool = False
    redo_stale: bool = False  # rerun stale records: other code (sleuth.eval.fingerprint) or reworded question
    # wipe the embedded server's KV cache before each task, so an answer does not depend on
    # the tasks before it (None: yes when one task runs at a time; see isolated_tasks())
    isolate: bool | None = None
    llm_cache: bool = True  # Sleuth's response cache (a rerun then costs no model time)
    # a sitting: once this many seconds have passed, start no new question (a composed question
    # and its hops count as one) and stop when the started one is written; the same command resumes
    time_limit: float | None = None
    command: str = ""

    def isolated_tasks(self) -> bool:
        """Whether tasks are isolated: only possible one at a time (concurrent tasks share slots)."""
        return self.concurrency == 1 and (self.isolate if self.isolate is not None else True)

    def settings(self, dataset: Dataset, plan: RetrievalPlan) -> dict[str, Any]:
        return {
            "format": dataset.format,
            "setting": plan.setting,
            "strategies": list(self.strategies),
            "limit": self.limit,
            "seed": self.seed,
            "k": self.k,
            "max_steps": self.max_steps,
            "max_tokens": self.max_tokens,
            "model": self.model or "default",
            "index": plan.describe(),
            "gap": self.gap,
            "strategy_options": dict(sorted(self.strategy_options.items())),
        }


class EvalError(ValueError):
    """A mistake in the run's arguments (the CLI turns it into a UserError)."""


# --------------------------------------------------------------------------- worker side
class _LazyLLM:
    """Creates the real LLM (e.g. starts the embedded server) only when a strategy first uses it."""

    def __init__(self, model: str | None, base_url: str | None, options: Mapping[str, Any] | None = None) -> None:
        self._model, self._base_url = model, base_url
        self._options = dict(options or {})
        self._llm: Any = None
        self._lock = threading.Lock()

    def _get(self) -> Any:
        with self._lock:
            if self._llm is None:
                from sleuth.llm import get_llm

                kw = dict(self._options)
                if self._base_url:
                    kw["base_url"] = self._base_url
                self._llm = get_llm(self._model, **kw)
            return self._llm

    @property
    def model(self) -> str:
        return self._llm.model if self._llm is not None else (self._model or "")

    def reset_prompt_cache(self) -> bool:
        """Wipe the server's KV cache if the LLM exists and can (a model not started yet has none)."""
        with self._lock:
            llm = self._llm
        reset = getattr(llm, "reset_prompt_cache", None) if llm is not None else None
        return bool(reset()) if reset is not None else False

    def complete(self, prompt: str, params: Any = None, *, on_delta: Any = None) -> Any:
        return self._get().complete(prompt, params, on_delta=on_delta)

    def chat(self, messages: Any, params: Any = None, *, on_delta: Any = None) -> Any:
        return self._get().chat(messages, params, on_delta=on_delta)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # private/dunder lookups never start a model
            raise AttributeError(name)
        return getattr(self._get(), name)


class _Worker:
    """Per-process state: one LLM, one open-setting retriever, strategy instances."""

    def __init__(self, cfg: Mapping[str, Any]) -> None:
        self.cfg = cfg
        self.llm = _LazyLLM(cfg.get("model"), cfg.get("base_url"), cfg.get("llm_options"))
        self.plan = RetrievalPlan.from_dict(cfg["retrieval"])
        self._strategies: dict[str, Any] = {}
        self._lock = threading.Lock()

    def strategy(self, name: str, item: Item) -> Any:
        retriever = self.plan.retriever_for(item)
        shared = not self.plan.per_item
        if shared and name in self._strategies:
            return self._strategies[name]
        opts: dict[str, Any] = {"k": self.cfg.get("k", 5), **(self.cfg.get("strategy_options") or {})}
        for key in ("max_steps", "max_tokens"):
            if self.cfg.get(key) is not None:
                opts[key] = self.cfg[key]
        strat = build_strategy(name, self.llm, retriever, opts)
        if shared:
            with self._lock:
                strat = self._strategies.setdefault(name, strat)
        return strat


_WORKERS: dict[str, _Worker] = {}
_WORKERS_LOCK = threading.Lock()


def _worker_for(cfg: Mapping[str, Any]) -> _Worker:
    key = json.dumps(cfg, sort_keys=True, default=str)
    with _WORKERS_LOCK:
        w = _WORKERS.get(key)
        if w is None:
            w = _WORKERS[key] = _Worker(cfg)
        return w


def run_task(payload: Mapping[str, Any]) -> dict[str, Any]:
    """Run one (strategy, question) task; never raises: failures come back as records."""
    item = Item.from_dict(payload["item"])
    name = payload["strategy"]
    t0 = time.perf_counter()
    rec: dict[str, Any] = {"strategy": name, "qid": item.id}
    try:
        rec["code"] = code_fingerprint(name)
    except Exception:  # provenance is best effort; it never costs the question
        rec["code"] = ""
    try:
        worker = _worker_for(payload["config"])
        strat = worker.strategy(name, item)
        if (payload["config"].get("llm_options") or {}).get("isolated"):
            worker.llm.reset_prompt_cache()  # this task starts from an empty KV cache
        result = strat.run(item.prompt(), filters=item.filters)
        rd = result.to_dict()
        rd["strategy"] = name
        rec["result"] = rd
        reason = rd.get("finish_reason", "")
        rec["status"] = OK if reason in COMPLETED_REASONS else FAILED
        rec["reason"] = reason
        rec["error"] = rd.get("error", "")
    except Exception as e:  # one question's failure never stops the run
        from sleuth.strategies.base import BadQuestion

        rec["result"] = None
        rec["status"] = FAILED
        rec["reason"] = "bad_input" if isinstance(e, BadQuestion) else "error"
        rec["error"] = f"{type(e).__name__}: {e}"
        rec["traceback"] = traceback.format_exc(limit=6)[-4000:]
    rec["wall_s"] = round(time.perf_counter() - t0, 4)
    return rec


# --------------------------------------------------------------------------- driver side
def build_tasks(dataset: Dataset, strategies: Sequence[str], gap: bool) -> list[tuple[str, Item, dict[str, Any]]]:
    """Question-major order, so a partial run covers every strategy on the first questions."""
    tasks = []
    for item in dataset.items:
        units = [(item, {"kind": "main"})]
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

    def tasks(self, todo: Sequence[tuple[str, Item, dict[str, Any]]]) -> Iterator[tuple[str, Item, dict[str, Any]]]:
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


class _Running:
    """Running means of each strategy's primary score (for the progress bar)."""

    def __init__(self) -> None:
        self.sum: dict[str, float] = defaultdict(float)
        self.n: dict[str, int] = defaultdict(int)
        self.failed = 0

    def add(self, rec: Mapping[str, Any]) -> None:
        if not is_composed(rec):
            return
        self.sum[rec["strategy"]] += primary_score(rec)
        self.n[rec["strategy"]] += 1

    def line(self, order: Sequence[str]) -> str:
        parts = [f"{s} {self.sum[s] / self.n[s]:.2f}" for s in order if self.n.get(s)]
        return " | ".join(parts)

    def table(self) -> dict[str, dict[str, float]]:
        return {s: {"n": self.n[s], "score": self.sum[s] / self.n[s]} for s in self.n if self.n[s]}


def _validate(cfg: EvalConfig) -> None:
    if not cfg.strategies:
        raise EvalError("give at least one strategy with --strategies")
    if cfg.limit is not None and cfg.limit < 1:
        raise EvalError("--limit must be at least 1")
    if cfg.concurrency < 1:
        raise EvalError("--concurrency must be at least 1")
    if cfg.k < 1:
        raise EvalError("--k must be at least 1")
    if cfg.time_limit is not None and not cfg.time_limit > 0:
        raise EvalError("--time-limit must be a positive duration")
    if cfg.setting is not None and cfg.setting not in SETTINGS:
        raise EvalError(f"--setting must be one of {', '.join(SETTINGS)}")
    try:
        names = [s if resolve_strategy_class(s) else resolve_name(s) for s in cfg.strategies]
        given = {"max_steps": cfg.max_steps, "max_tokens": cfg.max_tokens}
        opts = {"k": cfg.k, **cfg.strategy_options, **{k: v for k, v in given.items() if v is not None}}
        check_run_options(names, opts)  # as the workers will build them: refused before anything runs
    except ValueError as e:  # an unknown strategy or option, a bad option value
        raise EvalError(str(e)) from e
    if len(set(names)) != len(names):
        raise EvalError("a strategy is listed twice in --strategies")
    cfg.strategies = names


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
    _validate(cfg)
    try:
        prices = Prices.parse(cfg.prices)
    except ValueError as e:
        raise EvalError(str(e)) from e
    dataset = load_dataset(cfg.data, cfg.format, cfg.corpus).sample(cfg.limit, cfg.seed)
    if cfg.gap and not any(sub_items(it) for it in dataset.items):
        raise EvalError(f"--gap needs decompositions with gold answers (MuSiQue); {dataset.name} has none")
    plan = plan_retrieval(dataset, cfg.setting, index=cfg.index)
    out = Path(cfg.out)
    if out.exists() and not out.is_dir():
        raise EvalError(f"--out {out} is a file, not a directory")
    out.mkdir(parents=True, exist_ok=True)

    manifest = {
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
    with run_lock(out):
        old = read_manifest(out)
        if old is not None:
            check_manifest(old, manifest, out)
            manifest = {**old, "resumed": [*old.get("resumed", []), manifest["created"]]}
        elif has_results(out):
            raise EvalError(f"{out} holds results but no {MANIFEST}; choose another --out directory")

        tasks = build_tasks(dataset, cfg.strategies, cfg.gap)
        manifest["tasks"] = len(tasks)  # the report's progress line and comparable set read these two
        if cfg.gap:
            manifest["hops"] = {it.id: len(sub_items(it)) for it in dataset.items}
        existing = read_records(out / RESULTS)
        code = code_fingerprints(cfg.strategies)
        manifest["code"] = code
        items_by_id = {t[1].id: (t[1], t[2]) for t in tasks}
        # stale: made by other code, or asked a question worded differently from what this
        # code asks for that id (e.g. a changed sub-question rendering); the code fingerprint
        # covers strategies, search and llm, the question text covers the dataset side
        reasons = [stale_reason(r, code, items_by_id) for r in existing]
        other_code = [r for r, why in zip(existing, reasons, strict=True) if why == OTHER_CODE]
        reworded = [r for r, why in zip(existing, reasons, strict=True) if why == REWORDED]
        stale = other_code + reworded
        if stale and console is not None:
            why = [
                f"{len(other_code)} {OTHER_CODE} ({_stale_text(other_code)})" if other_code else "",
                f"{len(reworded)} {REWORDED} ({_stale_text(reworded)})" if reworded else "",
            ]
            console.print(
                f"[yellow]{len(stale)} of {len(existing)} records in {out} are stale: "
                + "; ".join(w for w in why if w)
                + "; "
                + ("they are run again.[/]" if cfg.redo_stale else "they are kept: --redo-stale runs them again.[/]")
            )
        stale_keys = {(r["strategy"], r["qid"]) for r in stale} if cfg.redo_stale else set()
        running = _Running()
        done: set[tuple[str, str]] = set()
        for rec in existing:
            if cfg.retry_failed and rec.get("status") == FAILED:
                continue
            if (rec["strategy"], rec["qid"]) in stale_keys:
                continue
            done.add((rec["strategy"], rec["qid"]))
            running.add(rec)
            running.failed += rec.get("status") == FAILED
        todo = [t for t in tasks if (t[0], t[1].id) not in done]

        # the open index is built once here (cached), before any worker needs it
        plan.prepare(console=console if progress else None)
        manifest["index"] = plan.manifest()
        write_manifest(out, manifest)

        worker_cfg = worker_config(cfg, plan)
        sitting = Sitting(cfg.time_limit, started)
        payloads = ({"strategy": s, "item": it.to_dict(), "config": worker_cfg} for s, it, _ in sitting.tasks(todo))

        t0 = time.perf_counter()
        ran = failed = 0
        executor = make_executor(cfg.executor, cfg.concurrency)

        def notice(msg: str) -> None:
            if console is not None:
                console.print(f"[yellow]warning: {msg}[/]")

        bar = _progress(progress, console, len(tasks), len(tasks) - len(todo))
        try:
            with ResultsWriter(out / RESULTS, on_notice=notice) as writer, bar as pb:
                task_id = pb.add_task(
                    "eval", total=len(tasks), completed=len(tasks) - len(todo), scores=running.line(cfg.strategies)
                )
                for rec in executor.map_unordered(run_task, payloads):
                    item, meta = items_by_id[rec["qid"]]
                    rec = _finalise(rec, item, meta, dataset, prices)
                    writer.write(rec)
                    ran += 1
                    failed += rec["status"] == FAILED
                    running.add(rec)
                    if rec["status"] == FAILED:
                        running.failed += 1
                    pb.update(task_id, advance=1, scores=_bar_text(running, cfg.strategies))
                    if on_record is not None:
                        on_record(rec)
        finally:
            executor.close()
        summary = RunSummary(
            out,
            len(tasks),
            len(tasks) - len(todo),
            ran,
            failed,
            round(time.perf_counter() - t0, 3),
            running.table(),
            stopped_before=sitting.stopped_before,
        )
        if write_report:
            from sleuth.eval.report import write_report as _write_report

            _write_report(out)
        return summary


def worker_config(cfg: EvalConfig, plan: RetrievalPlan) -> dict[str, Any]:
    """The ``config`` every task of a run carries: how a worker builds its LLM, retriever and strategies."""
    return {
        "model": cfg.model,
        "base_url": cfg.base_url,
        "k": cfg.k,
        "max_steps": cfg.max_steps,
        "max_tokens": cfg.max_tokens,
        "strategy_options": cfg.strategy_options,
        # parallel slots of the embedded server follow the concurrency
        "llm_options": {"cache": cfg.llm_cache, "n_parallel": cfg.concurrency, "isolated": cfg.isolated_tasks()},
        "retrieval": plan.to_dict(),
    }


def code_fingerprints(strategies: Sequence[str]) -> dict[str, str]:
    """The running code's fingerprint for each strategy of the run."""
    try:
        return {s: code_fingerprint(s) for s in strategies}
    except Exception as e:  # an unknown name fails later, per question, with its own message
        raise EvalError(f"cannot fingerprint the strategies' code: {e}") from e


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


def _stale_text(stale: Sequence[Mapping[str, Any]]) -> str:
    by = Counter(r["strategy"] for r in stale)
    return ", ".join(f"{s}: {n}" for s, n in sorted(by.items()))


def _bar_text(running: _Running, order: Sequence[str]) -> str:
    txt = running.line(order)
    return f"{txt}  failed {running.failed}" if running.failed else txt


def _finalise(
    rec: dict[str, Any], item: Item, meta: Mapping[str, Any], dataset: Dataset, prices: Prices
) -> dict[str, Any]:
    result = rec.get("result") or {}
    ordered = {
        "v": SCHEMA,
        "strategy": rec["strategy"],
        "qid": rec["qid"],
        "task": dict(meta),
        "dataset": dataset.name,
        "status": rec["status"],
        "reason": rec.get("reason", ""),
        "error": rec.get("error", ""),
        "question": item.prompt(),
        "answers": item.answers,
        "type": item.type,
        "kind": _kind(item),
        "answer": result.get("answer", ""),
        "short_answer": result.get("short_answer", ""),
        "scores": score(item, result, prices),
        "wall_s": rec.get("wall_s", 0.0),
        "code": rec.get("code", ""),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "result": rec.get("result"),
    }
    if rec.get("traceback"):
        ordered["traceback"] = rec["traceback"]
    return ordered


def _kind(item: Item) -> str:
    """A coarse question kind for per-kind scores: HotpotQA bridge/comparison, MuSiQue n-hop, MMLU subject."""
    m = item.metadata
    if m.get("hop_type"):
        return str(m["hop_type"])
    if m.get("hops") and "parent" not in m:
        return f"{m['hops']}-hop"
    if m.get("subject"):
        return str(m["subject"])
    return ""


class _NoBar:
    def __enter__(self) -> _NoBar:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def add_task(self, *a: Any, **kw: Any) -> int:
        return 0

    def update(self, *a: Any, **kw: Any) -> None:
        return None


def _progress(enabled: bool, console: Any, total: int, done: int) -> Any:
    if not enabled:
        return _NoBar()
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(
        TextColumn("[bold]eval"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[scores]}"),
        console=console,
        transient=False,
    )


def rescore_run(out: str | Path) -> int:
    """Recompute every record's ``scores`` (after a metrics change) without running anything.

    Reads the questions file named in ``run.json`` (its sha256 must still match), rewrites
    the results files atomically under the run lock and returns the number of records rescored.
    """
    out = Path(out)
    manifest = read_manifest(out)
    if manifest is None:
        raise EvalError(f"{out} has no {MANIFEST}; cannot tell which data to score against")
    data = manifest.get("data") or {}
    path = Path(str(data.get("path", "")))
    if not path.is_file():
        raise EvalError(f"the data file {path} named in {out / MANIFEST} is missing")
    if file_sha256(path) != data.get("sha256"):
        raise EvalError(f"{path} changed since the run; rescoring against it would be wrong")
    settings = manifest.get("settings") or {}
    dataset = load_dataset(path, settings.get("format"))
    items: dict[str, Item] = {}
    for it in dataset.items:
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
            rec["kind"] = _kind(item)
            n += 1
        return rec

    with run_lock(out):
        rewrite_records(out, rescore_one)  # each results file atomically, a torn tail dropped
    return n
