"""The worker side of a run: one (strategy, question) task in, one record out.

Tasks are plain dicts and :func:`run_task` is a module-level function, so a
distributed executor can run them in other processes: each process builds its
LLM, retrievers and strategies once from the task's ``config`` (see
:func:`worker_config`) and reuses them. :func:`make_record` then turns what a
worker sends back into the stored record (scores, question, timestamps); the
driver calls it, as the single writer of the results file.
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
from sleuth.eval.fingerprint import code_fingerprint
from sleuth.eval.metrics import Prices, score
from sleuth.eval.replay import Replay, passages_of
from sleuth.strategies.registry import build_strategy

SCHEMA = 1
OK, FAILED = "ok", "failed"
#: finish reasons that count as a completed run (anything else is a recorded failure)
COMPLETED_REASONS = ("finished", "step_limit", "repeat_limit")


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

    def strategy(self, name: str, item: Item, replay: Replay | None = None) -> Any:
        """The strategy ``name`` for ``item`` (shared across tasks on a pooled index); with ``replay``,
        a new one on the replay's model and searches, never shared."""
        retriever = self.plan.retriever_for(item)
        llm = self.llm
        if replay is not None:
            llm, retriever = replay.llm, replay.serve(passages_of(retriever) if retriever is not None else None)
        shared = not self.plan.per_item and replay is None
        if shared and name in self._strategies:
            return self._strategies[name]
        opts: dict[str, Any] = {"k": self.cfg.get("k", 5), **(self.cfg.get("strategy_options") or {})}
        for key in ("max_steps", "max_tokens"):
            if self.cfg.get(key) is not None:
                opts[key] = self.cfg[key]
        strat = build_strategy(name, llm, retriever, opts)
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


def worker_config(cfg: EvalConfig, plan: RetrievalPlan, code_lang: str | None) -> dict[str, Any]:
    """The ``config`` every task of a run carries: how a worker builds its LLM, retriever and strategies,
    and the language its records are fingerprinted in (the manifest's ``code_lang``; None: combined)."""
    return {
        "code_lang": code_lang,
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


def run_task(payload: Mapping[str, Any], *, replay: Replay | None = None) -> dict[str, Any]:
    """Run one (strategy, question) task; never raises: failures come back as records.

    With ``replay`` (:class:`sleuth.eval.replay.Replay`) no model runs: the task is served a
    stored record's replies and search results, and the new record's ``replay_parted`` says where
    the running code asked something the record does not answer ("" when it never did)."""
    item = Item.from_dict(payload["item"])
    name = payload["strategy"]
    t0 = time.perf_counter()
    rec: dict[str, Any] = {"strategy": name, "qid": item.id}
    try:
        rec["code"] = code_fingerprint(name, payload["config"].get("code_lang"))
    except Exception:  # provenance is best effort; it never costs the question
        rec["code"] = ""
    try:
        worker = _worker_for(payload["config"])
        strat = worker.strategy(name, item, replay)
        if replay is None and (payload["config"].get("llm_options") or {}).get("isolated"):
            worker.llm.reset_prompt_cache()  # this task starts from an empty KV cache
        result = strat.run(item.prompt(), filters=item.filters, history=item.history or None)
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
    if replay is not None:
        rec["replay_parted"] = replay.parting(rec)
    return rec


def make_record(
    rec: Mapping[str, Any], item: Item, meta: Mapping[str, Any], dataset: Dataset, prices: Prices
) -> dict[str, Any]:
    """The stored record of what :func:`run_task` sent back: scored, with the question and its answers."""
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
        **({"history": item.history} if item.history else {}),
        "answers": item.answers,
        "type": item.type,
        "kind": kind_of(item),
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


def kind_of(item: Item) -> str:
    """A coarse question kind for per-kind scores: HotpotQA bridge/comparison, MuSiQue n-hop, MMLU subject."""
    m = item.metadata
    if m.get("hop_type"):
        return str(m["hop_type"])
    if m.get("hops") and "parent" not in m:
        return f"{m['hops']}-hop"
    if m.get("subject"):
        return str(m["subject"])
    return ""
