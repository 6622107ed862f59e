"""Reasoning strategies: each returns a :class:`~sleuth.strategies.result.Result`.

>>> from sleuth.llm import get_llm
>>> from sleuth.search import open_retriever
>>> from sleuth.strategies import get_strategy
>>> s = get_strategy("self-ask", get_llm(), open_retriever("path/to/index"))
>>> result = s.run("Who was the father of the director of Jaws?")
>>> result.short_answer, [p.id for p in result.citations]
"""

from __future__ import annotations

from sleuth.strategies.base import BadQuestion, RunState, Strategy
from sleuth.strategies.cot import ChainOfThought
from sleuth.strategies.direct import Direct
from sleuth.strategies.options import OptionsError, StrategyOptions, parse_opts
from sleuth.strategies.rag import RAG
from sleuth.strategies.rat import RAT
from sleuth.strategies.registry import (
    STRATEGIES,
    UnknownStrategy,
    build_strategy,
    get_strategy,
    resolve_name,
    resolve_strategy_class,
    strategy_class,
)
from sleuth.strategies.result import (
    BAD_INPUT,
    ERROR,
    FINISHED,
    LLM_UNAVAILABLE,
    REPEAT_LIMIT,
    SEARCH_UNAVAILABLE,
    STEP_LIMIT,
    Event,
    Result,
    Trace,
)
from sleuth.strategies.search_o1 import SearchO1
from sleuth.strategies.self_ask import SelfAsk
from sleuth.strategies.step_back import StepBack

__all__ = ["BAD_INPUT", "ERROR", "FINISHED", "LLM_UNAVAILABLE", "RAG", "RAT", "REPEAT_LIMIT", "SEARCH_UNAVAILABLE"]
__all__ += ["STEP_LIMIT", "STRATEGIES", "BadQuestion", "ChainOfThought", "Direct", "Event", "OptionsError", "Result"]
__all__ += ["RunState", "SearchO1", "SelfAsk", "StepBack", "Strategy", "StrategyOptions", "Trace", "UnknownStrategy"]
__all__ += ["build_strategy", "get_strategy", "parse_opts", "resolve_name", "resolve_strategy_class", "strategy_class"]
