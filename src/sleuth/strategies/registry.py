"""The strategies by name, ``module:Class`` specs for strategies defined elsewhere, and
building one with options that are checked before anything runs."""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from sleuth.search.base import Retriever
from sleuth.strategies.base import Strategy
from sleuth.strategies.cot import ChainOfThought
from sleuth.strategies.direct import Direct
from sleuth.strategies.options import OptionsError, StrategyOptions, parse_opts, unknown_option
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
    key = _ALIASES.get(k := (name or "").strip().lower(), k)
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


def split_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """``self-ask[mode=paper,final_read=false]``: Self-Ask with its own options (read as ``--opt`` reads them)."""
    if not (m := re.fullmatch(r"([^\[\]]+)(?:\[([^\[\]]*)\])?", spec)):
        raise UnknownStrategy(f"{spec!r}: a strategy's own options are written name[key=value,...]")
    return m[1].strip(), parse_opts((x for x in (m[2] or "").split(",") if x.strip()), f"{spec!r}:")


def strategy_class(spec: str) -> type[Strategy]:
    """The class of a built-in name (any spelling ``resolve_name`` accepts) or a ``module:Class`` spec, and options."""
    return resolve_strategy_class(name := split_spec(spec)[0]) or STRATEGIES[resolve_name(name)]


def get_strategy(name: str, llm: Any, retriever: Retriever | None = None, **opts: Any) -> Strategy:
    """Build a strategy by name (any spelling :func:`resolve_name` accepts) with its options (its ``Options``
    class, listed in docs/strategies.md); an unknown option or a bad value raises :class:`OptionsError`."""
    return STRATEGIES[resolve_name(name)](llm, retriever, **opts)


# -- options shared by the strategies of an evaluation run ---------------------------------
def options_for(cls: type[Strategy], options: Mapping[str, Any], spec: str = "") -> dict[str, Any]:
    """The part of a run's options (the same ``--opt`` list for all) that ``cls`` takes, then ``spec``'s own."""
    names = set(cls.Options.names())
    return {**{k: v for k, v in options.items() if k.replace("-", "_") in names}, **split_spec(spec)[1]}


def check_run_options(specs: Sequence[str], options: Mapping[str, Any]) -> dict[str, StrategyOptions]:
    """Check a run's options before anything runs: each key must belong to at least one of the
    run's strategies, and each strategy must accept the values of its own; returns each one's options."""
    classes = {spec: strategy_class(spec) for spec in specs}
    valid = [n for cls in classes.values() for n in cls.Options.names()]
    for key in options:
        if key.replace("-", "_") not in valid:
            raise OptionsError(unknown_option(key, valid, ", ".join(specs) or "these strategies"))
    return {spec: cls.Options.parse(options_for(cls, options, spec), strategy=spec) for spec, cls in classes.items()}


def build_strategy(spec: str, llm: Any, retriever: Retriever | None, options: Mapping[str, Any]) -> Strategy:
    """A strategy from a name or ``module:Class`` spec, given the run-wide options it takes and its own."""
    return (cls := strategy_class(spec))(llm, retriever, **options_for(cls, options, spec))
