"""The one protocol every LLM backend speaks: ``complete`` and ``chat`` with :class:`GenParams`, returning a
:class:`Completion` with usage and latency.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Protocol, runtime_checkable

Message = dict[str, str]  # {"role": "system"|"user"|"assistant", "content": "..."}


def prompt_chars(prompt: str | Sequence[Message]) -> int:
    """The characters a prompt sends: a completion's text, or a chat's message contents."""
    return len(prompt) if isinstance(prompt, str) else sum(len(m["content"]) for m in prompt)


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
        return Usage(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

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
        return asdict(self)  # the usage too, as a dict


@dataclass(frozen=True)
class GenParams:
    """Sampling parameters of one call; a field left ``None`` takes the backend's default.

    ``stop`` accepts any sequence of strings (kept as a tuple); a lone string is
    one stop sequence, not a list of characters.  ``schema``: a JSON schema the reply must follow
    (structured output, sent as OpenAI's ``response_format``; docs/llm.md).  The client's own defaults are
    :data:`DEFAULT_PARAMS` overlaid with its ``defaults=``.
    """

    max_tokens: int | None = None
    temperature: float | None = None
    stop: tuple[str, ...] | None = None
    seed: int | None = None
    schema: dict[str, Any] | None = field(default=None, hash=False)

    def __post_init__(self) -> None:
        stop: Any = self.stop
        if isinstance(stop, str):
            object.__setattr__(self, "stop", (stop,))
        elif stop is not None and not isinstance(stop, tuple):
            object.__setattr__(self, "stop", tuple(stop))

    def with_(self, **kw: Any) -> GenParams:
        """A copy with the fields of ``kw`` that are not ``None`` replaced."""
        return replace(self, **{k: v for k, v in kw.items() if v is not None})

    def over(self, base: GenParams) -> GenParams:
        """These parameters where set, ``base``'s elsewhere."""
        return base.with_(**{f.name: getattr(self, f.name) for f in fields(self)})


#: what a call gets for every parameter that neither it nor the client's defaults set
DEFAULT_PARAMS = GenParams(max_tokens=256, temperature=0.0, stop=(), seed=0)

#: called with each text piece of a streamed answer (already cut at the stop strings)
OnDelta = Callable[[str], None]


@runtime_checkable
class LLM(Protocol):
    """What strategies need from a model: a completion and a chat call.

    ``params`` (``None``: all defaults) are the sampling parameters.  With
    ``on_delta`` the backend streams the answer and calls ``on_delta`` with each
    text piece as it arrives; the call still returns the whole :class:`Completion`.
    """

    model: str

    def complete(
        self, prompt: str, params: GenParams | None = None, *, on_delta: OnDelta | None = None
    ) -> Completion: ...

    def chat(
        self, messages: Sequence[Message], params: GenParams | None = None, *, on_delta: OnDelta | None = None
    ) -> Completion: ...
