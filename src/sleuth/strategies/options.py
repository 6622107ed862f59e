"""Typed options: a frozen dataclass per strategy (baselines share one), each default in one place (docs/strategies.md).

``Strategy(llm, retriever, **options)`` builds its class's ``Options``; an unknown key (with the closest valid
one named), a wrong type or a number outside its declared bounds raises :class:`OptionsError` everywhere (Python,
CLI, HTTP).  A default that follows another option (``k_stepback`` is ``k``) is ``None`` in the field and filled
in when the object is built.  :func:`parse_opts` reads ``--opt key=value``.
"""

from __future__ import annotations

import difflib
import json
import math
import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from functools import cache
from typing import Any, ClassVar, Self, Union, get_args, get_origin, get_type_hints

LANGS = ("auto", "en", "zh")
#: characters of documents one prompt may carry, by prompt language, when ``context_chars`` is not set
#: (they fit the embedded models' 2048-token window; Chinese text is denser in tokens)
CONTEXT_CHARS = {"en": 4000, "zh": 2000}
#: upper bounds of the numeric options (every number has one: a caller, over HTTP too, cannot ask a
#: search for 10^9 passages or a model for 10^9 tokens); :func:`bounds` gives them to the request schemas
MAX_K = 50
MAX_STEPS = 20
MAX_TOKENS = 4096
MAX_CHARS = 200_000
MAX_HISTORY_TOKENS = 32_768


class OptionsError(ValueError):
    """A strategy option that does not exist, or a value of the wrong type or range."""


def option(
    default: Any,
    help: str,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    choices: tuple[str, ...] = (),
    derived: str = "",
    follows: str = "",
    plus: int = 0,
) -> Any:
    """A documented option field; ``derived`` says what a ``None`` default becomes: the value of the
    earlier field ``follows`` (``+ plus``), or what ``__post_init__`` makes it."""
    if follows:
        derived = f"`{follows} + {plus}`" if plus else f"`{follows}`"
    meta = {"help": help, "min": minimum, "max": maximum, "choices": choices, "derived": derived}
    return field(default=default, metadata=meta | ({"follows": (follows, plus)} if follows else {}))


MODES = ("default", "paper")


def repair(help: str, *, on: bool = True) -> Any:
    """The switch of one repair (:mod:`sleuth.strategies.repairs`): ``None`` follows ``mode`` (on in the
    default mode when ``on``, off in the paper mode); ``true``/``false`` set it whatever the mode."""
    derived = "on in mode `default`, off in `paper`" if on else "off (opt-in, any mode)"
    return field(default=None, metadata={"help": help, "min": None, "max": None, "derived": derived, "repair": on})


@dataclass(frozen=True)
class StrategyOptions:
    """The options every strategy takes (a ``None`` default is derived in ``__post_init__``)."""

    #: tokens per LLM call when ``max_tokens`` is not given (long-form strategies raise it)
    DEFAULT_MAX_TOKENS: ClassVar[int] = 256

    lang: str = option("auto", "prompt language: `auto` (by the question), `en` or `zh`", choices=LANGS)
    k: int = option(5, "passages per search", minimum=1, maximum=MAX_K)
    max_steps: int = option(6, "follow-ups / paragraphs / searches", minimum=1, maximum=MAX_STEPS)
    max_tokens: int = option(None, "tokens per call", minimum=1, maximum=MAX_TOKENS, derived="the strategy's default")
    context_chars: int | None = option(
        None, "characters of documents per prompt", minimum=1, maximum=MAX_CHARS, derived="4000 (en) / 2000 (zh)"
    )
    rewrite: bool = option(True, "rewrite a follow-up message (with `history`) to stand alone first")
    rewrite_check: bool = option(
        True, "put the previous short answer in place of a reference the rewrite lost (no call)"
    )
    history_tokens: int = option(768, "tokens of earlier turns", minimum=16, maximum=MAX_HISTORY_TOKENS)
    mode: str = option("default", "`paper`: as published, no repair; `default`: with the repairs", choices=MODES)
    short_support: bool = repair("a short answer nothing in the run states is not returned")
    grounding: bool = repair("cite only the passages the answer rests on")
    extract_short: bool = repair("one short call reads a reply's short answer when it has no answer line")

    def __post_init__(self) -> None:
        hints = _hints(type(self))
        for f in fields(self):  # in order: a field follows one declared before it
            value = _checked(f.name, hints[f.name], getattr(self, f.name), f.metadata)
            if value is None and "follows" in f.metadata:
                value = getattr(self, f.metadata["follows"][0]) + f.metadata["follows"][1]
            elif value is None and "repair" in f.metadata:
                value = self.mode == "default" and f.metadata["repair"]
            self._set(f.name, value)
        if self.max_tokens is None:
            self._set("max_tokens", self.DEFAULT_MAX_TOKENS)

    def repairs(self) -> list[str]:
        """The names of the repairs switched on."""
        return [f.name for f in fields(self) if "repair" in f.metadata and getattr(self, f.name)]

    def _set(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)  # frozen: only while the object is being built

    def context_budget(self, lang: str) -> int:
        """Characters of documents per prompt in a run whose prompts are in ``lang``."""
        return self.context_chars or CONTEXT_CHARS.get(lang, CONTEXT_CHARS["zh"])

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    @classmethod
    def parse(cls, values: Mapping[str, Any], strategy: str = "this strategy") -> Self:
        """Build from keyword values (``-`` in a key reads as ``_``); unknown keys raise :class:`OptionsError`."""
        names = cls.names()
        given = {str(k).replace("-", "_"): v for k, v in values.items()}
        if unknown := [key for key in given if key not in names]:
            raise OptionsError(unknown_option(unknown[0], names, strategy))
        return cls(**given)

    @classmethod
    def describe(cls) -> list[dict[str, str]]:
        """One row per option: name, type, default, meaning (for docs, help and error messages)."""
        hints = _hints(cls)
        rows = []
        for f in fields(cls):
            shown = f.metadata["derived"] if f.default is None else str(f.default)
            if f.name == "max_tokens":  # the strategy's own default
                shown = str(cls.DEFAULT_MAX_TOKENS)
            kind = " | ".join(k.__name__ for k in _kinds(hints[f.name]) if k is not type(None))
            rows.append({"name": f.name, "type": kind, "default": shown, "help": f.metadata["help"]})
        return rows


@dataclass(frozen=True)
class BaselineOptions(StrategyOptions):
    """Direct, chain of thought and RAG: the common options only."""


@dataclass(frozen=True)
class SelfAskOptions(StrategyOptions):
    """Self-Ask's extraction call, prompt size and repairs."""

    extract_k: int = option(3, "top passages the extraction call reads", minimum=1, maximum=MAX_K)
    extract_max_tokens: int = option(64, "tokens of the extraction call", minimum=1, maximum=MAX_TOKENS)
    max_prompt_chars: int = option(7000, "scaffold size that forces the answer", minimum=1, maximum=MAX_CHARS)
    repeat_guard: bool = repair("a repeated follow-up is not searched again; a second one ends them")
    final_read: bool = repair("answer once more, RAG's way, from all the run's passages")


@dataclass(frozen=True)
class RATOptions(StrategyOptions):
    """RAT's passages per revision (``max_steps`` caps the paragraphs)."""

    DEFAULT_MAX_TOKENS: ClassVar[int] = 400

    n_passages: int = option(3, "passages per revision", minimum=1, maximum=MAX_K)


_RULES_CONTEXT = "`k_original`; `k_original + k_stepback` when the documents are rules"


@dataclass(frozen=True)
class StepBackOptions(StrategyOptions):
    """Step-back's per-route quotas and reranking."""

    DEFAULT_MAX_TOKENS: ClassVar[int] = 320

    k_original: int = option(None, "passages for the question", minimum=1, maximum=MAX_K, follows="k")
    k_stepback: int = option(None, "passages for the step-back question", minimum=1, maximum=MAX_K, follows="k")
    k_context: int | None = option(None, "passages shown", minimum=1, maximum=2 * MAX_K, derived=_RULES_CONTEXT)
    rrf_k: int = option(60, "the constant of reciprocal-rank fusion", minimum=0, maximum=10_000)
    documents: str = option("auto", "the answer's form", choices=("auto", "rules", "general"))
    rule_form: bool = repair("rule documents get the rule-and-clause form")
    rerank: bool = repair("the context is the pool reranked by reciprocal-rank fusion")
    abstention_reread: bool = repair("an abstaining answer over general documents is read again RAG's way")
    verdict: bool = repair("a question over rules is decided (or declined) from its deciding clause")
    verdict_clauses: int = option(3, "clauses shown to the verdict call", minimum=1, maximum=MAX_K)

    def context_size(self, rules: bool) -> int:
        """Passages shown: ``k_context``; else ``k_original``, or both quotas over rules (rule + clause)."""
        if self.k_context is not None:
            return self.k_context
        return self.k_original + self.k_stepback if rules else self.k_original


@dataclass(frozen=True)
class SearchO1Options(StrategyOptions):
    """Search-o1's limits and Reason-in-Documents call."""

    max_searches: int = option(None, "searches per question", minimum=1, maximum=MAX_STEPS, follows="max_steps")
    max_turns: int = option(None, "turns", minimum=1, maximum=MAX_STEPS + 3, follows="max_searches", plus=3)
    rid_max_tokens: int = option(160, "tokens of a Reason-in-Documents call", minimum=1, maximum=MAX_TOKENS)
    doc_chars: int = option(600, "characters of each passage it reads", minimum=1, maximum=MAX_CHARS)
    max_prompt_chars: int = option(6000, "prompt size that forces the answer", minimum=1, maximum=MAX_CHARS)
    max_refusals: int = option(2, "repeated or refused queries that force the answer", minimum=1, maximum=MAX_STEPS)
    batch_window_s: float = option(0.05, "batch mode: wait to share a search batch", minimum=0.0, maximum=600.0)
    repeat_guard: bool = repair("a repeated query is not searched again; `max_refusals` force the answer")
    final_read: bool = repair("answer once more, RAG's way, from all the run's passages", on=False)


# -- messages and checks ------------------------------------------------------------------
def unknown_option(key: str, valid: Iterable[str], strategy: str) -> str:
    """``unknown option 'k_stepbak' for step-back; did you mean 'k_stepback'? valid options: ...``"""
    names = list(dict.fromkeys(valid))
    close = difflib.get_close_matches(key, names, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ";"
    return f"unknown option {key!r} for {strategy}{hint} valid options: {', '.join(names)}"


@cache
def _hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


def _kinds(hint: Any) -> tuple[Any, ...]:
    return get_args(hint) if get_origin(hint) in (Union, types.UnionType) else (hint,)


def _checked(name: str, hint: Any, value: Any, meta: Mapping[str, Any]) -> Any:
    """``value`` as the field's type, or :class:`OptionsError` saying what the option takes."""
    kinds = _kinds(hint)
    if value is None and (type(None) in kinds or meta.get("derived")):
        return None  # no value, or one derived from other options in __post_init__
    kind = next(k for k in kinds if k is not type(None))
    lo, hi = meta.get("min"), meta.get("max")
    if kind in (int, float):
        whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
        number = isinstance(value, int | float) and not isinstance(value, bool)
        fits = number and (isinstance(value, int) or math.isfinite(value)) and (kind is float or whole)
        if not (fits and (lo is None or value >= lo) and (hi is None or value <= hi)):
            what = "a whole number" if kind is int else "a number"
            raise OptionsError(f"{name} must be {what}{_span(lo, hi)}, not {_shown(value)}")
        return kind(value)
    if kind is bool:
        if not isinstance(value, bool):
            raise OptionsError(f"{name} must be true or false, not {value!r}")
        return value
    choices: tuple[str, ...] = meta.get("choices") or ()
    if not isinstance(value, str) or (choices and value not in choices):
        allowed = f"{', '.join(choices[:-1])} or {choices[-1]}" if choices else "text"
        raise OptionsError(f"{name} must be {allowed}, not {value!r}")
    return value


def _span(lo: float | None, hi: float | None) -> str:
    """Sleuth's own options declare both bounds; a strategy written outside Sleuth may declare one."""
    if lo is not None and hi is not None:
        return f" from {lo:g} to {hi:g}"
    return f" of at least {lo:g}" if lo is not None else f" of at most {hi:g}" if hi is not None else ""


def _shown(value: Any) -> str:
    try:
        text = repr(value)
    except ValueError:  # an int past Python's digit limit for str()
        return "a number of more than 4300 digits"
    return text if len(text) <= 40 else text[:37] + "..."  # a 10^400 digit number is not echoed in full


def bounds(name: str, cls: type[StrategyOptions] = StrategyOptions) -> tuple[float | None, float | None]:
    """(minimum, maximum) of an option, as declared on its field (the request schemas use them)."""
    for f in fields(cls):
        if f.name == name:
            return f.metadata.get("min"), f.metadata.get("max")
    raise KeyError(name)


# -- --opt key=value ------------------------------------------------------------------------
def parse_opts(items: Iterable[str], where: str = "--opt") -> dict[str, Any]:
    """``--opt key=value`` items (or a spec's, ``where`` names it in errors) as a dict (``-`` in a key reads as
    ``_``): booleans (any case), ints, floats, other JSON, else the text; a later item overrides an earlier one."""
    out: dict[str, Any] = {}
    for raw in items:
        key, sep, text = raw.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key.isidentifier():
            raise OptionsError(f"{where} {raw!r} is not of the form key=value")
        out[key] = _value(text.strip())
    return out


def _value(text: str) -> Any:
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    try:
        return json.loads(text)
    except ValueError:
        return text
