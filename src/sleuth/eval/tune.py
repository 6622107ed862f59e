"""The quality loop: ``sleuth eval tune`` (docs/eval.md, "The quality loop"): the strategies being changed
and a baseline on a fixed slice of every tuning split (:data:`SOURCES`, never a reporting split), sized
to a budget of model time at the published runs' seconds per question, each dataset one run directory
made again on every call (the response cache pays for what a change left alone), with paired differences.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

from sleuth.config import settings
from sleuth.eval.config import EvalConfig, EvalError, load_sample, validate
from sleuth.eval.datasets import DatasetError
from sleuth.eval.splits import HOTPOTQA_REPORTING, MUSIQUE
from sleuth.eval.store import is_composed, read_manifest, read_records, results_files
from sleuth.eval.summary import cell, citation_rows, comparable, paired_differences, progress, summarise

REPO = Path(__file__).resolve().parents[3]


class TuneError(EvalError):
    """The tuning slice cannot be built or run as asked (one sentence for the CLI)."""


class TuneSource(NamedTuple):
    """One tuning split: its run directory's name, its file under the data folder, its format and,
    for a file that holds a reporting half too, the split (:func:`sleuth.eval.splits.musique_split`)."""

    name: str
    path: str
    format: str
    split: str | None = None


SOURCES = (
    TuneSource("hotpotqa", "hotpotqa/train.jsonl", "hotpotqa"),
    TuneSource("musique", MUSIQUE, "musique", "tuning"),
    TuneSource("strategyqa", "strategyqa/train.json", "strategyqa"),
    TuneSource("timeqa", "timeqa/train_hard.json.gz", "timeqa"),
    TuneSource("rgb_zh", "rgb_zh/int_dev.jsonl", "rgb_zh"),
)


def default_published() -> Path:
    return REPO / "docs" / "results"


def slice_configs(
    base: EvalConfig, per_dataset: int, data_root: Path, sources: Sequence[TuneSource] = SOURCES
) -> tuple[list[EvalConfig], list[tuple[str, str]]]:
    """One run's :class:`EvalConfig` per usable tuning split (``per_dataset`` questions drawn with
    ``base.seed``; ``base`` gives the strategies, model settings and ``out`` folder), and the
    (dataset, why) of those skipped."""
    if per_dataset < 1:
        raise TuneError("the tuning slice needs at least 1 question per dataset")
    configs, skipped = [], []
    for src in sources:
        if src.path == HOTPOTQA_REPORTING or (src.path == MUSIQUE and src.split != "tuning"):
            raise TuneError(f"{src.path} holds reporting questions and is never tuned on without its tuning split")
        cfg = replace(
            base,
            data=str(data_root / src.path),
            out=str(Path(base.out) / src.name),
            format=src.format,
            split=src.split,
            setting="open",
            strategies=list(base.strategies),
            limit=per_dataset,
            seed=base.seed or 0,
            rerun=True,  # every task again: the response cache pays for the prompts the change left alone
            command=f"{base.command} [tuning slice: {src.name}]" if base.command else "",
        )
        try:  # a missing or unreadable file is skipped, as is one without tuning questions
            why = "" if load_sample(cfg).items else "it holds no tuning question"
        except DatasetError as e:
            why = str(e)
        if why:
            skipped.append((src.name, why))
        else:
            configs.append(cfg)
    return configs, skipped


def measured_pace(published_root: Path) -> dict[str, float]:
    """Seconds per question of each strategy in the published runs (mean of its records' ``seconds``)."""
    spent: dict[str, list[float]] = defaultdict(list)
    for run in sorted(p for p in published_root.iterdir() if p.is_dir() and results_files(p)):
        for r in read_records(run):
            if is_composed(r):
                spent[r["strategy"]].append(float((r.get("scores") or {}).get("seconds") or 0.0))
    return {s: sum(v) / len(v) for s, v in sorted(spent.items()) if v}


def estimate(
    strategies: Sequence[str],
    pace: Mapping[str, float],
    datasets: int,
    *,
    budget_s: float | None = None,
    per_dataset: int | None = None,
) -> tuple[int, str]:
    """The questions per dataset (``per_dataset``, else as many as ``budget_s`` of model time holds at
    the published ``pace``) and the estimate in words."""
    if not pace:
        raise TuneError("the published runs hold no records to measure the pace of the strategies")
    each = {s: pace.get(s, max(pace.values())) for s in strategies}
    round_s = sum(each.values()) * datasets  # one question from every dataset, every strategy
    sized = per_dataset is None  # by the budget (else by hand: the estimate says what it costs)
    if per_dataset is None:
        if budget_s is None:
            raise TuneError("give a budget (--budget 60m) or the questions per dataset (--questions N)")
        per_dataset = math.floor(budget_s / round_s)
        if per_dataset < 1:
            raise TuneError(
                f"the budget of {budget_s / 60:.1f} min fits no question: one from each of the {datasets} "
                f"datasets takes about {round_s / 60:.1f} min for these strategies"
            )
    paces = ", ".join(
        f"{s} {v:.0f} s" + ("" if s in pace else " (no published pace: the slowest assumed)") for s, v in each.items()
    )
    qs, ds = ("question" if per_dataset == 1 else "questions"), ("dataset" if datasets == 1 else "datasets")
    text = f"{per_dataset} {qs} × {datasets} {ds}; per question {paces}; about {round_s * per_dataset / 60:.0f} min"
    return per_dataset, text + " of model time" + (f" (budget {budget_s / 60:.0f} min)" if sized and budget_s else "")


@dataclass
class Comparison:
    dataset: str  # a dataset, or "overall"
    baseline: str | None
    rows: list[dict[str, Any]]  # paired_differences' rows
    means: dict[str, tuple[float, int]] = field(default_factory=dict)  # strategy -> (mean primary score, n)
    citations: list[dict[str, Any]] = field(default_factory=list)  # citation_rows (data with gold passages)


def _means(records: Sequence[Mapping[str, Any]], order: Sequence[str]) -> dict[str, tuple[float, int]]:
    return {r["strategy"]: (r["score"][0], r["n"]) for r in summarise(records, order)}


def compare(run_dirs: Sequence[Path], order: Sequence[str], baseline: str) -> list[Comparison]:
    """Paired differences against ``baseline`` per run directory and over all of them pooled
    (each question's primary score: F1, accuracy or must-mention as its dataset has it)."""
    out, pooled = [], []
    for d in run_dirs:
        records = read_records(d)
        recs = comparable(records, progress(records, read_manifest(d)))
        pairs = paired_differences(recs, order, baseline)  # (baseline, rows)
        out.append(Comparison(d.name, *pairs, _means(recs, order), citation_rows(recs, order)))
        pooled += [{**r, "qid": f"{d.name}/{r['qid']}"} for r in recs]
    if len(run_dirs) > 1:
        out.append(Comparison("overall", *paired_differences(pooled, order, baseline), _means(pooled, order)))
    return out


def comparison_lines(comparisons: Sequence[Comparison]) -> list[str]:
    """The comparisons as a plain-text table."""
    lines = []
    for c in comparisons:
        means = ", ".join(f"{s} {m:.3f} (n={n})" for s, (m, n) in c.means.items())
        lines.append(f"mean primary score ({c.dataset}): {means or 'no answers yet'}")
        if c.citations:
            lines.append(
                f"citations ({c.dataset}; precision over the citing answers, recall over all): "
                + ", ".join(
                    f"{r['strategy']} {cell(r['precision'])} / {cell(r['recall'])} ({r['citing']} of {r['n']} cite)"
                    for r in c.citations
                )
            )
    lines += ["", f"{'dataset':<12} {'strategy':<14} {'n':>4}  {'difference [95% CI]':<26} better worse same"]
    for c in comparisons:
        if not c.rows:
            lines.append(f"{c.dataset:<12} (no strategy besides {c.baseline or 'the baseline'} to compare)")
        for r in c.rows:
            m, lo, hi = r["diff"]
            ci = f"{m:+.3f} [{lo:+.3f}, {hi:+.3f}]"
            lines.append(
                f"{c.dataset:<12} {r['strategy']:<14} {r['n']:>4}  {ci:<26} {r['wins']:>6} {r['losses']:>5} {r['ties']:>4}"
            )
    return lines


def tune(
    base: EvalConfig,
    *,
    baseline: str = "rag",
    budget_s: float | None = 3600.0,
    per_dataset: int | None = None,
    data_root: Path | None = None,
    published_root: Path | None = None,
    sources: Sequence[TuneSource] = SOURCES,
    say: Callable[[str], None] = print,
    progress_bar: bool = False,
    console: Any = None,
) -> list[Comparison]:
    """Build the slice, print the estimate, run it and return the paired comparisons.

    ``base.strategies`` are the strategies being changed (the baseline is put first);
    ``base.out`` the folder of the run directories; ``per_dataset`` overrides the budget's size.
    """
    from sleuth.eval.runner import run_eval

    base.strategies = [baseline, *(s for s in base.strategies if s != baseline)]
    validate(base)  # unknown names and options refused before anything is loaded; aliases resolved
    baseline = base.strategies[0]
    published_root = published_root or default_published()
    if not published_root.is_dir():
        raise TuneError(f"the published runs are not at {published_root}; give --published DIR (docs/results)")
    data_root = data_root or settings.data_dir() or REPO.parent / "shared" / "data"  # beside the checkout
    configs, skipped = slice_configs(base, 1, data_root, sources)
    for name, why in skipped:
        say(f"skipped {name}: {why}")
    if not configs:
        raise TuneError("no tuning dataset is usable")
    pace = measured_pace(published_root)
    per_dataset, text = estimate(base.strategies, pace, len(configs), budget_s=budget_s, per_dataset=per_dataset)
    say("tuning slice: " + ", ".join(f"{Path(c.out).name} ({Path(c.data).relative_to(data_root)})" for c in configs))
    say("estimate: " + text)
    for cfg in configs:
        cfg.limit = per_dataset
        say(f"running {Path(cfg.out).name}: {', '.join(cfg.strategies)} on the slice's questions of {cfg.data}")
        run_eval(cfg, progress=progress_bar, console=console)
    return compare([Path(c.out) for c in configs], base.strategies, baseline)
