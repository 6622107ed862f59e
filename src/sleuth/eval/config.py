"""What defines an evaluation run (:class:`EvalConfig`) and the checks of its arguments.

The checks run before anything is read or started, so a mistake in the command line
(an unknown strategy, a non-positive limit) is one sentence, not a traceback.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

from sleuth.eval.corpus import RetrievalPlan
from sleuth.eval.datasets import Dataset

SETTINGS = ("open", "distractor", "closed")


class EvalError(ValueError):
    """A mistake in the run's arguments (the CLI turns it into a UserError)."""


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
    corpus: str | None = None  # a corpus file to pool instead of the dataset's own paragraphs
    gap: bool = False  # also run every decomposition hop (compositionality gap)
    strategy_options: dict[str, Any] = field(default_factory=dict)
    prices: str | None = None
    concurrency: int = 1
    executor: str = "local"
    retry_failed: bool = False
    redo_stale: bool = False  # rerun stale records: other code (sleuth.eval.fingerprint) or reworded question
    # wipe the embedded server's KV cache before each task, so an answer does not depend on
    # the tasks before it (None: yes when one task runs at a time; see isolated_tasks())
    isolate: bool | None = None
    llm_cache: bool = True  # Sleuth's response cache (a rerun then costs no model time)
    # a sitting: once this many seconds have passed, start no new question (a composed question
    # and its hops count as one) and stop when the started one is written; the same command resumes
    time_limit: float | None = None
    command: str = ""

    def isolated_tasks(self) -> bool:
        """Whether tasks are isolated: only possible one at a time (concurrent tasks share slots)."""
        return self.concurrency == 1 and (self.isolate if self.isolate is not None else True)

    def settings(self, dataset: Dataset, plan: RetrievalPlan) -> dict[str, Any]:
        return {
            "format": dataset.format,
            "setting": plan.setting,
            "strategies": list(self.strategies),
            "limit": self.limit,
            "seed": self.seed,
            "k": self.k,
            "max_steps": self.max_steps,
            "max_tokens": self.max_tokens,
            "model": self.model or "default",
            "index": plan.describe(),
            "gap": self.gap,
            "strategy_options": dict(sorted(self.strategy_options.items())),
        }


def resolve_strategy_class(name: str) -> type | None:
    """``module:Class`` names a Strategy subclass outside Sleuth (plugins, tests)."""
    if ":" not in name:
        return None
    mod, _, cls = name.partition(":")
    try:
        obj = getattr(importlib.import_module(mod), cls)
    except (ImportError, AttributeError) as e:
        raise EvalError(f"cannot import strategy {name!r}: {e}") from e
    from sleuth.strategies.base import Strategy

    if not (isinstance(obj, type) and issubclass(obj, Strategy)):
        raise EvalError(f"{name!r} is not a Strategy subclass")
    return obj


def validate(cfg: EvalConfig) -> None:
    """Check ``cfg`` (raises :class:`EvalError`) and replace its strategy aliases by their names."""
    if not cfg.strategies:
        raise EvalError("give at least one strategy with --strategies")
    if cfg.limit is not None and cfg.limit < 1:
        raise EvalError("--limit must be at least 1")
    if cfg.concurrency < 1:
        raise EvalError("--concurrency must be at least 1")
    if cfg.k < 1:
        raise EvalError("--k must be at least 1")
    if cfg.time_limit is not None and not cfg.time_limit > 0:
        raise EvalError("--time-limit must be a positive duration")
    if cfg.setting is not None and cfg.setting not in SETTINGS:
        raise EvalError(f"--setting must be one of {', '.join(SETTINGS)}")
    names = []
    for s in cfg.strategies:
        if ":" in s:
            resolve_strategy_class(s)
            names.append(s)
            continue
        try:
            from sleuth.strategies import resolve_name
        except ImportError as e:
            raise EvalError(f"the built-in strategies cannot be loaded ({e})") from e
        try:
            names.append(resolve_name(s))
        except ValueError as e:
            raise EvalError(str(e)) from e
    if len(set(names)) != len(names):
        raise EvalError("a strategy is listed twice in --strategies")
    cfg.strategies = names
