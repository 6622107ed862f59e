"""The one protocol every LLM backend speaks.

A backend offers raw text completion and chat, sync and async, streaming, with
``stop`` / ``max_tokens`` / ``temperature`` / ``seed`` on every call.  Every call
returns a :class:`Completion` that carries token usage and latency so that
strategies can record them in their traces.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

Message = dict[str, str]  # {"role": "system"|"user"|"assistant", "content": "..."}


class LLMError(RuntimeError):
    """Base class of every error the LLM layer raises.

    ``reason`` is a short machine-readable tag that strategies copy into their
    finish reason (e.g. ``llm_unavailable``).
    """

    reason = "llm_error"

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class LLMUnavailable(LLMError):
    """The backend cannot be reached or keeps failing after retries."""

    reason = "llm_unavailable"


class LLMTimeout(LLMUnavailable):
    """A call ran past its timeout (after retries)."""

    reason = "llm_timeout"


class LLMAuthError(LLMError):
    """Missing or rejected API key: never retried."""

    reason = "llm_auth"


class LLMBadRequest(LLMError):
    """The server rejected the request (4xx other than 401/403/408/429)."""

    reason = "llm_bad_request"


class LLMBadResponse(LLMError):
    """The server answered with something that is not a valid completion."""

    reason = "llm_bad_response"


@dataclass
class Usage:
    """Token accounting of one call (or a sum of calls)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: prompt tokens the server reports as served from its prompt/prefix cache
    cached_prompt_tokens: int = 0
    #: prompt tokens actually evaluated (``prompt_tokens - cached``), when known
    processed_prompt_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.cached_prompt_tokens + other.cached_prompt_tokens,
            self.processed_prompt_tokens + other.processed_prompt_tokens,
        )

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass
class Completion:
    """The result of one LLM call."""

    text: str
    finish_reason: str = "stop"  # "stop" | "length" | "error" | backend-specific
    usage: Usage = field(default_factory=Usage)
    latency_s: float = 0.0
    model: str = ""
    #: True when the answer came from Sleuth's response cache (no server call)
    from_cache: bool = False

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["usage"] = self.usage.to_dict()
        return d


@dataclass(frozen=True)
class GenParams:
    """Sampling parameters shared by every call."""

    max_tokens: int = 256
    temperature: float = 0.0
    stop: tuple[str, ...] = ()
    seed: int | None = 0

    def with_(self, **kw: Any) -> GenParams:
        d = asdict(self)
        d.update({k: v for k, v in kw.items() if v is not None})
        if d.get("stop") is not None:
            d["stop"] = tuple(d["stop"])
        return GenParams(**d)


@runtime_checkable
class LLM(Protocol):
    """What strategies need from a model."""

    model: str

    def complete(
        self,
        prompt: str,
        *,
        stop: Sequence[str] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        seed: int | None = None,
    ) -> Completion: ...

    def chat(
        self,
        messages: Sequence[Message],
        *,
        stop: Sequence[str] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        seed: int | None = None,
    ) -> Completion: ...

    async def acomplete(
        self,
        prompt: str,
        *,
        stop: Sequence[str] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        seed: int | None = None,
    ) -> Completion: ...

    async def achat(
        self,
        messages: Sequence[Message],
        *,
        stop: Sequence[str] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        seed: int | None = None,
    ) -> Completion: ...

    def stream_complete(
        self,
        prompt: str,
        *,
        stop: Sequence[str] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        seed: int | None = None,
    ) -> Iterator[str]: ...

    def stream_chat(
        self,
        messages: Sequence[Message],
        *,
        stop: Sequence[str] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        seed: int | None = None,
    ) -> Iterator[str]: ...

    def astream_chat(
        self,
        messages: Sequence[Message],
        *,
        stop: Sequence[str] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        seed: int | None = None,
    ) -> AsyncIterator[str]: ...


def cut_at_stop(text: str, stop: Sequence[str] | None) -> tuple[str, bool]:
    """Cut ``text`` at the earliest stop string.

    Some servers ignore ``stop``; cutting client-side makes every backend
    behave the same.  Returns the text and whether a cut happened.
    """
    if not stop:
        return text, False
    cut = len(text)
    for s in stop:
        if not s:
            continue
        i = text.find(s)
        if i != -1 and i < cut:
            cut = i
    return text[:cut], cut < len(text)
