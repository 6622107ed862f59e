"""Pydantic models of every request and response (they are the OpenAPI spec)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator

from sleuth.llm.base import Usage
from sleuth.search.base import Passage
from sleuth.strategies.base import BadQuestion, validate_question
from sleuth.strategies.options import bounds
from sleuth.text_input import BadText, check_tree

FiltersIn = dict[str, Any] | list[Any]  # items checked by service.parse_filters (422 naming filters[i])
#: the request fields that are strategy options take their bounds from the options' declarations
K_MIN, K_MAX = bounds("k")
STEPS_MIN, STEPS_MAX = bounds("max_steps")
TOKENS_MIN, TOKENS_MAX = bounds("max_tokens")
#: a sampling seed is a 32-bit unsigned number for every backend Sleuth talks to
SEED_MAX = 2**32 - 1
#: what each bounded request field takes, added to a 422 whose own message does not say it
FIELD_LIMITS = {
    "k": f"a whole number from {K_MIN:g} to {K_MAX:g}",
    "max_steps": f"a whole number from {STEPS_MIN:g} to {STEPS_MAX:g}",
    "max_tokens": f"a whole number from {TOKENS_MIN:g} to {TOKENS_MAX:g}",
    "max_completion_tokens": f"a whole number from {TOKENS_MIN:g} to {TOKENS_MAX:g}",
    "seed": f"a whole number from 0 to {SEED_MAX}",
    "temperature": "a number from 0 to 2",
}

FILTERS_DOC = (
    'Narrows the caller\'s scope (never widens it; asking for more gets 403): a list of expressions (["acl=all", '
    '"version=2025", "year>=2001"]), a mapping of field to value(s) ({"acl": ["all"], "version": "2025"}) '
    'or the canonical form {"equals": {...}, "ranges": {...}, "acl": [...]}. Omitted: the whole scope of the '
    "caller's key or token."
)

OPTIONS_DOC = (
    'The strategy\'s own options, e.g. {"k_stepback": 3} for step-back (docs/strategies.md lists each '
    "strategy's); an unknown one is refused with 422 naming the valid ones. k, max_steps, max_tokens and lang "
    "are fields of the request itself."
)


# -- errors -------------------------------------------------------------------
class ErrorBody(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None
    trace_id: str | None = None


class ErrorResponse(BaseModel):
    """Every error, in the OpenAI shape (so OpenAI SDKs show the message)."""

    error: ErrorBody


# -- results ------------------------------------------------------------------
class EventOut(BaseModel):
    kind: str = Field(
        description="start, llm, search, follow_up, intermediate_answer, draft, revision, step_back, "
        "reason_in_documents, note, answer or error"
    )
    data: dict[str, Any] = {}
    t: float = Field(0.0, description="seconds since the run started")
    duration_s: float = 0.0


class AskResult(BaseModel):
    """The same shape for every strategy; ``id`` is the trace id."""

    id: str
    question: str
    strategy: str
    answer: str
    short_answer: str
    citations: list[Passage]  # the dataclasses themselves: the schema is what the result holds
    finish_reason: str = Field(
        description="finished, step_limit, repeat_limit, llm_unavailable, search_unavailable, bad_input, error, timeout, ..."
    )
    usage: Usage
    llm_calls: int
    searches: int
    llm_seconds: float
    search_seconds: float
    elapsed_s: float
    model: str
    lang: str
    error: str
    trace: list[EventOut]


# -- /v1/ask --------------------------------------------------------------------
class ModelOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str | None = Field(None, description="a model the server allows (GET /v1/models lists the default)")
    k: int | None = Field(None, ge=K_MIN, le=K_MAX, description="passages per search")
    max_steps: int | None = Field(None, ge=STEPS_MIN, le=STEPS_MAX)
    max_tokens: int | None = Field(None, ge=TOKENS_MIN, le=TOKENS_MAX, description="per LLM call")
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    seed: int | None = Field(None, ge=0, le=SEED_MAX)
    lang: Literal["auto", "en", "zh"] | None = None

    _check_model = field_validator("model")(classmethod(lambda cls, v: _text(v)))


def _question(v: Any) -> str:
    try:
        return validate_question(v)
    except BadQuestion as e:
        raise ValueError(str(e)) from None


def _text(v: Any) -> Any:
    """A name or a scope, checked by :mod:`sleuth.text_input` (the error's location names the field)."""
    try:
        return v if v is None else check_tree(v, "")
    except BadText as e:
        where = e.field.strip(". ")
        raise ValueError(f"{where} {e.reason}" if where else e.reason) from None


class HistoryTurn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["user", "assistant"]
    content: str


HISTORY_DOC = (
    "the conversation's earlier turns, oldest first: the question is first rewritten to stand alone from them "
    "(one short LLM call; option `rewrite: false` turns it off). History never changes the scope."
)


def _history(v: Any) -> Any:
    from sleuth.strategies.conversation import BadHistory, parse_history

    if v is None:
        return v
    try:
        parse_history(v)
    except BadHistory as e:
        raise ValueError(str(e)) from None
    return v


MODE_DOC = (
    "`paper`: the strategy exactly as published, no repair; `default`: the paper's method and the repairs that "
    "earned their place (docs/strategies.md, Repairs); the same as the option `mode`"
)


class AskRequest(ModelOptions):
    question: str = Field(description="1 to 4000 characters of text")
    mode: Literal["default", "paper"] | None = Field(None, description=MODE_DOC)
    history: list[HistoryTurn] | None = Field(None, description=HISTORY_DOC)
    strategy: str | None = Field(None, description="direct, cot, rag, self-ask, rat, step-back, search-o1 ...")
    index: str | None = Field(
        None,
        validation_alias=AliasChoices("index", "source"),
        description="a source name from GET /v1/sources (default: the first)",
    )
    filters: FiltersIn | None = Field(None, description=FILTERS_DOC)
    options: dict[str, Any] | None = Field(None, description=OPTIONS_DOC)
    stream: bool = Field(False, description="answer with Server-Sent Events: step events, then one result event")

    _check_question = field_validator("question", mode="before")(classmethod(lambda cls, v: _question(v)))
    _check_history = field_validator("history", mode="before")(classmethod(lambda cls, v: _history(v)))
    _check_text = field_validator("strategy", "index", "filters")(classmethod(lambda cls, v: _text(v)))


# -- metadata -----------------------------------------------------------------------
class StrategyInfo(BaseModel):
    name: str
    model: str = Field(description="the model name that selects it on /v1/chat/completions")
    description: str = ""
    needs_retriever: bool = False


class StrategyList(BaseModel):
    default: str
    strategies: list[StrategyInfo]


class SourceInfo(BaseModel):
    name: str
    kind: str = ""
    default: bool = False
    quickstart: bool = Field(
        False, description="The bundled quick-start corpus (Wikipedia passages), served because no --index was given"
    )
    note: str = Field("", description="A sentence about the source to show beside it (empty: none)")
    lang: str = Field("", description="the language of its documents: en, zh, or '' when unknown")


class SourceList(BaseModel):
    sources: list[SourceInfo]


class Health(BaseModel):
    status: Literal["ok", "starting", "degraded"]
    version: str
    model: str
    active: int
    max_concurrency: int
    errors: list[str] = []


# -- OpenAI protocol ----------------------------------------------------------------
class ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str
    text: str | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str
    content: str | list[ContentPart] | None = None

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        if not self.content:
            return ""
        return "\n".join(p.text for p in self.content if p.type == "text" and p.text)


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: bool = False


class ChatRequest(BaseModel):
    """OpenAI's chat request; ``model`` picks the strategy (``sleuth-self-ask``; ``sleuth-self-ask-paper``
    runs it in the paper mode).  Unknown OpenAI parameters are accepted and ignored; Sleuth's own extras are
    ``filters``, ``index``, ``k``, ``max_steps``, ``mode``, ``options``."""

    model_config = ConfigDict(extra="allow")

    model: str
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    max_tokens: int | None = Field(None, ge=TOKENS_MIN, le=TOKENS_MAX)
    max_completion_tokens: int | None = Field(None, ge=TOKENS_MIN, le=TOKENS_MAX)
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    seed: int | None = Field(None, ge=0, le=SEED_MAX)
    user: str | None = None
    filters: FiltersIn | None = Field(None, description=FILTERS_DOC)
    index: str | None = None
    k: int | None = Field(None, ge=K_MIN, le=K_MAX)
    max_steps: int | None = Field(None, ge=STEPS_MIN, le=STEPS_MAX)
    mode: Literal["default", "paper"] | None = Field(None, description=MODE_DOC + "; a model name ending in -paper")
    options: dict[str, Any] | None = Field(None, description=OPTIONS_DOC)

    _check_text = field_validator("model", "index", "filters")(classmethod(lambda cls, v: _text(v)))


class Citation(BaseModel):
    n: int = Field(description="the number used in the message content ([1], [2], ...)")
    id: str
    doc_id: str = ""
    title: str = ""
    source: str = ""
    section: str = ""
    version: str = ""
    url: str = ""
    text: str = ""


class SleuthExtra(BaseModel):
    citations: list[Citation]
    trace_id: str
    finish_reason: str
    strategy: str


class ChatAnswer(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str
    reasoning_content: str | None = Field(None, description="the reasoning steps, one per line")


class ChatChoice(BaseModel):
    index: int = 0
    message: ChatAnswer
    finish_reason: Literal["stop", "length"]
    logprobs: None = None


class ChatUsage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[ChatChoice]
    usage: ChatUsage
    sleuth: SleuthExtra


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "sleuth"


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]
