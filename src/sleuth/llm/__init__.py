"""Sleuth's LLM layer: one protocol (:class:`LLM`: ``complete`` and ``chat``, streamed with ``on_delta=``), one
OpenAI-compatible client and an embedded model; :func:`get_llm` picks the backend (docs/llm.md).

>>> from sleuth.llm import GenParams, get_llm
>>> llm = get_llm()                      # embedded default model, no key, no network
>>> llm.complete("Q: 2+2?\\nA:", GenParams(stop=("\\n",), max_tokens=8)).text  # doctest: +SKIP
"""

from __future__ import annotations

import atexit
import contextlib
import threading
import weakref
from pathlib import Path
from typing import Any

from sleuth.llm.base import (
    DEFAULT_PARAMS,
    LLM,
    Completion,
    GenParams,
    LLMAuthError,
    LLMBadRequest,
    LLMBadResponse,
    LLMError,
    LLMTimeout,
    LLMUnavailable,
    Message,
    OnDelta,
    Usage,
)
from sleuth.llm.cache import CachedLLM
from sleuth.llm.client import OpenAICompatLLM
from sleuth.llm.limits import Limiter, RateLimits
from sleuth.llm.models import DEFAULT_MODEL, MODELS, ModelIntegrityError, ModelNotInstalled
from sleuth.llm.scripted import ScriptedLLM
from sleuth.llm.settings import ctx_size as _ctx_size
from sleuth.llm.settings import max_retries as _max_retries
from sleuth.llm.settings import rate_limits, resolve_llm_settings, response_cache
from sleuth.llm.settings import timeout as _timeout
from sleuth.llm.stops import cut_at_stop

__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_PARAMS",
    "LLM",
    "MODELS",
    "CachedLLM",
    "Completion",
    "GenParams",
    "LLMAuthError",
    "LLMBadRequest",
    "LLMBadResponse",
    "LLMError",
    "LLMTimeout",
    "LLMUnavailable",
    "Limiter",
    "Message",
    "ModelIntegrityError",
    "ModelNotInstalled",
    "OnDelta",
    "OpenAICompatLLM",
    "RateLimits",
    "ScriptedLLM",
    "Usage",
    "close_all",
    "cut_at_stop",
    "get_llm",
]

_clients: weakref.WeakSet[Any] = weakref.WeakSet()
_limiters: dict[str, Limiter] = {}
_lock = threading.Lock()


def _shared_limiter(base_url: str, limits: RateLimits) -> Limiter | None:
    """One limiter per (backend, limits) so that every client of a backend shares the budget."""
    if not limits.any:
        return None
    key = f"{base_url}|{limits.requests_per_min}|{limits.tokens_per_min}|{limits.max_concurrency}"
    with _lock:
        lim = _limiters.get(key)
        if lim is None:
            lim = _limiters[key] = Limiter(limits)
        return lim


def get_llm(
    model: str | None = None,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    cache: bool = True,
    cache_path: str | Path | None = None,
    refresh_cache: bool = False,
    timeout: float | None = None,
    max_retries: int | None = None,
    n_parallel: int = 1,
    ctx_size: int | None = None,
    threads: int | None = None,
    requests_per_min: float | None = None,
    tokens_per_min: float | None = None,
    max_concurrency: int | None = None,
    defaults: GenParams | None = None,
    isolated: bool = False,
    **kw: Any,
) -> LLM:
    """An LLM client for the configured backend (docs/llm.md).

    * ``model``: a remote name (``gpt-4o-mini``), ``provider:NAME`` (``openai:``, ``qwen:``, ``deepseek:``), an
      embedded model (``qwen2.5-1.5b``, ``qwen2.5-0.5b``, ``smollm2-135m``) or ``embedded:NAME``; ``None``:
      ``$SLEUTH_LLM_MODEL`` for a remote backend, ``$SLEUTH_MODEL`` or the default embedded model.
    * ``base_url``, ``api_key``: override ``SLEUTH_LLM_BASE_URL`` / ``SLEUTH_LLM_API_KEY`` (and the OpenAI / Qwen
      variables).  ``cache``, ``cache_path``, ``refresh_cache``: the response cache (temperature 0 only; default
      ``<cache dir>/llm_cache.sqlite``).  ``timeout``, ``max_retries``: per attempt (``$SLEUTH_LLM_TIMEOUT`` or
      120, 600 embedded) and retries (``$SLEUTH_LLM_MAX_RETRIES`` or 3).
    * Embedded server only: ``n_parallel`` slots, ``ctx_size`` tokens per slot, engine ``threads``
      (``$SLEUTH_THREADS`` or ``min(2, cpus)``), ``isolated`` (a server whose KV cache ``reset_prompt_cache()``
      can wipe; remote servers' returns ``False``), ``embedded_mode="subprocess"|"inprocess"``.
    * ``requests_per_min``, ``tokens_per_min``, ``max_concurrency``: limits shared by every client of the same
      backend in this process (``$SLEUTH_LLM_RPM``, ``$SLEUTH_LLM_TPM``, ``$SLEUTH_LLM_MAX_CONCURRENCY``).
    * ``defaults``: sampling defaults for parameters a call leaves ``None``; other ``kw`` go to
      :class:`OpenAICompatLLM` (``backoff_base``, ``extra_body``, ``headers``, ``retry_after_cap``, ``transport``).

    Raises :class:`LLMAuthError` (missing key for a known provider), :class:`ModelNotInstalled` (with the pip
    command), :class:`LLMUnavailable`.
    """
    from sleuth.llm.embedded import DEFAULT_CTX_SIZE, get_server

    embedded_mode = kw.pop("embedded_mode", None)
    s = resolve_llm_settings(model, base_url=base_url, api_key=api_key)
    retries = _max_retries(max_retries)
    common: dict[str, Any] = {
        "timeout": _timeout(timeout, embedded=s.embedded),
        "max_retries": retries if retries is not None else 3,
        "defaults": defaults,
    }
    limits = rate_limits(requests_per_min, tokens_per_min, max_concurrency)
    if s.embedded:
        if s.model not in MODELS:
            raise ModelNotInstalled(
                f"Unknown embedded model {s.model!r} (known: {', '.join(sorted(MODELS))}); "
                "for a remote model set SLEUTH_LLM_BASE_URL or use a prefix such as openai:MODEL."
            )
        srv = get_server(
            s.model,
            n_parallel=n_parallel,
            ctx_size=_ctx_size(ctx_size, DEFAULT_CTX_SIZE),
            threads=threads,
            mode=embedded_mode,
            isolated=isolated,
        )
        assert srv.base_url is not None
        backend = f"embedded:{s.model}"  # stable across runs (the port is random)
        inner = OpenAICompatLLM(
            srv.base_url,
            s.model,
            limits=_shared_limiter(srv.base_url, limits),
            extra_body={"cache_prompt": True, **kw.pop("extra_body", {})},
            name=backend,
            prompt_cache_reset=srv.erase_slots if isolated else None,
            **common,
            **kw,
        )
    else:
        assert s.base_url is not None
        inner = OpenAICompatLLM(
            s.base_url, s.model, api_key=s.api_key, limits=_shared_limiter(s.base_url, limits), **common, **kw
        )
        backend = inner.api_base
    llm: Any = inner
    if cache and response_cache():
        llm = CachedLLM(inner, cache_path, refresh=refresh_cache, backend=backend)
    with _lock:
        _clients.add(inner)
    return llm


def close_all() -> None:
    """Close every client made by :func:`get_llm` and stop the embedded servers."""
    from sleuth.llm.embedded import stop_all

    with _lock:
        clients = list(_clients)
    for c in clients:
        with contextlib.suppress(Exception):
            c.close()
    stop_all()


atexit.register(close_all)
