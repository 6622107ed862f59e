"""Embedding many texts: the on-disk :class:`EmbeddingCache` (by model and text) and :func:`embed_stream`, the
resumable, order-keeping pipeline every build uses (``parallel`` requests in flight for a server embedder).
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from sleuth.kvcache import default_cache_dir, use_wal

if TYPE_CHECKING:
    from sleuth.search.dense import Embedder

__all__ = ["EmbeddingCache", "chunk_rows", "embed_stream", "embed_texts"]


class EmbeddingCache:
    """Vectors by (model, text) in SQLite; safe for several processes (WAL)."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path else default_cache_dir() / "embeddings.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(self.path, timeout=30.0, check_same_thread=False)
        use_wal(self.conn)
        self.conn.execute("CREATE TABLE IF NOT EXISTS emb (k TEXT PRIMARY KEY, v BLOB NOT NULL)")

    @staticmethod
    def key(model: str, text: str) -> str:
        return hashlib.sha256(f"{model}\0{text}".encode()).hexdigest()[:40]

    def get_many(self, keys: Sequence[str], dim: int) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for i in range(0, len(keys), 500):
            part = list(keys[i : i + 500])
            q = f"SELECT k, v FROM emb WHERE k IN ({','.join('?' * len(part))})"
            for k, v in self.conn.execute(q, part):
                vec = np.frombuffer(v, dtype=np.float32)
                if vec.shape == (dim,):
                    out[k] = vec
        return out

    def put_many(self, items: Sequence[tuple[str, np.ndarray]]) -> None:
        with self.conn:
            self.conn.executemany(
                "INSERT OR REPLACE INTO emb (k, v) VALUES (?, ?)",
                [(k, np.asarray(v, dtype=np.float32).tobytes()) for k, v in items],
            )

    def close(self) -> None:
        self.conn.close()


def embed_texts(
    embedder: Embedder,
    texts: Sequence[str],
    *,
    cache: EmbeddingCache | bool | None = True,
    progress: bool = False,
    batch_size: int = 32,
) -> np.ndarray:
    """Embed ``texts`` (cached ones are not recomputed), with a progress bar if asked."""
    out = np.zeros((len(texts), embedder.dim), dtype=np.float32)
    step = chunk_rows(embedder, batch_size)
    chunks = ((s, list(texts[s : s + step])) for s in range(0, len(texts), step))
    for start, vecs in embed_stream(embedder, chunks, total=len(texts), cache=cache, progress=progress,
                                    batch_size=batch_size):  # fmt: skip
        out[start : start + len(vecs)] = vecs
    return out


def chunk_rows(embedder: Embedder, batch_size: int) -> int:
    """Rows read and written at a time: enough batches to keep every request slot busy."""
    bs = int(getattr(embedder, "batch_size", batch_size))
    return max(256, 4 * bs * int(getattr(embedder, "parallel", 1)))


def embed_stream(
    embedder: Embedder,
    chunks: Iterable[tuple[int, list[str]]],
    *,
    total: int,
    cache: EmbeddingCache | bool | None = True,
    progress: bool = False,
    batch_size: int = 32,
) -> Iterator[tuple[int, np.ndarray]]:
    """Vectors for each ``(start, texts)`` chunk, yielded in order as ``(start, vectors)``.

    Cached texts are not sent; the rest go out ``embedder.parallel`` batches at a time while the next chunk is
    read, and each batch is committed to the cache at once, so a killed build resumes where it was.
    """
    ec = EmbeddingCache() if cache is True else (cache or None)
    cache_name = str(getattr(embedder, "cache_name", embedder.name))
    remote = hasattr(embedder, "parallel")  # a server embedder: requests in flight while the next chunk is read
    workers = max(1, int(getattr(embedder, "parallel", 1)))
    bs = int(getattr(embedder, "batch_size", batch_size)) if remote else max(batch_size * 8, 256)
    pool = ThreadPoolExecutor(workers, thread_name_prefix="sleuth-embed") if remote else None
    pending: deque[tuple[int, np.ndarray, list[str], list[tuple[list[int], Any]]]] = deque()
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    bar = Progress(
        TextColumn("embedding passages"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        disable=not progress,
    )
    task = bar.add_task("embed", total=total)

    def finish() -> tuple[int, np.ndarray]:
        start, out, keys, jobs = pending.popleft()
        for idx, job in jobs:
            vecs = job.result() if pool is not None else job
            out[idx] = vecs
            if ec is not None:  # committed batch by batch: a killed build loses at most what is in flight
                ec.put_many([(keys[i], vecs[j]) for j, i in enumerate(idx)])
        bar.update(task, advance=len(out))
        return start, out

    try:
        with bar:
            for start, texts in chunks:
                dim = embedder.dim
                out = np.zeros((len(texts), dim), dtype=np.float32)
                keys = [EmbeddingCache.key(cache_name, t) for t in texts]
                have = ec.get_many(keys, dim) if ec is not None else {}
                todo = [i for i, k in enumerate(keys) if k not in have]
                for i, k in enumerate(keys):
                    if k in have:
                        out[i] = have[k]
                jobs: list[tuple[list[int], Any]] = []
                for s in range(0, len(todo), bs):
                    idx = todo[s : s + bs]
                    part = [texts[i] for i in idx]
                    if pool is not None:
                        jobs.append((idx, pool.submit(embedder.embed, part, batch_size=bs)))
                    else:
                        jobs.append((idx, embedder.embed(part, batch_size=batch_size)))
                pending.append((start, out, keys, jobs))
                while len(pending) > 2:
                    yield finish()
            while pending:
                yield finish()
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        if cache is True and ec is not None:
            ec.close()
