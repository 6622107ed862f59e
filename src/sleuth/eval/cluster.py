"""Distributed evaluation on Dask: ``sleuth eval ... --executor dask[://ADDRESS]``.

* ``dask`` or ``dask://local``: start a ``LocalCluster`` bound to 127.0.0.1 only
  (worker processes on this machine, no dashboard) and stop it when the run ends.
  ``$SLEUTH_DASK_WORKERS`` sets the number of worker processes (default
  ``min(2, cpus)``).
* ``dask://HOST:PORT`` (or ``dask://tcp://HOST:PORT``): connect to a running
  scheduler (``dask scheduler`` + ``dask worker tcp://HOST:PORT`` on each node).
  The workers need Sleuth installed, the same data/index paths (or a shared
  search engine) and an LLM reachable by URL (``--base-url``); each worker
  process builds its LLM client, retrievers and strategies once and reuses them.

Without ``--base-url`` every worker process starts its own embedded llama.cpp
server (one model copy per process): fine for the small models on one machine,
but a real cluster should share LLM servers through ``--base-url``.

The runner stays the single writer: tasks are shipped out (at most
``concurrency`` in flight, so a hosted API is never flooded by a big cluster),
results stream back as they finish and the driver appends each one to the same
resumable ``results.jsonl``; the report is written from that file as usual.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from sleuth.config import settings

__all__ = ["DaskExecutor", "parse_dask_spec"]

log = logging.getLogger("sleuth.eval.cluster")

LOCAL = "local"


def parse_dask_spec(spec: str) -> str:
    """``dask`` / ``dask://local`` -> ``"local"``; ``dask://HOST:PORT`` -> ``tcp://HOST:PORT``."""
    spec = spec.strip()
    if spec in ("dask", "dask://", "dask:") or spec == "dask://" + LOCAL:
        return LOCAL
    if not spec.startswith("dask://"):
        raise ValueError(f"a Dask executor spec looks like dask, dask://local or dask://HOST:PORT, not {spec!r}")
    rest = spec[len("dask://") :].rstrip("/")
    if "://" in rest:  # dask://tcp://host:port, dask://tls://host:port
        return rest
    if ":" not in rest:
        raise ValueError(f"{spec!r} has no port; the scheduler listens on dask://HOST:8786 by default")
    return "tcp://" + rest


class DaskExecutor:
    """Runs eval tasks on a Dask cluster and yields results as they finish.

    ``address``: ``"local"`` (start a 127.0.0.1-only ``LocalCluster``) or a
    scheduler address such as ``tcp://10.0.0.5:8786``.
    ``concurrency``: the most tasks in flight at once (also sizes the local
    cluster's threads: ``ceil(concurrency / workers)`` per worker process).
    """

    def __init__(
        self,
        address: str = LOCAL,
        concurrency: int = 1,
        *,
        n_workers: int | None = None,
        start_timeout: float = 120.0,
    ) -> None:
        try:
            from distributed import Client, LocalCluster
        except ImportError as e:  # pragma: no cover - depends on the install
            raise ValueError("the dask executor needs dask[distributed]: pip install 'sleuth[cluster]'") from e
        self.concurrency = max(1, int(concurrency))
        self.cluster: Any = None
        if address == LOCAL:
            workers = n_workers or settings.dask_workers() or min(2, os.cpu_count() or 1)
            workers = max(1, min(workers, self.concurrency))
            threads = -(-self.concurrency // workers)
            with warnings.catch_warnings():
                # the scheduler's small HTTP endpoint moves to a free port when 8787 is taken
                warnings.filterwarnings("ignore", message="Port .* is already in use")
                self.cluster = LocalCluster(
                    n_workers=workers,
                    threads_per_worker=threads,
                    processes=True,
                    host="127.0.0.1",  # scheduler, nannies, workers and HTTP endpoints: loopback only
                    dashboard_address=None,
                    protocol="tcp",
                    silence_logs=logging.WARNING,
                )
            try:
                self.client = Client(self.cluster, set_as_default=False, timeout=start_timeout)
            except BaseException:
                self.cluster.close()
                raise
            self.name = f"dask[local {workers}x{threads}]"
        else:
            try:
                self.client = Client(address, set_as_default=False, timeout=start_timeout)
            except OSError as e:
                raise ValueError(f"cannot reach the Dask scheduler at {address}: {e}") from e
            self.name = f"dask[{address}]"
        self._closed = False
        self._pending: set[Any] = set()

    @property
    def address(self) -> str:
        return str(self.client.scheduler.address)

    def nthreads(self) -> int:
        """Worker threads the cluster has right now."""
        return int(sum(self.client.nthreads().values()))

    def map_unordered(
        self, fn: Callable[[dict[str, Any]], dict[str, Any]], tasks: Iterable[dict[str, Any]]
    ) -> Iterator[dict[str, Any]]:
        """Submit lazily (``concurrency`` in flight), yield each result as it completes; the next task
        is submitted before a result is handed to the caller, so the workers stay busy while the
        driver scores and writes."""
        from distributed import as_completed

        it = iter(tasks)

        def submit(n: int) -> list[Any]:
            # pure=False: the same payload run twice (a retry) must really run twice
            futs = [self.client.submit(fn, payload, pure=False) for payload in itertools.islice(it, n)]
            self._pending.update(futs)
            return futs

        done = as_completed(submit(self.concurrency), loop=self.client.loop)
        try:
            for fut in done:
                self._pending.discard(fut)
                try:
                    result = fut.result()
                finally:
                    fut.release()
                done.update(submit(1))
                yield result
        finally:
            self._cancel_pending()

    def _cancel_pending(self) -> None:
        """Cancel what is still queued or running (an interrupted run resumes from the JSONL)."""
        pending, self._pending = list(self._pending), set()
        for f in pending:
            with contextlib.suppress(Exception):
                f.cancel()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._cancel_pending()
        try:
            self.client.close()
        finally:
            if self.cluster is not None:
                self.cluster.close()

    def __enter__(self) -> DaskExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
