"""The executor seam: how (strategy, question) tasks are spread over workers.

An executor takes a picklable function and an iterable of picklable task
payloads and yields the function's results *as they finish* (any order).  The
runner stays the single writer: it consumes that stream and appends each
result to the JSONL, so a distributed executor only has to ship tasks out and
results back.

``local`` (a thread pool in this process) and ``dask`` (:mod:`sleuth.eval.cluster`, imported
on first use) are built in.  Others register a factory for a URL scheme with
``register_executor("ray", make_ray)`` so that ``--executor ray://...`` works; the factory
receives the full spec string and the requested concurrency.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, Protocol

Payload = dict[str, Any]
TaskFn = Callable[[Payload], dict[str, Any]]


class Executor(Protocol):
    name: str

    def map_unordered(self, fn: TaskFn, tasks: Iterable[Payload]) -> Iterator[dict[str, Any]]:
        """Run ``fn`` on every task; yield results as they complete."""
        ...

    def close(self) -> None: ...


class LocalExecutor:
    """Threads in this process; at most ``concurrency`` tasks in flight (bounded submission)."""

    def __init__(self, concurrency: int = 1) -> None:
        self.concurrency = max(1, int(concurrency))
        self.name = f"local[{self.concurrency}]"
        self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="sleuth-eval")
        self._stop = threading.Event()

    def map_unordered(self, fn: TaskFn, tasks: Iterable[Payload]) -> Iterator[dict[str, Any]]:
        it = iter(tasks)
        pending: set[Future[dict[str, Any]]] = set()

        def fill() -> None:
            while len(pending) < self.concurrency and not self._stop.is_set():
                try:
                    payload = next(it)
                except StopIteration:
                    return
                pending.add(self._pool.submit(fn, payload))

        try:
            fill()
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    pending.discard(fut)
                    result = fut.result()
                    fill()  # start the next task before the consumer scores/writes this one
                    yield result
                fill()
        finally:
            self._stop.set()
            for fut in pending:
                fut.cancel()

    def close(self) -> None:
        self._stop.set()
        self._pool.shutdown(wait=False, cancel_futures=True)


ExecutorFactory = Callable[[str, int], Executor]


def _dask(spec: str, concurrency: int) -> Executor:
    try:
        from sleuth.eval.cluster import DaskExecutor, parse_dask_spec
    except ImportError as e:
        raise ValueError(f"the dask executor needs an extra package ({e}); install sleuth[cluster]") from e
    return DaskExecutor(parse_dask_spec(spec), concurrency)


_FACTORIES: dict[str, ExecutorFactory] = {"local": lambda spec, conc: LocalExecutor(conc), "dask": _dask}


def register_executor(scheme: str, factory: ExecutorFactory) -> None:
    """Make ``--executor SCHEME[://...]`` available (e.g. ``ray``)."""
    _FACTORIES[scheme] = factory


def make_executor(spec: str | None, concurrency: int = 1) -> Executor:
    spec = (spec or "local").strip()
    scheme = spec.split("://", 1)[0].split(":", 1)[0]
    if scheme not in _FACTORIES:
        raise ValueError(f"unknown executor {spec!r}; available: {', '.join(sorted(_FACTORIES))}")
    return _FACTORIES[scheme](spec, concurrency)
