"""Which questions report and which tune: one definition for tuning, the published runs and the suite.

The published comparison reports on two sets that nobody tunes on:

- every question of HotpotQA's ``hotpotqa/test.jsonl`` (its train file is the tuning split);
- half of MuSiQue's ``musique/train.json``: the :data:`MUSIQUE_REPORTING` questions drawn with seed 0
  (``Dataset.sample(50, 0)``, which holds the peers comparison's 30 questions, drawn with the same seed).
  The other half is MuSiQue's tuning split.

No question text of a reporting split may appear in ``src/`` or ``tests/`` (``tests/test_splits.py``, which
reads them with ``conftest.reporting_questions``).
"""

from __future__ import annotations

from sleuth.eval.datasets import Dataset

HOTPOTQA_REPORTING = "hotpotqa/test.jsonl"
MUSIQUE = "musique/train.json"
MUSIQUE_REPORTING = 50
MUSIQUE_SEED = 0
MUSIQUE_PARTS = ("tuning", "reporting")


def musique_reporting_ids(musique: Dataset) -> frozenset[str]:
    """The ids of MuSiQue's reporting half (the sample of :data:`MUSIQUE_REPORTING` with seed 0)."""
    return frozenset(it.id for it in musique.sample(MUSIQUE_REPORTING, MUSIQUE_SEED).items)


def musique_split(musique: Dataset, part: str) -> Dataset:
    """``part`` ("tuning" or "reporting") of the MuSiQue file, in file order."""
    if part not in MUSIQUE_PARTS:
        raise ValueError(f"unknown split {part!r}: tuning or reporting")
    report = musique_reporting_ids(musique)
    items = [it for it in musique.items if (it.id in report) == (part == "reporting")]
    return Dataset(musique.name, musique.format, musique.path, items, musique.corpus_path)
