"""The quality loop: ``sleuth eval tune``, the strategies being changed and a baseline on a
fixed tuning slice, sized to a budget of model time, with paired differences against the baseline.

The slice: ``N`` questions (drawn with the seed, so the same every time) from each tuning
dataset of :data:`SOURCES`: HotpotQA's train file, MuSiQue, StrategyQA, TimeQA and RGB's Chinese
integration questions.  Never HotpotQA's test file (the published comparison's questions), and
never a question of a published run (``docs/results/*/run.json``): a dataset whose sample
would overlap one is skipped and said so, as is one without a loader or data file.

``N`` comes from the budget: the seconds per question each strategy took in the published runs
(their records' ``seconds``), summed over the strategies and the baseline, times the datasets.
Each dataset is one ordinary ``sleuth eval`` run directory under ``--out``, made again on every
call (``sleuth eval rerun``): the response cache answers every prompt a change left as it was, so
after a change only what the change touched costs model time.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sleuth.config import settings
from sleuth.eval.config import EvalConfig, EvalError
from sleuth.eval.datasets import LOADERS, Dataset, DatasetError, load_dataset
from sleuth.eval.store import MANIFEST, is_composed, primary_score, read_manifest, read_records, results_files
from sleuth.eval.summary import cell, citation_rows, comparable, paired_differences, progress
from sleuth.llm.models import file_sha256

#: the published comparison's questions: never part of a tuning slice
FORBIDDEN = ("hotpotqa/test.jsonl",)
REPO = Path(__file__).resolve().parents[3]


class TuneError(EvalError):
    """The tuning slice cannot be built or run as asked (one sentence for the CLI)."""


@dataclass(frozen=True)
class TuneSource:
    """One tuning dataset: its run directory's name, its file under the data folder, its format."""

    name: str
    path: str
    format: str


SOURCES = (
    TuneSource("hotpotqa", "hotpotqa/train.jsonl", "hotpotqa"),
    TuneSource("musique", "musique/train.json", "musique"),
    TuneSource("strategyqa", "strategyqa/train.json", "strategyqa"),
    TuneSource("timeqa", "timeqa/train_hard.json.gz", "timeqa"),
    TuneSource("rgb_zh", "rgb_zh/int_dev.jsonl", "rgb_zh"),
)


def default_data_root() -> Path:
    """``$SLEUTH_DATA_DIR``, else ``shared/data`` beside the checkout."""
    return settings.data_dir() or REPO.parent / "shared" / "data"


def default_published() -> Path:
    return REPO / "docs" / "results"


@dataclass(frozen=True)
class Published:
    """The questions of the published runs, by the sha256 of their data file."""

    runs: Mapping[str, tuple[str, frozenset[str]]]  # sha256 -> (run directory, question ids)

    @classmethod
    def read(cls, root: Path) -> Published:
        if not root.is_dir():
            raise TuneError(f"the published runs are not at {root}; give --published DIR (docs/results)")
        runs: dict[str, tuple[str, frozenset[str]]] = {}
        for manifest_path in sorted(root.glob(f"*/{MANIFEST}")):
            data = (read_manifest(manifest_path.parent) or {}).get("data") or {}
            sha, ids = str(data.get("sha256") or ""), frozenset(map(str, data.get("question_ids") or []))
            if sha:
                name, have = runs.get(sha, ("", frozenset()))
                runs[sha] = (name or manifest_path.parent.name, have | ids)
        return cls(runs)

    def overlap(self, dataset: Dataset) -> tuple[str, set[str]]:
        """The published run holding questions of ``dataset``'s file, and which of its items they are."""
        name, ids = self.runs.get(file_sha256(dataset.path), ("", frozenset()))
        return name, {it.id for it in dataset.items} & ids


@dataclass
class SliceEntry:
    source: TuneSource
    path: Path
    dataset: Dataset  # the sample: what the run directory holds

    @property
    def questions(self) -> list[str]:
        return [it.id for it in self.dataset.items]


@dataclass
class TuneSlice:
    per_dataset: int
    seed: int
    entries: list[SliceEntry] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (dataset, why)


def _loadable(
    sources: Sequence[TuneSource], data_root: Path, published: Published
) -> tuple[list[tuple[TuneSource, Path, Dataset]], list[tuple[str, str]]]:
    """The tuning datasets that can be loaded and have questions outside the published runs."""
    ok, skipped = [], []
    for src in sources:
        path = data_root / src.path
        if any(path.as_posix().endswith(f) for f in FORBIDDEN):
            raise TuneError(f"{src.path} holds the published test questions and is never tuned on")
        if src.format not in LOADERS:
            skipped.append((src.name, f"no loader for format {src.format!r} yet"))
            continue
        if not path.is_file():
            skipped.append((src.name, f"{path} does not exist"))
            continue
        try:
            ds = load_dataset(path, src.format)
        except DatasetError as e:
            skipped.append((src.name, str(e)))
            continue
        run, used = published.overlap(ds)
        if len(used) == len(ds.items):
            skipped.append(
                (src.name, f"all {len(ds.items)} of its questions (and their hops) are in the published run {run}")
            )
            continue
        ok.append((src, path, ds))
    return ok, skipped


def build_slice(
    per_dataset: int,
    seed: int,
    *,
    data_root: Path,
    published: Published,
    sources: Sequence[TuneSource] = SOURCES,
) -> TuneSlice:
    """``per_dataset`` questions drawn with ``seed`` from each usable source (fixed by the two)."""
    if per_dataset < 1:
        raise TuneError("the tuning slice needs at least 1 question per dataset")
    ok, skipped = _loadable(sources, data_root, published)
    sl = TuneSlice(per_dataset, seed, skipped=skipped)
    for src, path, ds in ok:
        sample = ds.sample(per_dataset, seed)
        run, used = published.overlap(sample)
        if used:
            sl.skipped.append(
                (src.name, f"its sample (seed {seed}) holds {len(used)} questions of the published run {run}")
            )
            continue
        sl.entries.append(SliceEntry(src, path, sample))
    if not sl.entries:
        raise TuneError("no tuning dataset is usable: " + "; ".join(f"{n}: {why}" for n, why in sl.skipped))
    return sl


# --------------------------------------------------------------------------- budget
def measured_pace(published_root: Path) -> dict[str, float]:
    """Seconds per question of each strategy in the published runs (mean of its records' ``seconds``)."""
    spent: dict[str, list[float]] = defaultdict(list)
    for run in sorted(p for p in published_root.iterdir() if p.is_dir() and results_files(p)):
        for r in read_records(run):
            if is_composed(r):
                spent[r["strategy"]].append(float((r.get("scores") or {}).get("seconds") or 0.0))
    return {s: sum(v) / len(v) for s, v in sorted(spent.items()) if v}


@dataclass(frozen=True)
class Estimate:
    per_question: dict[str, float]  # seconds per question of each strategy of the run
    guessed: tuple[str, ...]  # strategies without a published pace (the slowest one is assumed)
    datasets: int

    @property
    def seconds_per_round(self) -> float:
        """Model time of one question from every dataset, every strategy."""
        return sum(self.per_question.values()) * self.datasets

    def questions_for(self, budget_s: float) -> int:
        n = math.floor(budget_s / self.seconds_per_round)
        if n < 1:
            raise TuneError(
                f"the budget of {budget_s / 60:.1f} min fits no question: one from each of the {self.datasets} "
                f"datasets takes about {self.seconds_per_round / 60:.1f} min for these strategies"
            )
        return n

    def text(self, per_dataset: int, budget_s: float | None) -> str:
        paces = ", ".join(
            f"{s} {v:.0f} s" + (" (no published pace: the slowest assumed)" if s in self.guessed else "")
            for s, v in self.per_question.items()
        )
        total = self.seconds_per_round * per_dataset / 60
        qs, ds = ("question" if per_dataset == 1 else "questions"), ("dataset" if self.datasets == 1 else "datasets")
        out = f"{per_dataset} {qs} × {self.datasets} {ds}; per question {paces}; about {total:.0f} min of model time"
        return out + (f" (budget {budget_s / 60:.0f} min)" if budget_s is not None else "")


def estimate(strategies: Sequence[str], pace: Mapping[str, float], datasets: int) -> Estimate:
    """The model time of ``strategies`` at the published ``pace`` (unknown ones at the slowest pace)."""
    if not pace:
        raise TuneError("the published runs hold no records to measure the pace of the strategies")
    slowest = max(pace.values())
    guessed = tuple(s for s in strategies if s not in pace)
    return Estimate({s: pace.get(s, slowest) for s in strategies}, guessed, datasets)


# --------------------------------------------------------------------------- run and compare
def run_slice(sl: TuneSlice, out: Path, base: EvalConfig, run: Callable[[EvalConfig], Any]) -> list[Path]:
    """Run every entry of the slice as its own run directory ``out/<dataset>`` through ``run``
    (``run_eval``); ``base`` gives the strategies and model settings. Returns the run directories."""
    dirs = []
    for e in sl.entries:
        cfg = EvalConfig(
            data=str(e.path),
            out=str(out / e.source.name),
            format=e.source.format,
            setting="open",
            strategies=list(base.strategies),
            limit=sl.per_dataset,
            seed=sl.seed,
            k=base.k,
            model=base.model,
            base_url=base.base_url,
            rerun=True,  # every task again: the response cache pays for the prompts the change left alone
            llm_cache=base.llm_cache,
            command=f"{base.command} [tuning slice: {e.source.name}]" if base.command else "",
        )
        run(cfg)
        dirs.append(out / e.source.name)
    return dirs


@dataclass
class Comparison:
    dataset: str  # a dataset, or "overall"
    baseline: str | None
    rows: list[dict[str, Any]]  # paired_differences' rows
    means: dict[str, tuple[float, int]] = field(default_factory=dict)  # strategy -> (mean primary score, n)
    citations: list[dict[str, Any]] = field(default_factory=list)  # citation_rows (data with gold passages)


def _means(records: Sequence[Mapping[str, Any]], order: Sequence[str]) -> dict[str, tuple[float, int]]:
    by: dict[str, list[float]] = defaultdict(list)
    for r in records:
        if is_composed(r):
            by[r["strategy"]].append(primary_score(r))
    return {s: (sum(by[s]) / len(by[s]), len(by[s])) for s in order if by.get(s)}


def _comparable(run_dir: Path) -> list[dict[str, Any]]:
    records = read_records(run_dir)
    return list(comparable(records, progress(records, read_manifest(run_dir))))


def compare(run_dirs: Sequence[Path], order: Sequence[str], baseline: str) -> list[Comparison]:
    """Paired differences against ``baseline`` per run directory and over all of them pooled
    (each question's primary score: F1, accuracy or must-mention as its dataset has it)."""
    out, pooled = [], []
    for d in run_dirs:
        recs = _comparable(d)
        out.append(
            Comparison(
                d.name, *paired_differences(recs, order, baseline), _means(recs, order), citation_rows(recs, order)
            )
        )
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
    lines.append("")
    lines.append(f"{'dataset':<12} {'strategy':<14} {'n':>4}  {'difference [95% CI]':<26} better worse same")
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
    from sleuth.eval.config import validate
    from sleuth.eval.runner import run_eval

    base.strategies = [baseline, *(s for s in base.strategies if s != baseline)]
    validate(base)  # unknown names and options refused before anything is loaded; aliases resolved
    baseline = base.strategies[0]
    published_root = published_root or default_published()
    published = Published.read(published_root)
    data_root = data_root or default_data_root()
    usable, skipped = _loadable(sources, data_root, published)
    for name, why in skipped:
        say(f"skipped {name}: {why}")
    if not usable:
        raise TuneError("no tuning dataset is usable")
    est = estimate(base.strategies, measured_pace(published_root), len(usable))
    if per_dataset is None:
        if budget_s is None:
            raise TuneError("give a budget (--budget 60m) or the questions per dataset (--questions N)")
        per_dataset = est.questions_for(budget_s)
    else:
        budget_s = None  # sized by hand: the estimate says what it costs, not what it was sized to
    sl = build_slice(per_dataset, base.seed or 0, data_root=data_root, published=published, sources=sources)
    for name, why in sl.skipped[len(skipped) :]:
        say(f"skipped {name}: {why}")
    est = Estimate(est.per_question, est.guessed, len(sl.entries))
    say("tuning slice: " + ", ".join(f"{e.source.name} ({e.source.path})" for e in sl.entries))
    say("estimate: " + est.text(per_dataset, budget_s))

    def run(cfg: EvalConfig) -> Any:
        say(f"running {Path(cfg.out).name}: {', '.join(cfg.strategies)} on the slice's questions of {cfg.data}")
        return run_eval(cfg, progress=progress_bar, console=console)

    dirs = run_slice(sl, Path(base.out), base, run)
    return compare(dirs, base.strategies, baseline)
