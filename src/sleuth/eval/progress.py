"""The run's progress bar: tasks done, running mean scores per strategy, failures."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from sleuth.eval.store import is_composed, primary_score
from sleuth.eval.worker import FAILED


class RunningScores:
    """Running means of each strategy's primary score (for the progress bar and the summary)."""

    def __init__(self) -> None:
        self.sum: dict[str, float] = defaultdict(float)
        self.n: dict[str, int] = defaultdict(int)
        self.failed = 0

    def add(self, rec: Mapping[str, Any]) -> None:
        if not is_composed(rec):
            return
        self.sum[rec["strategy"]] += primary_score(rec)
        self.n[rec["strategy"]] += 1

    def count(self, rec: Mapping[str, Any]) -> None:
        """Add a record that is done (written now or found on resume), counting it if it failed."""
        self.add(rec)
        self.failed += rec.get("status") == FAILED

    def line(self, order: Sequence[str]) -> str:
        parts = [f"{s} {self.sum[s] / self.n[s]:.2f}" for s in order if self.n.get(s)]
        return " | ".join(parts)

    def bar_text(self, order: Sequence[str]) -> str:
        txt = self.line(order)
        return f"{txt}  failed {self.failed}" if self.failed else txt

    def table(self) -> dict[str, dict[str, float]]:
        return {s: {"n": self.n[s], "score": self.sum[s] / self.n[s]} for s in self.n if self.n[s]}


class _NoBar:
    def __enter__(self) -> _NoBar:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def add_task(self, *a: Any, **kw: Any) -> int:
        return 0

    def update(self, *a: Any, **kw: Any) -> None:
        return None


def progress_bar(enabled: bool, console: Any) -> Any:
    """A rich progress bar on ``console`` (a do-nothing one when not ``enabled``); use it as a context."""
    if not enabled:
        return _NoBar()
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(
        TextColumn("[bold]eval"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[scores]}"),
        console=console,
        transient=False,
    )
