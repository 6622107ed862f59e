"""Reciprocal rank fusion of ranked lists (Cormack et al., 2009)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["RRF_K", "rrf"]

#: The usual RRF constant: damps the weight of the very first ranks.
RRF_K = 60


def rrf(rankings: Sequence[Sequence[tuple[int, float]]], k: int, *, k0: int = RRF_K) -> list[tuple[int, float]]:
    """Fuse ``(row, score)`` rankings; returns the top ``k`` as ``(row, fused score)``.

    Each list contributes ``1 / (k0 + rank)`` per row (rank from 1); ties are
    broken by the best single rank, then by row, so the order is deterministic.
    """
    fused: dict[int, float] = {}
    best: dict[int, int] = {}
    for ranking in rankings:
        for rank, (row, _) in enumerate(ranking, 1):
            fused[row] = fused.get(row, 0.0) + 1.0 / (k0 + rank)
            best[row] = min(best.get(row, rank), rank)
    order = sorted(fused, key=lambda r: (-fused[r], best[r], r))
    return [(r, fused[r]) for r in order[:k]]
