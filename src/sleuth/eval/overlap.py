"""Token-overlap F1 (SQuAD's), shared by the English and the Chinese metrics."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence


def token_f1(pred: Sequence[str], gold: Sequence[str]) -> float:
    """F1 of the multiset overlap of two token lists; two empty lists agree (1.0)."""
    if not pred or not gold:
        return float(list(pred) == list(gold))
    same = sum((Counter(pred) & Counter(gold)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(gold)
    return 2 * precision * recall / (precision + recall)
