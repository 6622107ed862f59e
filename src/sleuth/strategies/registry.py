"""The strategies by name, ``module:Class`` specs for strategies defined elsewhere, and
building one with options that are checked before anything runs."""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any

from sleuth.search.base import Retriever
from sleuth.strategies.base import Strategy
from sleuth.strategies.cot import ChainOfThought
from sleuth.strategies.direct import Direct
from sleuth.strategies.options import OptionsError, StrategyOptions, unknown_option
from sleuth.strategies.rag import RAG
from sleuth.strategies.rat import RAT
from sleuth.strategies.search_o1 import SearchO1
from sleuth.strategies.self_ask import SelfAsk
from sleuth.strategies.step_back import StepBack

STRATEGIES: dict[str, type[Strategy]] = {
    "direct": Direct,
    "cot": ChainOfThought,
    "rag": RAG,
    "self-ask": SelfAsk,
    "rat": RAT,
    "step-back": StepBack,
    "search-o1": SearchO1,
}

_ALIASES = {n.replace("-", "_"): n for n in STRATEGIES} | {n.replace("-", ""): n for n in STRATEGIES}


class UnknownStrategy(ValueError):
    """No strategy of that name (or a ``module:Class`` spec that names no Strategy)."""


def resolve_name(name: str) -> str:
    key = (name or "").strip().lower()
    key = _ALIASES.get(key, key)
    if key not in STRATEGIES:
        raise UnknownStrategy(f"unknown strategy {name!r}; choose one of: {', '.join(STRATEGIES)}")
    return key


def resolve_strategy_class(name: str) -> type[Strategy] | None:
    """``module:Class`` names a Strategy subclass outside Sleuth (plugins, tests); other names give None."""
    if ":" not in name:
        return None
    mod, _, cls = name.partition(":")
    try:
        obj = getattr(importlib.import_module(mod), cls)
    except (ImportError, AttributeError) as e:
        raise UnknownStrategy(f"cannot import strategy {name!r}: {e}") from e
    if not (isinstance(obj, type) and issubclass(obj, Strategy)):
        raise UnknownStrategy(f"{name!r} is not a Strategy subclass")
    return obj


def strategy_class(spec: str) -> type[Strategy]:
    """The class of a built-in name (any spelling ``resolve_name`` accepts) or a ``module:Class`` spec."""
    return resolve_strategy_class(spec) or STRATEGIES[resolve_name(spec)]


def get_strategy(name: str, llm: Any, retriever: Retriever | None = None, **opts: Any) -> Strategy:
    """Build a strategy by name (any spelling :func:`resolve_name` accepts) with its options (its ``Options``
    class, listed in docs/strategies.md); an unknown option or a bad value raises :class:`OptionsError`."""
    return STRATEGIES[resolve_name(name)](llm, retriever, **opts)


# -- options shared by the strategies of an evaluation run ---------------------------------
def options_for(cls: type[Strategy], options: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a run's options that ``cls`` takes (every strategy of a run gets the same ``--opt`` list)."""
    names = set(cls.Options.names())
    return {k: v for k, v in options.items() if k.replace("-", "_") in names}


def check_run_options(specs: Sequence[str], options: Mapping[str, Any]) -> dict[str, StrategyOptions]:
    """Check a run's options before anything runs: each key must belong to at least one of the
    run's strategies, and each strategy must accept the values of its own; returns each one's options."""
    classes = {spec: strategy_class(spec) for spec in specs}
    valid = [n for cls in classes.values() for n in cls.Options.names()]
    for key in options:
        if key.replace("-", "_") not in valid:
            raise OptionsError(unknown_option(key, valid, ", ".join(specs) or "these strategies"))
    return {spec: cls.Options.parse(options_for(cls, options), strategy=spec) for spec, cls in classes.items()}


def build_strategy(spec: str, llm: Any, retriever: Retriever | None, options: Mapping[str, Any]) -> Strategy:
    """A strategy from a name or ``module:Class`` spec, given the run-wide options it takes."""
    cls = strategy_class(spec)
    return cls(llm, retriever, **options_for(cls, options))
