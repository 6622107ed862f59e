"""The worker side of a run: one (strategy, question) task in, one record out.

Tasks are picklable dicts and :func:`run_task` a module-level function, so a distributed executor can
run them in other processes: each builds its LLM, retrievers and strategies once from the task's
``config`` (:func:`worker_config`). The driver, the single writer, makes the stored record
(:func:`make_record`: scores, question, timestamps) of what a worker sends back.
"""

from __future__ import annotations

import json
import threading
import time
import traceback
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from sleuth.eval.config import EvalConfig
from sleuth.eval.corpus import RetrievalPlan
from sleuth.eval.datasets import Dataset, Item
from sleuth.eval.metrics import Prices, score
from sleuth.strategies.registry import build_strategy
from sleuth.strategies.text import clip

SCHEMA = 1
OK, FAILED = "ok", "failed"
#: finish reasons that count as a completed run (anything else is a recorded failure)
COMPLETED_REASONS = ("finished", "step_limit", "repeat_limit")


class _LazyLLM:
    """Creates the real LLM (e.g. starts the embedded server) only when a strategy first uses it."""

    def __init__(self, model: str | None, base_url: str | None, options: Mapping[str, Any] | None = None) -> None:
        self._model = model
        self._kw = {**(options or {}), **({"base_url": base_url} if base_url else {})}
        self._llm: Any = None
        self._lock = threading.Lock()

    def _get(self) -> Any:
        with self._lock:
            if self._llm is None:
                from sleuth.llm import get_llm

                self._llm = get_llm(self._model, **self._kw)
            return self._llm

    @property
    def model(self) -> str:
        return self._llm.model if self._llm is not None else (self._model or "")

    def reset_prompt_cache(self) -> bool:
        """Wipe the server's KV cache if the LLM exists and can (a model not started yet has none)."""
        with self._lock:
            reset = getattr(self._llm, "reset_prompt_cache", None)
        return bool(reset()) if reset is not None else False

    def __getattr__(self, name: str) -> Any:  # complete, chat, ...: the real LLM's, started on first use
        if name.startswith("_"):  # private/dunder lookups never start a model
            raise AttributeError(name)
        return getattr(self._get(), name)


class _Worker:
    """Per-process state: one LLM, one open-setting retriever, strategy instances."""

    def __init__(self, cfg: Mapping[str, Any]) -> None:
        self.cfg = cfg
        self.llm = _LazyLLM(cfg.get("model"), cfg.get("base_url"), cfg.get("llm_options"))
        self.plan: RetrievalPlan = cfg["retrieval"]
        self._strategies: dict[str, Any] = {}
        self._lock = threading.Lock()

    def strategy(self, name: str, item: Item) -> Any:
        """The strategy ``name`` for ``item`` (shared across tasks on a pooled index)."""
        retriever = self.plan.retriever_for(item)
        shared = self.plan.setting != "distractor"  # one index for every question
        if shared and name in self._strategies:
            return self._strategies[name]
        strat = build_strategy(name, self.llm, retriever, self.cfg["options"])
        if shared:
            with self._lock:
                strat = self._strategies.setdefault(name, strat)
        return strat


_WORKERS: dict[str, _Worker] = {}
_WORKERS_LOCK = threading.Lock()


def _worker_for(cfg: Mapping[str, Any]) -> _Worker:
    key = json.dumps(cfg, sort_keys=True, default=str)
    with _WORKERS_LOCK:
        if key not in _WORKERS:
            _WORKERS[key] = _Worker(cfg)
        return _WORKERS[key]


def worker_config(cfg: EvalConfig, plan: RetrievalPlan) -> dict[str, Any]:
    """The ``config`` every task of a run carries: how a worker builds its LLM, retriever and strategies."""
    return {
        "model": cfg.model,
        "base_url": cfg.base_url,
        "options": cfg.run_options(),
        # parallel slots of the embedded server follow the concurrency
        "llm_options": {"cache": cfg.llm_cache, "n_parallel": cfg.concurrency, "isolated": cfg.isolated_tasks()},
        "retrieval": plan,  # prepared: its index built, no records left to ship
    }


def run_task(payload: Mapping[str, Any]) -> dict[str, Any]:
    """Run one (strategy, question) task; never raises: failures come back as records."""
    item: Item = payload["item"]
    name = payload["strategy"]
    t0 = time.perf_counter()
    rec: dict[str, Any] = {"strategy": name, "qid": item.id}
    try:
        worker = _worker_for(payload["config"])
        strat = worker.strategy(name, item)
        if (payload["config"].get("llm_options") or {}).get("isolated"):
            worker.llm.reset_prompt_cache()  # this task starts from an empty KV cache
        result = strat.run(item.prompt(), filters=item.filters, history=item.history or None)
        rd = {**result.to_dict(), "strategy": name}
        reason = rd.get("finish_reason", "")
        status = OK if reason in COMPLETED_REASONS else FAILED
        rec.update(result=rd, status=status, reason=reason, error=rd.get("error", ""))
    except Exception as e:  # one question's failure never stops the run
        from sleuth.strategies.base import BadQuestion

        reason = "bad_input" if isinstance(e, BadQuestion) else "error"
        rec.update(result=None, status=FAILED, reason=reason, error=f"{type(e).__name__}: {e}")
        rec["traceback"] = traceback.format_exc(limit=6)[-4000:]
    rec["wall_s"] = round(time.perf_counter() - t0, 4)
    return rec


def make_record(
    rec: Mapping[str, Any],
    item: Item,
    meta: Mapping[str, Any],
    dataset: Dataset,
    prices: Prices,
    commit: str,
    old: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The stored record of what :func:`run_task` sent back: scored, with the question and its answers,
    naming ``commit`` as the code that made it. ``old``: the record a re-run makes again; when every
    model call of the new run came from the response cache and it took the old one's steps, answer and
    finish, the old one's result and seconds are kept (a cached call's seconds are no timing) and
    ``cached`` marks it."""
    if old is not None and same_from_cache(old.get("result"), rec.get("result")):
        rec = {**rec, "result": old["result"], "wall_s": old.get("wall_s", 0.0), "cached": True}
    result = rec.get("result") or {}
    return {
        "v": SCHEMA,
        "strategy": rec["strategy"],
        "qid": rec["qid"],
        "task": dict(meta),
        "dataset": dataset.name,
        "status": rec["status"],
        "reason": rec.get("reason", ""),
        "error": rec.get("error", ""),
        "question": item.prompt(),
        **({"history": item.history} if item.history else {}),
        "answers": item.answers,
        "type": item.type,
        "kind": kind_of(item),
        "answer": result.get("answer", ""),
        "short_answer": result.get("short_answer", ""),
        "scores": score(item, result, prices),
        "wall_s": rec.get("wall_s", 0.0),
        "commit": commit,
        "finished_at": now(),
        "result": rec.get("result"),
        **{k: rec[k] for k in ("cached", "traceback") if rec.get(k)},
    }


def same_from_cache(then: Mapping[str, Any] | None, fresh: Mapping[str, Any] | None) -> bool:
    """Whether ``fresh`` made every model call from the response cache and took ``then``'s steps to its answer."""
    llm = [ev for ev in (fresh or {}).get("trace") or [] if ev.get("kind") == "llm"]
    cached = bool(llm) and all((ev.get("data") or {}).get("from_cache") for ev in llm)
    return then is not None and fresh is not None and cached and first_difference(then, fresh)[0] == ""


def steps_of(result: Mapping[str, Any] | None) -> list[tuple[str, Any]]:
    """The comparable steps of a result's trace: LLM completions and searches, in order."""
    steps: list[tuple[str, Any]] = []
    for ev in (result or {}).get("trace") or []:
        d = ev.get("data") or {}
        if ev.get("kind") == "llm":
            steps.append(("llm", (d.get("step", ""), d.get("completion", ""))))
        elif ev.get("kind") == "search":
            steps.append(("search", (d.get("query", ""), [p.get("id") for p in d.get("passages") or []])))
    return steps


def first_difference(then: Mapping[str, Any] | None, fresh: Mapping[str, Any] | None) -> tuple[str, int]:
    """The first way ``fresh`` differs from ``then`` ("" when none) and how many steps were compared."""
    a, b = steps_of(then), steps_of(fresh)
    for n, (x, y) in enumerate(zip(a, b, strict=False), 1):
        if x == y:
            continue
        if x[0] != y[0]:
            return f"step {n}: then {x[0]}, now {y[0]}", n
        if x[0] == "llm":
            label = f"LLM call at step {n} ({x[1][0] or 'unnamed'})"
            if x[1][0] != y[1][0]:
                return f"{label}: then step {x[1][0]!r}, now {y[1][0]!r}", n
            return f"{label}: then {clip(x[1][1], 90)!r}, now {clip(y[1][1], 90)!r}", n
        if x[1][0] != y[1][0]:
            return f"search at step {n}: then {clip(x[1][0], 90)!r}, now {clip(y[1][0], 90)!r}", n
        return f"search at step {n} ({clip(x[1][0], 60)!r}): other passages {x[1][1]} then, {y[1][1]} now", n
    if len(a) != len(b):
        return f"then {len(a)} steps, now {len(b)}", min(len(a), len(b))
    ta, tb = then or {}, fresh or {}
    for key in ("answer", "short_answer", "finish_reason"):
        if ta.get(key) != tb.get(key):
            return f"{key}: then {clip(ta.get(key), 90)!r}, now {clip(tb.get(key), 90)!r}", len(a)
    return "", len(a)


def now() -> str:
    """Now, in microseconds (a re-run can start in the second its run ended)."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


def kind_of(item: Item) -> str:
    """A coarse question kind for per-kind scores: HotpotQA bridge/comparison, MuSiQue n-hop, MMLU subject,
    policy yes/no, out-of-scope or lookup."""
    m = item.metadata
    if m.get("policy"):
        return "yes/no" if m.get("conclusion") else ("lookup" if item.answerable else "out of scope")
    if m.get("hop_type"):
        return str(m["hop_type"])
    if m.get("hops") and "parent" not in m:
        return f"{m['hops']}-hop"
    if m.get("subject"):
        return str(m["subject"])
    return ""
