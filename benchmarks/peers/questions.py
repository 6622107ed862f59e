"""The questions (fixed by seed) and the open-setting retrieval of each dataset, as Sleuth's eval builds them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sleuth.eval.corpus import RetrievalPlan, plan_retrieval
from sleuth.eval.datasets import Dataset, load_dataset

__all__ = ["DATASETS", "Benchmark", "default_data_dir", "load_benchmark"]

#: dataset name -> file under the data folder
DATASETS: dict[str, str] = {"hotpotqa": "hotpotqa/test.jsonl", "musique": "musique/train.json"}


def default_data_dir() -> Path:
    """``shared/data`` beside the repository (where the project keeps its data sets)."""
    return Path(__file__).resolve().parents[3] / "shared" / "data"


@dataclass
class Benchmark:
    """One dataset's sampled questions and the open-setting retrieval over its pooled corpus."""

    name: str
    dataset: Dataset
    plan: RetrievalPlan

    def questions(self) -> list[dict[str, Any]]:
        """What a peer adapter gets: the question id and text only (never the answers)."""
        return [{"qid": it.id, "question": it.prompt()} for it in self.dataset.items]


def load_benchmark(name: str, n: int, seed: int, data_dir: Path | None = None) -> Benchmark:
    """``n`` questions of dataset ``name`` drawn with ``seed`` (Sleuth's ``Dataset.sample``), open setting."""
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; choose from {', '.join(DATASETS)}")
    path = (data_dir or default_data_dir()) / DATASETS[name]
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing (give --data-dir, the folder holding {DATASETS[name]})")
    dataset = load_dataset(path).sample(n, seed)
    return Benchmark(name, dataset, plan_retrieval(dataset, "open"))
