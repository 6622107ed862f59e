"""What every bundled embedder shares: the model opened once, on first use, under a lock; an empty
batch answered without opening it."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from sleuth.config import settings


class LazyEmbedder:
    """Base of the bundled embedders: subclasses set ``name`` and ``dim`` and write ``_open`` (load
    the model) and ``_encode`` (non-empty texts -> float32 unit vectors)."""

    name: str
    dim: int

    def __init__(self, threads: int | None = None) -> None:
        self.threads = threads or settings.embed_threads()
        self._model: Any = None
        self._lock = threading.Lock()

    def _open(self) -> Any:
        raise NotImplementedError

    def _encode(self, model: Any, texts: list[str], *, batch_size: int, is_query: bool) -> np.ndarray:
        raise NotImplementedError

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                self._model = self._open()
        return self._model

    def embed(self, texts: Sequence[str], *, batch_size: int = 32, is_query: bool = False) -> np.ndarray:
        model = self._load()
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vecs = self._encode(model, list(texts), batch_size=batch_size, is_query=is_query)
        return np.ascontiguousarray(vecs, dtype=np.float32)
