"""The LLM's settings: backend, key and client behaviour, read through :data:`sleuth.config.settings`
(environment, then ``.env``); an explicit argument always wins.  The variables are listed in docs/llm.md.
API keys are never logged or included in ``repr``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from urllib.parse import urlparse

from sleuth.config import settings
from sleuth.llm.base import LLMAuthError, LLMBadRequest
from sleuth.llm.limits import RateLimits
from sleuth.llm.models import DEFAULT_MODEL, MODELS
from sleuth.llm.urls import usable_url


def threads(override: int | None = None) -> int:
    """Threads for the embedded engine: argument > ``$SLEUTH_THREADS`` > ``min(2, cpus)``."""
    if override is not None and override > 0:
        return int(override)
    n = settings.integer("SLEUTH_THREADS", None)
    if n is not None and n > 0:
        return n
    return max(1, min(2, os.cpu_count() or 1))


def default_model() -> str:
    """The embedded model when none is named: ``$SLEUTH_MODEL`` or :data:`DEFAULT_MODEL`."""
    return settings.get("SLEUTH_MODEL") or DEFAULT_MODEL


def embedded_mode(override: str | None = None) -> str:
    """How the embedded engine runs: argument > ``$SLEUTH_EMBEDDED_MODE`` > ``subprocess``
    (docs/llm.md says why)."""
    return (override or settings.get("SLEUTH_EMBEDDED_MODE") or "subprocess").lower()


def ctx_size(override: int | None, default: int) -> int:
    """Context tokens per embedded slot: argument > ``$SLEUTH_CTX_SIZE`` > ``default``."""
    return override or settings.integer("SLEUTH_CTX_SIZE", default) or default


def max_retries(override: int | None) -> int | None:
    """Retries per call: argument > ``$SLEUTH_LLM_MAX_RETRIES`` > 3."""
    return override if override is not None else settings.integer("SLEUTH_LLM_MAX_RETRIES", 3)


def timeout(override: float | None, *, embedded: bool) -> float:
    """Per-attempt timeout: argument > ``$SLEUTH_LLM_TIMEOUT`` > 600 s embedded, 120 s remote."""
    default = 600.0 if embedded else 120.0
    return override if override is not None else settings.number("SLEUTH_LLM_TIMEOUT", default) or default


def rate_limits(
    requests_per_min: float | None, tokens_per_min: float | None, max_concurrency: int | None
) -> RateLimits:
    """Client-side limits: arguments > ``$SLEUTH_LLM_RPM`` / ``_TPM`` / ``_MAX_CONCURRENCY``."""
    return RateLimits(
        requests_per_min if requests_per_min is not None else settings.number("SLEUTH_LLM_RPM", None),
        tokens_per_min if tokens_per_min is not None else settings.number("SLEUTH_LLM_TPM", None),
        max_concurrency if max_concurrency is not None else settings.integer("SLEUTH_LLM_MAX_CONCURRENCY", None),
    )


def response_cache() -> bool:
    """Whether Sleuth's response cache is on (``$SLEUTH_LLM_CACHE``, default on)."""
    return settings.flag("SLEUTH_LLM_CACHE")


@dataclass(frozen=True)
class Provider:
    """A well-known OpenAI-compatible service."""

    name: str
    base_url: str
    key_vars: tuple[str, ...]
    default_model: str
    hosts: tuple[str, ...]


PROVIDERS: dict[str, Provider] = {
    "openai": Provider("openai", "https://api.openai.com/v1", ("OPENAI_API_KEY",), "gpt-4o-mini", ("api.openai.com",)),
    "qwen": Provider(
        "qwen",
        "https://dashscope.aliyuncs.com/compatible-mode/v1",
        ("QWEN_API_KEY", "DASHSCOPE_API_KEY"),
        "qwen-plus",
        ("dashscope.aliyuncs.com", "dashscope-intl.aliyuncs.com"),
    ),
    "deepseek": Provider(
        "deepseek", "https://api.deepseek.com/v1", ("DEEPSEEK_API_KEY",), "deepseek-chat", ("api.deepseek.com",)
    ),
}
PROVIDERS["dashscope"] = PROVIDERS["qwen"]


def _provider_for_url(url: str) -> Provider | None:
    host = (urlparse(url).hostname or "").lower()
    for p in PROVIDERS.values():
        if any(host == h or host.endswith("." + h) for h in p.hosts):
            return p
    return None


def _is_local(url: str) -> bool:
    host = (urlparse(url).hostname or "").lower()
    return host in {"localhost", "127.0.0.1", "::1", "0.0.0.0"} or host.endswith(".local")


def _check_url(url: str, source: str) -> str:
    """A usable ``http(s)://host[:port][/path]``, or one clear sentence (``LLMBadRequest``)."""
    u = url.strip().rstrip("/")
    where = "the base_url argument / --base-url" if source == "argument" else source
    if not usable_url(u):
        raise LLMBadRequest(
            f"Invalid LLM base URL {url!r} (from {where}): expected http(s)://host[:port][/v1]; "
            "check SLEUTH_LLM_BASE_URL or --base-url."
        )
    return u


@dataclass(frozen=True)
class LLMSettings:
    """The resolved backend choice.

    ``base_url`` is ``None`` when no remote/local server is configured: the
    embedded model ``embedded_model`` is used then.
    """

    base_url: str | None
    model: str
    api_key: str | None = field(default=None, repr=False)
    provider: str | None = None
    #: where base_url came from (argument, SLEUTH_LLM_BASE_URL, ...): for messages
    source: str = "default"
    embedded_model: str | None = None

    @property
    def embedded(self) -> bool:
        return self.base_url is None

    def __repr__(self) -> str:  # never show the key
        key = "set" if self.api_key else "none"
        return (
            f"LLMSettings(base_url={self.base_url!r}, model={self.model!r}, api_key=<{key}>, "
            f"provider={self.provider!r}, source={self.source!r}, embedded_model={self.embedded_model!r})"
        )


def resolve_llm_settings(
    model: str | None = None,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
) -> LLMSettings:
    """Decide which backend to talk to; ``model`` may carry a provider prefix (``openai:``, ``qwen:``/``dashscope:``,
    ``deepseek:``, ``embedded:``), else names an embedded model when no base URL is configured.

    Raises :class:`LLMAuthError` (one sentence) when a known cloud provider has no key.
    """
    env = settings.get
    provider: Provider | None = None
    source = "argument"
    if model and ":" in model and not model.startswith(("http://", "https://")):
        prefix, rest = model.split(":", 1)
        if prefix.lower() == "embedded":
            name = rest or default_model()
            return LLMSettings(None, name, None, None, "argument", name)
        if prefix.lower() in PROVIDERS:
            provider = PROVIDERS[prefix.lower()]
            model = rest or provider.default_model
            if base_url is None:
                base_url = provider.base_url
                source = f"model prefix {prefix}:"

    if base_url is None and not (model and model in MODELS):
        for var in ("SLEUTH_LLM_BASE_URL", "OPENAI_BASE_URL", "QWEN_BASE_URL"):
            v = env(var)
            if v:
                base_url, source = v, var
                break

    if base_url is None:
        name = model or default_model()
        return LLMSettings(None, name, None, None, "embedded", name)

    base_url = _check_url(base_url, source)
    if provider is None:
        provider = _provider_for_url(base_url)

    key = api_key if api_key is not None else env("SLEUTH_LLM_API_KEY")
    if key is None and source == "OPENAI_BASE_URL":
        key = env("OPENAI_API_KEY")
    if key is None and source == "QWEN_BASE_URL":
        key = env("QWEN_API_KEY") or env("DASHSCOPE_API_KEY")
    if key is None and provider is not None:
        for var in provider.key_vars:
            key = env(var)
            if key:
                break
    if key is not None and not key.strip():
        key = None
    if key is not None and any(c.isspace() for c in key.strip()):
        raise LLMAuthError(
            "The API key contains whitespace; check SLEUTH_LLM_API_KEY (or the provider's key variable)."
        )

    if key is None and provider is not None and not _is_local(base_url):
        wanted = " or ".join(("SLEUTH_LLM_API_KEY", *provider.key_vars))
        raise LLMAuthError(
            f"No API key for {provider.name} at {base_url}: set {wanted} (environment or .env) or pass --api-key."
        )

    name = model or env("SLEUTH_LLM_MODEL") or (provider.default_model if provider else "")
    return LLMSettings(base_url, name, key.strip() if key else None, provider.name if provider else None, source)
