"""Shared resources of a running server and the life of one run.

Models and retrievers are opened once; a full run counter answers 429 at once, never queues.  Runs happen
in worker threads and are stopped cooperatively (deadline or client gone); a slot is released only when its
thread has really finished.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sleuth.llm.base import LLM, LLMError
from sleuth.search.base import Filters, Retriever
from sleuth.strategies.base import Strategy
from sleuth.strategies.result import ERROR, Event, Result, Trace

from .audit import open_audit
from .guards import CANCELLED, TIMEOUT, GuardedLLM, GuardedRetriever, _Stop
from .principals import ANONYMOUS, OPEN, Principal
from .settings import ServerSettings
from .traces import open_trace_store

log = logging.getLogger("sleuth.server")

StrategyFactory = Callable[..., Strategy]


# -- one run ------------------------------------------------------------------------
@dataclass(eq=False)
class Job:
    trace_id: str
    question: str
    strategy: str
    filters: Filters
    owner: tuple[str, str]
    source: str | None
    model: str | None
    options: dict[str, Any]
    temperature: float | None
    seed: int | None
    stop: _Stop
    principal: Principal = OPEN
    #: the conversation's earlier turns ({role, content}); the question is made to stand alone from them
    history: list[dict[str, str]] = field(default_factory=list)
    endpoint: str = ""
    stream: bool = False
    events: list[Event] = field(default_factory=list)
    result: Result | None = None
    done: threading.Event = field(default_factory=threading.Event)
    _loop: asyncio.AbstractEventLoop | None = None
    _queue: asyncio.Queue[Event | None] | None = None

    def on_event(self, ev: Event) -> None:
        self.events.append(ev)
        if self._loop is not None and self._queue is not None and not self.stop.cancelled.is_set():
            with contextlib.suppress(RuntimeError):  # loop closed at shutdown
                self._loop.call_soon_threadsafe(self._queue.put_nowait, ev)

    def _finished(self) -> None:
        self.done.set()
        if self._loop is not None and self._queue is not None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._queue.put_nowait, None)

    def partial(self, reason: str, message: str) -> Result:
        """What is known of a run that did not finish in time."""
        r = Result(question=self.question, strategy=self.strategy, id=self.trace_id)
        r.finish_reason = reason
        r.error = message
        r.trace = Trace(list(self.events))
        r.model = self.model or ""
        return r


def owner_of(principal: Principal, filters: Filters) -> tuple[str, str]:
    """Who may read a run's trace: the same principal under the same effective scope."""
    return principal.id, filters.cache_key()


class Busy(Exception):
    def __init__(self, active: int, limit: int, retry_after: int) -> None:
        super().__init__(
            f"the server is busy: {active} runs in progress, the limit is {limit}; retry in {retry_after} s"
        )
        self.retry_after = retry_after


class Runtime:
    """Resources shared by every request of one app."""

    def __init__(
        self,
        settings: ServerSettings,
        *,
        llm: LLM | None = None,
        retrievers: Mapping[str, Retriever] | None = None,
        strategies: Mapping[str, StrategyFactory] | None = None,
    ) -> None:
        self.settings = settings
        self._llms: dict[str | None, LLM] = {}
        if llm is not None:
            self._llms[settings.model] = llm
        self._retrievers: dict[str, Retriever] = dict(retrievers or {})
        self._source_names = list(self._retrievers) + [n for n in settings.source_names if n not in self._retrievers]
        self._strategies = dict(strategies) if strategies is not None else None
        self._open_lock = threading.Lock()
        self._slots_lock = threading.Lock()
        self.active = 0
        self.errors: list[str] = []
        self.opened = False
        self.traces = open_trace_store(settings.trace_db, settings.trace_capacity, settings.trace_max_bytes)
        self.audit = open_audit(settings)
        self._durations: deque[float] = deque(maxlen=32)
        self._jobs: set[Job] = set()
        self.executor = ThreadPoolExecutor(settings.max_concurrency, thread_name_prefix="sleuth-run")

    # -- resources ------------------------------------------------------------------
    def open(self) -> None:
        """Open the default LLM and every source (idempotent; errors are kept for /healthz and raised)."""
        with self._open_lock:
            if self.opened:
                return
            errors: list[str] = []
            for name, spec in self.settings.sources:
                if name not in self._retrievers:
                    try:
                        self._retrievers[name] = self._open_source(spec)
                    except Exception as e:
                        errors.append(f"source {name!r} ({spec}): {e}")
            try:
                self._llm_locked(self.settings.model)
            except Exception as e:
                errors.append(f"model {self.settings.model or 'default'}: {e}")
            self.errors = errors
            self.opened = True
            if errors:
                raise RuntimeError("; ".join(errors))

    def _llm_locked(self, model: str | None) -> LLM:
        if model not in self._llms:
            from sleuth.llm import get_llm

            self._llms[model] = get_llm(model, base_url=self.settings.base_url or None)
        return self._llms[model]

    def llm(self, model: str | None) -> LLM:
        if model in self._llms:
            return self._llms[model]
        with self._open_lock:
            return self._llm_locked(model)

    @property
    def model_name(self) -> str:
        llm = self._llms.get(self.settings.model)
        return getattr(llm, "model", "") or self.settings.model or "default"

    def sources(self) -> list[str]:
        return list(self._source_names)

    def retriever(self, name: str | None) -> Retriever | None:
        if name is None:
            if not self._source_names:
                return None
            name = self._source_names[0]
        if name in self._retrievers:
            return self._retrievers[name]
        spec = dict(self.settings.sources).get(name)
        if spec is None:
            raise KeyError(name)
        with self._open_lock:
            if name not in self._retrievers:
                self._retrievers[name] = self._open_source(spec)
            return self._retrievers[name]

    def source_kind(self, name: str) -> str:
        """``index``, ``corpus`` or ``remote`` for a configured source; the class name of one the app was given."""
        spec = dict(self.settings.sources).get(name)
        if spec:
            return "index" if Path(spec).is_dir() else "corpus" if Path(spec).is_file() else "remote"
        return type(self._retrievers.get(name)).__name__

    def _open_source(self, spec: str) -> Retriever:
        """A configured source with the server's embedding and rerank settings (caller holds the open lock)."""
        from sleuth.search import open_retriever

        s = self.settings
        kw: dict[str, Any] = {"embed_model": s.embed_model, "embed_base_url": s.embed_base_url}
        if s.rerank is not None:
            kw["rerank"] = s.rerank
            if s.rerank == "llm":
                kw["llm"] = self._llm_locked(s.model)
            elif s.rerank != "none":
                from sleuth.search.remote import RerankServer

                kw["rerank"] = RerankServer.resolve(s.rerank, s.rerank_model)
        kw["rerank_depth"] = s.rerank_depth
        return open_retriever(spec, **kw)

    def strategy_factories(self) -> Mapping[str, StrategyFactory]:
        if self._strategies is None:
            from sleuth.strategies import STRATEGIES, get_strategy

            self._strategies = {
                name: (lambda llm, retriever=None, _n=name, **kw: get_strategy(_n, llm, retriever, **kw))
                for name in STRATEGIES
            }
            self._classes = dict(STRATEGIES) if isinstance(STRATEGIES, Mapping) else {}
        return self._strategies

    def strategy_class(self, name: str) -> type[Strategy] | None:
        """The class behind a built-in strategy (None for a factory the app was given)."""
        self.strategy_factories()
        return getattr(self, "_classes", {}).get(name)

    def strategy_info(self) -> list[dict[str, Any]]:
        out = []
        facts = self.strategy_factories()
        classes: Mapping[str, Any] = getattr(self, "_classes", {})
        for name, fac in facts.items():
            cls = classes.get(name, fac)
            doc = (getattr(cls, "description", "") or getattr(cls, "__doc__", "") or "").strip()
            out.append(
                {
                    "name": name,
                    "model": f"sleuth-{name}",
                    "description": doc.split("\n\n")[0].replace("\n", " ").strip(),
                    "needs_retriever": bool(getattr(cls, "needs_retriever", False)),
                }
            )
        return out

    # -- admission ---------------------------------------------------------------------
    def retry_after(self) -> int:
        if not self._durations:
            return 1
        avg = sum(self._durations) / len(self._durations)
        return max(1, min(60, math.ceil(avg / 2)))

    def acquire(self) -> None:
        with self._slots_lock:
            if self.active >= self.settings.max_concurrency:
                raise Busy(self.active, self.settings.max_concurrency, self.retry_after())
            self.active += 1

    def release(self) -> None:
        with self._slots_lock:
            self.active -= 1

    # -- runs ------------------------------------------------------------------------------
    def new_job(
        self,
        *,
        question: str,
        strategy: str,
        filters: Filters,
        principal: Principal,
        source: str | None,
        model: str | None,
        options: dict[str, Any],
        temperature: float | None = None,
        seed: int | None = None,
        history: list[dict[str, str]] | None = None,
    ) -> Job:
        return Job(
            trace_id=uuid.uuid4().hex,
            question=question,
            strategy=strategy,
            filters=filters,
            owner=owner_of(principal, filters),
            principal=principal,
            source=source,
            model=model if model is not None else self.settings.model,
            options={k: v for k, v in options.items() if v is not None},
            temperature=temperature,
            seed=seed,
            history=list(history or []),
            stop=_Stop(time.monotonic() + self.settings.timeout_s),
        )

    def start(self, job: Job, *, stream: bool) -> asyncio.Future[None]:
        """Start a run in a worker thread (the caller holds a slot; the thread gives it back)."""
        loop = asyncio.get_running_loop()
        job._loop = loop
        if stream:
            job._queue = asyncio.Queue()
        try:
            self._jobs.add(job)
            return loop.run_in_executor(self.executor, self._execute, job)
        except BaseException:
            self._jobs.discard(job)
            self.release()
            raise

    def _execute(self, job: Job) -> None:
        t0 = time.monotonic()
        try:
            job.result = self._run(job)
            if self.audit is not None:
                self.audit.run(principal=job.principal, scope=job.filters, job=job, result=job.result)
        finally:
            self._durations.append(time.monotonic() - t0)
            self._jobs.discard(job)
            self.release()
            job._finished()

    def _run(self, job: Job) -> Result:
        try:
            llm = GuardedLLM(self.llm(job.model), job.stop, temperature=job.temperature, seed=job.seed)
            retriever = self.retriever(job.source)
            guarded = GuardedRetriever(retriever, job.stop, job.filters) if retriever is not None else None
            strategy = self.strategy_factories()[job.strategy](llm, guarded, **job.options)
            more = {"history": job.history} if job.history else {}  # a factory without history still serves
            result = strategy.run(job.question, filters=job.filters, listeners=[job.on_event], **more)
        except LLMError as e:
            result = job.partial(e.reason if e.reason.startswith("llm_") else "llm_unavailable", str(e))
        except Exception as e:  # a bug or a broken backend: a finish reason, not a dead worker
            log.exception("run %s (%s) failed", job.trace_id, job.strategy)
            result = job.partial(ERROR, f"{type(e).__name__}: {e}")
        result.id = job.trace_id
        why = job.stop.reason()
        if why and (result.finish_reason.startswith("llm_") or result.finish_reason == "search_unavailable"):
            result.finish_reason = why
            result.error = self._stop_message(why)
        # defence in depth: nothing outside the request's scope leaves the server
        result.citations = [p for p in result.citations if job.filters.matches(p)]
        self.keep_trace(job, result)
        return result

    def keep_trace(self, job: Job, result: Result) -> None:
        """Store a run's trace for its owner, except an anonymous caller's: anonymous callers are
        one principal, so a stored trace would be readable by every other anonymous caller."""
        if job.principal.kind != ANONYMOUS:
            self.traces.put(job.trace_id, job.owner, result.to_dict())

    def _stop_message(self, why: str) -> str:
        if why == TIMEOUT:
            return f"the run went past the server's {self.settings.timeout_s:g} s timeout"
        return "the client went away"

    def give_up(self, job: Job, why: str) -> Result:
        """Stop waiting for a run: it is told to stop, and what it did so far is kept."""
        if why == CANCELLED:
            job.stop.cancelled.set()
        else:
            job.stop.deadline = min(job.stop.deadline, time.monotonic())
        if job.result is not None:
            return job.result
        r = job.partial(why, self._stop_message(why))
        self.keep_trace(job, r)
        return r

    def shutdown(self) -> None:
        for job in list(self._jobs):
            job.stop.cancelled.set()
        self.executor.shutdown(wait=False, cancel_futures=True)
        if self.audit is not None:
            self.audit.close()
        for llm in self._llms.values():
            close = getattr(llm, "close", None)
            if callable(close):
                with contextlib.suppress(Exception):
                    close()
