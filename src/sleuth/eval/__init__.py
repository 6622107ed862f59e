"""Evaluation harness: datasets, metrics, the compositionality gap, a resumable runner, reports.

See ``docs/eval.md``.  The CLI is ``sleuth eval`` (``src/sleuth/cli/eval.py``).
"""

from __future__ import annotations

from sleuth.eval.datasets import load_dataset
from sleuth.eval.report import write_report
from sleuth.eval.runner import EvalConfig, EvalError, rerun_eval, run_eval

__all__ = ["EvalConfig", "EvalError", "load_dataset", "rerun_eval", "run_eval", "write_report"]
