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

    def count(self, rec: Mapping[str, Any]) -> None:
        """Add a record that is done (written now or found on resume), counting it if it failed."""
        if is_composed(rec):
            self.sum[rec["strategy"]] += primary_score(rec)
            self.n[rec["strategy"]] += 1
        self.failed += rec.get("status") == FAILED

    def bar_text(self, order: Sequence[str]) -> str:
        txt = " | ".join(f"{s} {self.sum[s] / self.n[s]:.2f}" for s in order if self.n.get(s))
        return f"{txt}  failed {self.failed}" if self.failed else txt

    def table(self) -> dict[str, dict[str, float]]:
        return {s: {"n": self.n[s], "score": self.sum[s] / self.n[s]} for s in self.n if self.n[s]}


def progress_bar(enabled: bool, console: Any) -> Any:
    """A rich progress bar on ``console`` (hidden when not ``enabled``); use it as a context."""
    from rich import progress as rp

    return rp.Progress(
        rp.TextColumn("[bold]eval"),
        rp.BarColumn(),
        rp.MofNCompleteColumn(),
        rp.TimeElapsedColumn(),
        rp.TimeRemainingColumn(),
        rp.TextColumn("{task.fields[scores]}"),
        console=console,
        transient=False,
        disable=not enabled,
    )
