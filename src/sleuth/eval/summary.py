"""The numbers behind ``report.md`` (bootstrap CIs, run progress, per-strategy rows, paired differences)
and its table builders; deterministic for the same records (fixed bootstrap seed, sorted inputs)."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sleuth.eval.gap import question_of
from sleuth.eval.store import composed_by_strategy, in_order, is_composed, primary_score

BOOTSTRAP = 2000
BOOT_SEED = 12345
LEVEL = 0.95


def bootstrap_ci(values: Sequence[float]) -> tuple[float, float, float]:
    """Mean and percentile-bootstrap interval (:data:`LEVEL`, :data:`BOOTSTRAP` resamples, fixed seed)."""
    a = np.asarray(values, dtype=float)
    if a.size == 0:
        return (math.nan, math.nan, math.nan)
    rng = np.random.default_rng(BOOT_SEED)
    means = a[rng.integers(0, a.size, size=(BOOTSTRAP, a.size))].mean(axis=1)
    lo, hi = np.quantile(means, [(1 - LEVEL) / 2, 1 - (1 - LEVEL) / 2])
    return (float(a.mean()), float(lo), float(hi))


@dataclass(frozen=True)
class Progress:
    """How far a run is: which questions every strategy has finished (the comparable set)."""

    strategies: tuple[str, ...]
    questions: int | None  # in the run's sample (None without a manifest)
    complete: frozenset[str]  # question ids answered by every strategy (every hop too, with --gap)
    tasks_done: int
    tasks_total: int | None
    #: the time the unanswered questions take, each strategy's at its own recorded seconds a question
    #: (strategies run ahead of each other with ``--only``); None: some strategy has no record yet
    seconds_left: float | None = None

    @property
    def finished(self) -> bool:
        return self.questions is not None and len(self.complete) >= self.questions

    def text(self) -> str:
        tasks = f"{self.tasks_done} of {self.tasks_total} tasks" if self.tasks_total else f"{self.tasks_done} tasks"
        every = _n(len(self.strategies), "strategy")
        if self.finished:
            return f"complete: {_n(self.questions or 0, 'question')} × {every} ({tasks})"
        done = len(self.complete)
        of = _n(done, "question") if self.questions is None else f"{done} of {_n(self.questions, 'question')}"
        text = f"{of} answered by all {every} ({tasks})"
        if self.seconds_left is not None:
            text += f"; the rest takes about {self.seconds_left / 3600:.1f} h at each strategy's recorded seconds a question"
        return text


def _n(k: int, noun: str) -> str:
    plural = noun[:-1] + "ies" if noun.endswith("y") else noun + "s"
    return f"{k} {noun if k == 1 else plural}"


def progress(records: Sequence[Mapping[str, Any]], manifest: Mapping[str, Any] | None) -> Progress:
    """The questions every strategy of the run has finished, so that tables compare like with like.

    A question is complete when each strategy has a record for it (failed ones count: they
    score 0) and, in a ``--gap`` run, for each of its decomposition hops.  The hop count comes
    from the manifest (written by the runner) or, for older runs, from the hop records.
    """
    manifest = manifest or {}
    settings = manifest.get("settings") or {}
    strategies = tuple(settings.get("strategies") or sorted({r["strategy"] for r in records}))
    gap = bool(settings.get("gap"))
    mains: dict[str, set[str]] = defaultdict(set)
    subs: dict[tuple[str, str], set[int]] = defaultdict(set)
    seen_hops: dict[str, int] = {}
    for r in records:
        task = r.get("task") or {}
        if is_composed(r):
            mains[str(r["qid"])].add(r["strategy"])
        elif task.get("parent") is not None and task.get("hop") is not None:
            parent = str(task["parent"])
            subs[(parent, r["strategy"])].add(int(task["hop"]))
            seen_hops[parent] = max(seen_hops.get(parent, 0), int(task.get("hops") or 0))
    hops = {str(k): int(v) for k, v in (manifest.get("hops") or {}).items()}
    complete = set()
    for qid, done in mains.items():
        if not all(s in done for s in strategies):
            continue
        if gap:
            n = hops.get(qid, seen_hops.get(qid))
            if n is None or any(subs.get((qid, s), set()) != set(range(1, n + 1)) for s in strategies):
                continue
        complete.add(qid)
    data = manifest.get("data") or {}
    questions = data.get("questions")
    total = manifest.get("tasks")
    if total is None and questions is not None and not gap:
        total = int(questions) * len(strategies)
    left = None if questions is None else _seconds_left(records, strategies, int(questions))
    return Progress(strategies, questions, frozenset(complete), len(records), total, left)


def _seconds_left(records: Sequence[Mapping[str, Any]], strategies: Sequence[str], questions: int) -> float | None:
    """Each strategy's unanswered questions times its mean recorded seconds a question, the question's hops and
    conversation modes included (None: some strategy has no record)."""
    walls: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))  # strategy -> question -> seconds
    for r in records:
        walls[r["strategy"]][question_of(str(r["qid"]))] += float(r.get("wall_s") or 0.0)
    if not all(walls.get(s) for s in strategies):
        return None
    left = sum(max(questions - len(walls[s]), 0) * sum(walls[s].values()) / len(walls[s]) for s in strategies)
    return left or None  # records without timings (or nothing left) give no estimate


def comparable(records: Sequence[Mapping[str, Any]], prog: Progress) -> list[Mapping[str, Any]]:
    """The records of complete questions (composed and hops): what the tables compare."""
    return [r for r in records if question_of(str(r["qid"])) in prog.complete]


def cell(x: Any, nd: int = 3) -> str:
    """A table cell: a float to ``nd`` decimals, "–" for none (``None`` or NaN), anything else as text."""
    if not isinstance(x, float):
        return "–" if x is None else str(x)
    return "–" if math.isnan(x) else f"{x:.{nd}f}"


def mean_or_nan(xs: Sequence[float]) -> float:
    """The mean of ``xs``; NaN (shown as "–") when there are none."""
    return float(np.mean(xs)) if len(xs) else math.nan


def score_mean(records: Iterable[Mapping[str, Any]], key: str, default: float | None = None) -> float:
    """The mean of the records' ``scores[key]``, over those that have it unless ``default`` stands in."""
    got = ((r.get("scores") or {}).get(key) for r in records)
    return mean_or_nan([float(v) for v in (default if v is None else v for v in got) if v is not None])


Records = Sequence[Mapping[str, Any]]


def per_strategy(records: Iterable[Mapping[str, Any]], order: Sequence[str] = (), where: Any = None) -> list:
    """``(strategy, its records)`` over the composed questions (those ``where`` keeps), in the run's order."""
    by = composed_by_strategy(r for r in records if where is None or where(r))
    return [(s, by[s]) for s in in_order(by, order)]


#: the score table's columns after the primary score, and the cost table's with their decimals
SCORES = ("em", "f1", "cover_em", "acc", "mention", "recall_title", "recall_id")
COSTS = {"llm_calls": 2, "searches": 2, "prompt_tokens": 1, "processed_prompt_tokens": 1}
COSTS |= {"completion_tokens": 1, "seconds": 2}


def summarise(records: Records, order: Sequence[str] = ()) -> list[dict[str, Any]]:
    """One row per strategy over the composed (main) questions."""
    rows = []
    for s, rs in per_strategy(records, order):
        rs = sorted(rs, key=lambda r: str(r["qid"]))
        primary = Counter((r.get("scores") or {}).get("primary", "f1") for r in rs).most_common(1)[0][0]
        row: dict[str, Any] = {"strategy": s, "n": len(rs), "primary": primary}
        row["score"] = bootstrap_ci([primary_score(r) for r in rs])
        row |= {m: score_mean(rs, m) for m in (*SCORES, "cost_usd")}
        row |= {m: score_mean(rs, m, 0.0) for m in COSTS}
        row["cached_llm_calls"] = sum(int((r.get("scores") or {}).get("cached_llm_calls") or 0) for r in rs)
        row["tokens"] = row["prompt_tokens"] + row["completion_tokens"]
        row["failed"] = sum(r.get("status") == "failed" for r in rs)
        row["reasons"] = dict(sorted(Counter(r.get("reason") or "?" for r in rs).items()))
        rows.append(row)
    return rows


def citation_rows(records: Records, order: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Citation precision and recall per strategy over the composed questions with gold supporting passages
    (scored with ``cited_recall_id``): ``precision`` over the ``citing`` answers (citing nothing has no
    precision), ``recall`` over all (citing nothing recalls 0), ``recall_citing`` over the citing ones."""
    rows = []
    for s, rs in per_strategy(records, order, lambda r: (r.get("scores") or {}).get("cited_recall_id") is not None):
        citing = [r for r in rs if r["scores"].get("cite_precision") is not None]
        row = {"strategy": s, "n": len(rs), "citing": len(citing), "precision": score_mean(citing, "cite_precision")}
        row |= {"recall": score_mean(rs, "cited_recall_id"), "recall_citing": score_mean(citing, "cited_recall_id")}
        rows.append(row)
    return rows


def heading(title: str, *intro: str) -> list[str]:
    """A report section's first lines: its title and the paragraph that says how to read it."""
    return ["", f"## {title}", "", *intro, *([""] if intro else [])]


def section(title: str, intro: str, head: str | Sequence[str], rows: Iterable[Iterable[Any]]) -> list[str]:
    """A section with one table: :func:`heading` and :func:`table`; nothing when there are no rows."""
    rows = list(rows)
    return [*heading(title, *([intro] if intro else [])), *table(head, rows)] if rows else []


def ci_cell(ci: Sequence[float]) -> str:
    """A mean with its interval: ``0.412 [0.320, 0.505]``."""
    return "{} [{}, {}]".format(*map(cell, ci))


def paired(d: Sequence[float]) -> dict[str, Any]:
    """A paired difference from its per-question differences ``d``: the mean with its bootstrap CI,
    and the questions each side won (``wins``: positive) or tied."""
    wins, losses, ties = (sum(x > 0 for x in d), sum(x < 0 for x in d), sum(x == 0 for x in d))
    return {"diff": bootstrap_ci(d), "wins": wins, "losses": losses, "ties": ties}


def diff_cell(row: Mapping[str, Any]) -> str:
    """A paired difference's mean with its CI, signed: ``+0.180 [+0.052, +0.310]``."""
    return "{:+.3f} [{:+.3f}, {:+.3f}]".format(*row["diff"])


def paired_cells(row: Mapping[str, Any]) -> tuple[str, int, int, int]:
    """A paired difference (a :func:`paired` row): the mean with its CI, wins, losses, ties."""
    return diff_cell(row), row["wins"], row["losses"], row["ties"]


def table(head: str | Sequence[str], rows: Iterable[Iterable[Any]]) -> list[str]:
    """A Markdown table: the header (its cells, or one text of them between ``" | "``), its rule and a
    line a row (each cell as text; a row may give its cells in groups: lists or tuples)."""

    def line(cells: Iterable[Any]) -> str:
        flat = [y for x in cells for y in (x if isinstance(x, list | tuple) else [x])]
        return "| " + " | ".join(map(str, flat)) + " |"

    names = head.split(" | ") if isinstance(head, str) else head
    return [line(names), "|" + "---|" * len(names), *map(line, rows)]


def paired_differences(
    records: Records, order: Sequence[str], baseline: str | None = None
) -> tuple[str | None, list[dict[str, Any]]]:
    """Each strategy against a baseline (``rag`` when present, else the first strategy) on the composed questions
    both answered (only the strategies of ``order``, when given): the primary score's :func:`paired` difference, and
    what the strategy spent on those questions as a multiple of the baseline (``tokens_ratio``: processed prompt
    tokens, ``seconds_ratio``)."""
    by = {s: {str(r["qid"]): r for r in rs} for s, rs in per_strategy(records, order) if s in order or not order}
    if baseline is None:
        baseline = "rag" if "rag" in by else next(iter(by), None)
    if baseline not in by:
        return None, []
    base = by[baseline]
    rows = []
    for s, mine in by.items():
        common = sorted(set(mine) & set(base))
        if s == baseline or not common:
            continue
        row = {
            "strategy": s,
            "n": len(common),
            **paired([primary_score(mine[q]) - primary_score(base[q]) for q in common]),
        }
        row["tokens_ratio"] = _ratio(mine, base, common, "processed_prompt_tokens")
        row["seconds_ratio"] = _ratio(mine, base, common, "seconds")
        rows.append(row)
    return baseline, rows


def _ratio(a: Mapping[str, Mapping[str, Any]], b: Mapping[str, Mapping[str, Any]], qids: Sequence[str], key: str):
    """What ``a``'s records of ``qids`` spent (their scores' ``key``) over ``b``'s (``None`` when ``b`` spent nothing)."""
    mine, base = (sum(float((recs[q].get("scores") or {}).get(key) or 0) for q in qids) for recs in (a, b))
    return mine / base if base else None
