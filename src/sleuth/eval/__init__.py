"""Evaluation harness: datasets, metrics, the compositionality gap, a resumable runner, reports.

See ``docs/eval.md``.  The CLI is ``sleuth eval`` (``src/sleuth/cli/eval.py``).
"""

from __future__ import annotations

from sleuth.eval.corpus import RetrievalPlan, plan_retrieval
from sleuth.eval.datasets import (
    LOADERS,
    Dataset,
    DatasetError,
    Item,
    Paragraph,
    SubQuestion,
    detect_format,
    load_dataset,
)
from sleuth.eval.executors import Executor, LocalExecutor, make_executor, register_executor
from sleuth.eval.gap import GapRow, compositionality_gap, sub_items
from sleuth.eval.metrics import Prices, cover_em, exact_match, f1, normalize_answer, score
from sleuth.eval.report import bootstrap_ci, write_report
from sleuth.eval.runner import EvalConfig, EvalError, RunSummary, rerun_eval, run_eval, run_task
from sleuth.eval.store import ManifestMismatch, ResultsWriter, read_records

__all__ = [
    "LOADERS",
    "Dataset",
    "DatasetError",
    "EvalConfig",
    "EvalError",
    "Executor",
    "GapRow",
    "Item",
    "LocalExecutor",
    "ManifestMismatch",
    "Paragraph",
    "Prices",
    "ResultsWriter",
    "RetrievalPlan",
    "RunSummary",
    "SubQuestion",
    "bootstrap_ci",
    "compositionality_gap",
    "cover_em",
    "detect_format",
    "exact_match",
    "f1",
    "load_dataset",
    "make_executor",
    "normalize_answer",
    "plan_retrieval",
    "read_records",
    "register_executor",
    "rerun_eval",
    "run_eval",
    "run_task",
    "score",
    "sub_items",
    "write_report",
]
