"""Reasoning strategies: each returns a :class:`~sleuth.strategies.base.Result`.

>>> from sleuth.llm import get_llm
>>> from sleuth.search import open_retriever
>>> from sleuth.strategies import get_strategy
>>> s = get_strategy("self-ask", get_llm(), open_retriever("path/to/index"))
>>> result = s.run("Who was the father of the director of Jaws?")
>>> result.short_answer, [p.id for p in result.citations]
"""

from __future__ import annotations

from typing import Any

from sleuth.search.base import Retriever
from sleuth.strategies.base import (
    BAD_INPUT,
    ERROR,
    FINISHED,
    LLM_UNAVAILABLE,
    SEARCH_UNAVAILABLE,
    STEP_LIMIT,
    BadQuestion,
    Event,
    Result,
    RunState,
    Strategy,
    Trace,
)
from sleuth.strategies.cot import ChainOfThought
from sleuth.strategies.direct import Direct
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
    """No strategy of that name."""


def resolve_name(name: str) -> str:
    key = (name or "").strip().lower()
    key = _ALIASES.get(key, key)
    if key not in STRATEGIES:
        raise UnknownStrategy(f"unknown strategy {name!r}; choose one of: {', '.join(STRATEGIES)}")
    return key


def get_strategy(name: str, llm: Any, retriever: Retriever | None = None, **opts: Any) -> Strategy:
    """Build a strategy by name (``direct``, ``cot``, ``rag``, ``self-ask``, ``rat``,
    ``step-back``, ``search-o1``; ``self_ask``/``selfask`` also accepted).

    ``opts``: ``lang`` ("auto" | "en" | "zh"), ``k``, ``max_steps``,
    ``max_tokens`` and strategy-specific options (see each class).
    """
    return STRATEGIES[resolve_name(name)](llm, retriever, **opts)


__all__ = [
    "BAD_INPUT",
    "ERROR",
    "FINISHED",
    "LLM_UNAVAILABLE",
    "RAG",
    "RAT",
    "SEARCH_UNAVAILABLE",
    "STEP_LIMIT",
    "STRATEGIES",
    "BadQuestion",
    "ChainOfThought",
    "Direct",
    "Event",
    "Result",
    "RunState",
    "SearchO1",
    "SelfAsk",
    "StepBack",
    "Strategy",
    "Trace",
    "UnknownStrategy",
    "get_strategy",
    "resolve_name",
]
