"""What defines an evaluation run (:class:`EvalConfig`) and the checks of its arguments.

The checks run before anything is read or started, so a mistake in the command line
(an unknown strategy, a non-positive limit) is one sentence, not a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sleuth.eval.corpus import SEARCH_MODES, RetrievalPlan
from sleuth.eval.datasets import Dataset, load_dataset
from sleuth.eval.items import EvalError
from sleuth.eval.metrics import Prices
from sleuth.eval.splits import MUSIQUE_PARTS, musique_split
from sleuth.strategies.registry import check_run_options, resolve_name, resolve_strategy_class, split_spec

SETTINGS = ("open", "distractor", "closed")
#: the EvalConfig fields stored as they are in run.json's ``settings``
SAME_IN_SETTINGS = ("limit", "seed", "k", "max_steps", "max_tokens", "gap")


@dataclass
class EvalConfig:
    """Everything that defines a run; ``settings()`` is what a resume must match."""

    data: str
    out: str
    format: str | None = None
    setting: str | None = None  # open | distractor | closed (None: open when a corpus exists)
    strategies: list[str] = field(default_factory=lambda: ["direct"])
    limit: int | None = None
    seed: int | None = 0
    k: int = 5
    max_steps: int | None = None
    max_tokens: int | None = None
    model: str | None = None
    base_url: str | None = None
    index: str | None = None  # an existing index dir / retriever spec for the open setting
    search_mode: str | None = None  # lexical | dense | hybrid (None: sleuth.eval.corpus.search_mode decides)
    corpus: str | None = None  # a corpus file to pool instead of the dataset's own paragraphs
    split: str | None = None  # MuSiQue's "tuning" or "reporting" half (sleuth.eval.splits); None: the whole file
    gap: bool = False  # also run every decomposition hop (compositionality gap)
    strategy_options: dict[str, Any] = field(default_factory=dict)
    prices: str | None = None
    concurrency: int = 1
    executor: str = "local"
    retry_failed: bool = False
    rerun: bool = False  # make every task again with the running code (a re-run under way goes on)
    only: list[str] | None = None  # run only these of ``strategies`` in this sitting (None: all)
    isolate: bool = True  # wipe the embedded server's KV cache before each task (see isolated_tasks())
    llm_cache: bool = True  # Sleuth's response cache (a rerun then costs no model time)
    time_limit: float | None = None  # a sitting: start no new question after this many seconds
    command: str = ""

    def isolated_tasks(self) -> bool:
        """Whether tasks are isolated: only possible one at a time (concurrent tasks share slots)."""
        return self.concurrency == 1 and self.isolate

    def run_options(self) -> dict[str, Any]:
        """The options every strategy of the run is built with: ``k``, ``--option``s, step and token caps."""
        given = {"max_steps": self.max_steps, "max_tokens": self.max_tokens}
        return {"k": self.k, **self.strategy_options, **{k: v for k, v in given.items() if v is not None}}

    def settings(self, dataset: Dataset, plan: RetrievalPlan) -> dict[str, Any]:
        return {
            **{k: getattr(self, k) for k in SAME_IN_SETTINGS},
            "strategies": list(self.strategies),
            "strategy_options": dict(sorted(self.strategy_options.items())),
            "format": dataset.format,
            "setting": plan.setting,
            "model": self.model or "default",
            "index": plan.describe(),
            **({"split": self.split} if self.split else {}),
        }


def load_sample(cfg: EvalConfig) -> Dataset:
    """The run's questions: the data file (its ``split`` half where one is named), sampled with ``limit`` and ``seed``."""
    dataset = load_dataset(cfg.data, cfg.format, cfg.corpus)
    if cfg.split:
        if dataset.format != "musique":
            raise EvalError(f"a split ({cfg.split}) is defined for MuSiQue only, not {dataset.format}")
        dataset = musique_split(dataset, cfg.split)
    return dataset.sample(cfg.limit, cfg.seed)


def validate(cfg: EvalConfig) -> None:
    """Check ``cfg`` (raises :class:`EvalError`) and replace its strategy aliases by their names."""
    checks = (
        (not cfg.strategies, "give at least one strategy with --strategies"),
        (cfg.only == [], "--only names no strategy; give some of --strategies, or leave --only out"),
        (cfg.limit is not None and cfg.limit < 1, "--limit must be at least 1"),
        (cfg.concurrency < 1, "--concurrency must be at least 1"),
        (cfg.k < 1, "--k must be at least 1"),
        (cfg.time_limit is not None and not cfg.time_limit > 0, "--time-limit must be a positive duration"),
        (cfg.setting not in (None, *SETTINGS), f"--setting must be one of {', '.join(SETTINGS)}"),
        (cfg.split not in (None, *MUSIQUE_PARTS), f"the split must be one of {', '.join(MUSIQUE_PARTS)}"),
        (cfg.search_mode not in (None, *SEARCH_MODES), f"--search-mode must be one of {', '.join(SEARCH_MODES)}"),
    )
    for wrong, msg in checks:
        if wrong:
            raise EvalError(msg)
    try:
        names = [resolve_spec(s) for s in cfg.strategies]
        check_run_options(names, cfg.run_options())  # as the workers build them: refused before anything runs
        Prices.parse(cfg.prices)
    except ValueError as e:  # an unknown strategy or option, a bad option value or price
        raise EvalError(str(e)) from e
    if len(set(names)) != len(names):
        raise EvalError("a strategy is listed twice in --strategies")
    cfg.strategies = names
    if cfg.only is not None:
        cfg.only = _only(cfg.only, names)


def resolve_spec(spec: str) -> str:
    """``spec`` spelled one way: the strategy's name (or ``module:Class``), then its own options, if any
    (``Self_Ask[Mode=paper]`` -> ``self-ask[mode=paper]``: a record's strategy)."""
    name, own = split_spec(spec)
    shown = ",".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in own.items())
    return (name if resolve_strategy_class(name) else resolve_name(name)) + (f"[{shown}]" if own else "")


def _only(only: list[str], strategies: list[str]) -> list[str]:
    """``only`` by the names of ``strategies`` (aliases resolved), each one of them."""
    try:
        names = [resolve_spec(s) for s in only]
    except ValueError as e:
        raise EvalError(f"--only: {e}") from e
    for s, name in zip(only, names, strict=True):
        if name not in strategies:
            raise EvalError(f"--only names {s!r}, which is not one of --strategies ({', '.join(strategies)})")
    return names
