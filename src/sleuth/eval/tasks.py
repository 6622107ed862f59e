"""A run's tasks: (strategy, question) pairs in question-major order, handed out per sitting."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any

from sleuth.eval.conversations import REWRITE, is_conversation, mode_units
from sleuth.eval.datasets import Dataset, Item
from sleuth.eval.gap import question_of, sub_items

#: one task: the strategy's name, the question, the task's meta (``{"kind": "main"}`` or a hop's)
Task = tuple[str, Item, dict[str, Any]]


def build_tasks(dataset: Dataset, strategies: Sequence[str], gap: bool) -> list[Task]:
    """Question-major order, so a partial run covers every strategy on the first questions.

    A conversation item also gets its baseline tasks (:func:`sleuth.eval.conversations.mode_units`)."""
    tasks = []
    for item in dataset.items:
        units: list[tuple[Item, dict[str, Any]]] = [(item, {"kind": "main"})]
        if is_conversation(item):
            units = [(item, {"kind": "main", "mode": REWRITE}), *mode_units(item)]
        if gap:
            units += [(s, {"kind": "sub", **s.metadata}) for s in sub_items(item)]
        for unit, meta in units:
            for strat in strategies:
                tasks.append((strat, unit, meta))
    return tasks


class Sitting:
    """Hands out a run's tasks until a time limit, stopping only between questions.

    Once ``limit`` seconds have passed since ``started`` (a ``time.monotonic()`` reading), the
    next task that would start a new question is not handed out: the tasks of the question in
    progress (all strategies, and the hops of a composed question) still run, so a sitting ends
    on a complete question and the next one, resumed with the same command, starts on a fresh
    one. The check sits where the executor asks for its next task, so no task is started and
    then thrown away.
    """

    def __init__(self, limit: float | None, started: float | None = None) -> None:
        start = time.monotonic() if started is None else started
        self.deadline = None if limit is None else start + limit
        self.stopped_before: str | None = None  # the question not started because time was up

    def tasks(self, todo: Sequence[Task]) -> Iterator[Task]:
        current: str | None = None
        for task in todo:
            question = question_of(task[1].id)
            if (
                self.deadline is not None
                and current is not None
                and question != current
                and time.monotonic() >= self.deadline
            ):
                self.stopped_before = question
                return
            current = question
            yield task
