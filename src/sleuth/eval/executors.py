"""How (strategy, question) tasks are spread over workers: ``--executor local`` or ``dask[://ADDRESS]``
(docs/scale-out.md). An executor yields results as they finish with at most ``concurrency`` tasks in
flight; the runner stays the single writer. Both built-in ones are a ``concurrent.futures`` executor
under :class:`PoolExecutor`: a thread pool, or a Dask client's (``dask``: a ``LocalCluster`` on
127.0.0.1 only with ``$SLEUTH_DASK_WORKERS`` worker processes; ``dask://HOST:PORT``: a running
scheduler). ``register_executor("ray", factory)`` adds a scheme (the factory gets the spec and the concurrency).
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from concurrent.futures import Executor as FuturesExecutor
from itertools import islice
from typing import Any, Protocol

from sleuth.config import settings

Payload = dict[str, Any]
TaskFn = Callable[[Payload], dict[str, Any]]
LOCAL = "local"


class Executor(Protocol):
    def map_unordered(self, fn: TaskFn, tasks: Iterable[Payload]) -> Iterator[dict[str, Any]]: ...

    def close(self) -> None: ...


class PoolExecutor:
    """A ``concurrent.futures`` executor with at most ``concurrency`` tasks in flight."""

    def __init__(self, pool: FuturesExecutor, concurrency: int) -> None:
        self.pool, self.concurrency = pool, max(1, int(concurrency))
        self._stopped = False

    def map_unordered(self, fn: TaskFn, tasks: Iterable[Payload]) -> Iterator[dict[str, Any]]:
        """Yield each result as it completes; the next task is submitted before a result is handed
        to the caller, so the workers stay busy while the driver scores and writes."""
        it = iter(tasks)
        pending: set[Future[dict[str, Any]]] = set()

        def fill() -> None:
            for payload in islice(it, 0 if self._stopped else self.concurrency - len(pending)):
                pending.add(self.pool.submit(fn, payload))

        try:
            fill()
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    pending.discard(fut)
                    result = fut.result()
                    fill()
                    yield result
        finally:  # an interrupted run resumes from the JSONL
            for fut in pending:
                fut.cancel()

    def close(self) -> None:
        self._stopped = True
        self.pool.shutdown(wait=False)  # what is in flight was cancelled above


class DaskExecutor(PoolExecutor):
    """Tasks on a Dask cluster: ``address`` is :data:`LOCAL` (a loopback ``LocalCluster`` sized for
    ``concurrency``: ``ceil(concurrency / workers)`` threads per worker process) or a scheduler's."""

    def __init__(self, address: str = LOCAL, concurrency: int = 1, *, start_timeout: float = 120.0) -> None:
        try:
            from distributed import Client, LocalCluster
        except ImportError as e:  # pragma: no cover - depends on the install
            raise ValueError("the dask executor needs dask[distributed]: pip install 'sleuth[cluster]'") from e
        self.cluster: Any = None
        concurrency = max(1, int(concurrency))
        if address == LOCAL:
            workers = max(1, min(settings.dask_workers() or min(2, os.cpu_count() or 1), concurrency))
            threads = -(-concurrency // workers)
            with warnings.catch_warnings():  # the scheduler's HTTP endpoint moves when 8787 is taken
                warnings.filterwarnings("ignore", message="Port .* is already in use")
                self.cluster = LocalCluster(
                    n_workers=workers,
                    threads_per_worker=threads,
                    host="127.0.0.1",  # scheduler, nannies, workers and HTTP endpoints: loopback only
                    dashboard_address=None,
                    protocol="tcp",
                    silence_logs=logging.WARNING,
                )
        try:
            where = address if self.cluster is None else self.cluster
            self.client = Client(where, set_as_default=False, timeout=start_timeout)
        except BaseException as e:
            self._close_cluster()
            if isinstance(e, OSError):
                raise ValueError(f"cannot reach the Dask scheduler at {address}: {e}") from e
            raise
        # pure=False: the same payload run twice (a retry) must really run twice
        super().__init__(self.client.get_executor(pure=False), concurrency)

    def _close_cluster(self) -> None:
        if self.cluster is not None:
            self.cluster.close()

    def close(self) -> None:
        if self._stopped:
            return
        super().close()
        try:
            self.client.close()
        finally:
            self._close_cluster()


def parse_dask_spec(spec: str) -> str:
    """``dask`` / ``dask://local`` -> ``"local"``; ``dask://HOST:PORT`` -> ``tcp://HOST:PORT``."""
    spec = spec.strip()
    if spec in ("dask", "dask://", "dask:", "dask://" + LOCAL):
        return LOCAL
    if not spec.startswith("dask://"):
        raise ValueError(f"a Dask executor spec looks like dask, dask://local or dask://HOST:PORT, not {spec!r}")
    rest = spec[len("dask://") :].rstrip("/")
    if "://" in rest:  # dask://tcp://host:port, dask://tls://host:port
        return rest
    if ":" not in rest:
        raise ValueError(f"{spec!r} has no port; the scheduler listens on dask://HOST:8786 by default")
    return "tcp://" + rest


ExecutorFactory = Callable[[str, int], Executor]
_FACTORIES: dict[str, ExecutorFactory] = {
    "local": lambda spec, n: PoolExecutor(ThreadPoolExecutor(max(1, n), "sleuth-eval"), n),
    "dask": lambda spec, n: DaskExecutor(parse_dask_spec(spec), n),
}


def register_executor(scheme: str, factory: ExecutorFactory) -> None:
    """Make ``--executor SCHEME[://...]`` available (e.g. ``ray``)."""
    _FACTORIES[scheme] = factory


def make_executor(spec: str | None, concurrency: int = 1) -> Executor:
    spec = (spec or "local").strip()
    scheme = spec.split("://", 1)[0].split(":", 1)[0]
    if scheme not in _FACTORIES:
        raise ValueError(f"unknown executor {spec!r}; available: {', '.join(sorted(_FACTORIES))}")
    return _FACTORIES[scheme](spec, concurrency)
