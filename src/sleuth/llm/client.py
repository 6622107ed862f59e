"""A client for any server speaking the OpenAI chat-completions / completions protocol.

A call is written once (:meth:`OpenAICompatLLM._call`) and runs over blocking I/O or asyncio, streamed when
given ``on_delta``, with retries (:mod:`sleuth.llm.http_policy`), timeouts, rate limits and a client-side
cut at the first stop string.  Errors are :class:`~sleuth.llm.base.LLMError` subclasses (docs/llm.md).
"""

from __future__ import annotations

import asyncio
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from sleuth.llm.base import (
    DEFAULT_PARAMS,
    Completion,
    GenParams,
    LLMBadRequest,
    LLMError,
    LLMUnavailable,
    Message,
    OnDelta,
    Usage,
)
from sleuth.llm.http_policy import HttpPolicy, Retryable
from sleuth.llm.limits import Limiter, RateLimits
from sleuth.llm.sse import StreamReader
from sleuth.llm.transport import IO, AsyncIO, BlockingIO, run_blocking
from sleuth.llm.urls import api_base, check_url
from sleuth.llm.wire import build_body, completion_from, estimate_tokens, parse_json

__all__ = ["MAX_CONNECTIONS", "ClientStats", "OpenAICompatLLM"]

#: connections per client (at least; more when the limiter allows more concurrent requests).
#: Every one may stay alive, so concurrency up to the pool size never re-opens connections.
MAX_CONNECTIONS = 64


@dataclass
class ClientStats:
    """Counters of one client (updated under the client's lock)."""

    calls: int = 0
    retries: int = 0
    failures: int = 0
    usage: Usage = field(default_factory=Usage)


class OpenAICompatLLM:
    """An :class:`~sleuth.llm.base.LLM` over HTTP (OpenAI protocol).

    * ``base_url``: with or without ``/v1``; ``model``: sent with each request (empty: asked from ``/v1/models``
      on first use); ``api_key``: sent as ``Authorization: Bearer``, never logged nor shown in ``repr``.
    * ``timeout``: seconds per attempt (connect, read and write each; per call with ``timeout=``);
      ``max_retries``: after the first attempt, on 429/5xx/timeouts/connection errors, waiting
      ``min(backoff_max, backoff_base * 2**i) * U(0.5, 1)`` or a ``Retry-After`` of at most ``retry_after_cap``.
    * ``limits``: :class:`RateLimits` or a shared :class:`Limiter`; ``defaults``: :class:`GenParams` for what a
      call leaves ``None``; ``extra_body``: merged into every request body (``{"cache_prompt": True}``);
      ``transport``: an ``httpx`` transport for both clients (``httpx.MockTransport`` answers in-process).
    """

    def __init__(
        self,
        base_url: str,
        model: str = "",
        *,
        api_key: str | None = None,
        timeout: float = 120.0,
        max_retries: int = 3,
        backoff_base: float = 0.5,
        backoff_max: float = 20.0,
        retry_after_cap: float = 60.0,
        limits: RateLimits | Limiter | None = None,
        defaults: GenParams | None = None,
        extra_body: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        name: str | None = None,
        prompt_cache_reset: Callable[[], Any] | None = None,
        transport: httpx.BaseTransport | httpx.AsyncBaseTransport | None = None,
    ) -> None:
        check_url(base_url)
        self.base_url = base_url.rstrip("/")
        self.api_base = api_base(base_url)
        self.model = model
        self._api_key = api_key or None
        self.timeout = float(timeout)
        self.policy = HttpPolicy(
            self.base_url,
            has_key=bool(self._api_key),
            max_retries=max(0, int(max_retries)),
            backoff_base=backoff_base,
            backoff_max=backoff_max,
            retry_after_cap=retry_after_cap,
        )
        if isinstance(limits, RateLimits):
            limits = Limiter(limits) if limits.any else None
        self.limiter: Limiter | None = limits
        self.defaults = defaults.over(DEFAULT_PARAMS) if defaults is not None else DEFAULT_PARAMS
        self.extra_body = dict(extra_body or {})
        self.name = name or self.base_url
        self.stats = ClientStats()
        self._stats_lock = threading.Lock()
        self._headers = {"Accept": "application/json", **(headers or {})}
        if self._api_key:
            self._headers["Authorization"] = f"Bearer {self._api_key}"
        self._transport = transport
        self._client: httpx.Client | None = None
        self._client_lock = threading.Lock()
        self._aclients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
            weakref.WeakKeyDictionary()
        )
        self._prompt_cache_reset = prompt_cache_reset

    @property
    def max_retries(self) -> int:
        return self.policy.max_retries

    # ------------------------------------------------------------------ plumbing
    def __repr__(self) -> str:
        return f"OpenAICompatLLM(base_url={self.base_url!r}, model={self.model!r}, api_key=<{'set' if self._api_key else 'none'}>)"

    def _timeout(self, t: float | None) -> httpx.Timeout:
        t = float(t if t is not None else self.timeout)
        return httpx.Timeout(t, connect=min(t, 10.0))

    def _client_kw(self, sync: bool) -> dict[str, Any]:
        n = max(MAX_CONNECTIONS, (self.limiter.limits.max_concurrency or 0) if self.limiter is not None else 0)
        limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
        kw: dict[str, Any] = {"headers": self._headers, "timeout": self._timeout(None), "limits": limits}
        t = self._transport
        if t is not None and isinstance(t, httpx.BaseTransport if sync else httpx.AsyncBaseTransport):
            kw["transport"] = t
        return kw

    @property
    def client(self) -> httpx.Client:
        """The shared blocking ``httpx.Client`` (created lazily, thread-safe)."""
        with self._client_lock:
            if self._client is None or self._client.is_closed:
                self._client = httpx.Client(**self._client_kw(True))
            return self._client

    def _aclient(self) -> httpx.AsyncClient:
        """One ``httpx.AsyncClient`` per running event loop (clients are loop-bound)."""
        loop = asyncio.get_running_loop()
        c = self._aclients.get(loop)
        if c is None or c.is_closed:
            c = self._aclients[loop] = httpx.AsyncClient(**self._client_kw(False))
        return c

    def reset_prompt_cache(self) -> bool:
        """Wipe the server's KV / prompt cache when this client can (Sleuth's embedded server started
        ``isolated``; :meth:`EmbeddedServer.erase_slots`); ``False`` for any other server.
        """
        if self._prompt_cache_reset is None:
            return False
        self._prompt_cache_reset()
        return True

    def close(self) -> None:
        """Close the blocking client (asyncio clients close with :meth:`aclose` or their loop)."""
        with self._client_lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    async def aclose(self) -> None:
        """Close the asyncio client of the running loop and the blocking client."""
        try:
            c = self._aclients.pop(asyncio.get_running_loop(), None)
            if c is not None:
                await c.aclose()
        finally:
            self.close()

    def __enter__(self) -> OpenAICompatLLM:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> OpenAICompatLLM:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _count(self, *, retries: int = 0, failed: bool = False, usage: Usage | None = None) -> None:
        with self._stats_lock:
            self.stats.calls += 1
            self.stats.retries += retries
            self.stats.failures += int(failed)
            if usage is not None:
                self.stats.usage = self.stats.usage + usage

    # ------------------------------------------------------------- public API
    def complete(
        self,
        prompt: str,
        params: GenParams | None = None,
        *,
        on_delta: OnDelta | None = None,
        timeout: float | None = None,
    ) -> Completion:
        """Raw text completion (``/v1/completions``); streamed to ``on_delta`` when given."""
        return run_blocking(self._call(BlockingIO(self.client), prompt, params, on_delta, timeout))

    def chat(
        self,
        messages: Sequence[Message],
        params: GenParams | None = None,
        *,
        on_delta: OnDelta | None = None,
        timeout: float | None = None,
    ) -> Completion:
        """Chat completion (``/v1/chat/completions``); streamed to ``on_delta`` when given."""
        return run_blocking(self._call(BlockingIO(self.client), list(messages), params, on_delta, timeout))

    async def acomplete(
        self,
        prompt: str,
        params: GenParams | None = None,
        *,
        on_delta: OnDelta | None = None,
        timeout: float | None = None,
    ) -> Completion:
        """:meth:`complete` on the running event loop; cancelling the task closes the request."""
        return await self._call(AsyncIO(self._aclient()), prompt, params, on_delta, timeout)

    async def achat(
        self,
        messages: Sequence[Message],
        params: GenParams | None = None,
        *,
        on_delta: OnDelta | None = None,
        timeout: float | None = None,
    ) -> Completion:
        """:meth:`chat` on the running event loop; cancelling the task closes the request."""
        return await self._call(AsyncIO(self._aclient()), list(messages), params, on_delta, timeout)

    def health(self, timeout: float = 5.0) -> bool:
        """Whether the server answers ``/v1/models`` (or llama.cpp's ``/health``) with 200."""
        for url in (self.api_base + "/models", self.base_url + "/health"):
            try:
                if self.client.get(url, timeout=timeout).status_code == 200:
                    return True
            except httpx.HTTPError:
                continue
        return False

    # -------------------------------------------------------------- the call
    async def _ensure_model(self, io: IO) -> None:
        """Ask ``/v1/models`` for the model name when none was given (best effort)."""
        if self.model:
            return
        try:
            r = await io.send(io.build("GET", self.api_base + "/models", timeout=self._timeout(10)))
        except httpx.HTTPError:
            return  # the call itself then reports the server's state (with retries)
        if r.status_code in (401, 403):
            raise self.policy.classify(r)  # type: ignore[misc]
        try:
            data = r.json().get("data") or []
            self.model = str(data[0]["id"]) if data else ""
        except (ValueError, KeyError, IndexError, AttributeError, TypeError):
            self.model = ""

    async def _call(
        self,
        io: IO,
        payload: str | list[Message],
        params: GenParams | None,
        on_delta: OnDelta | None,
        timeout: float | None,
    ) -> Completion:
        """One call with its retries: the only request loop of the client."""
        await self._ensure_model(io)
        p = (params or GenParams()).over(self.defaults)
        chat = not isinstance(payload, str)
        body = build_body(self.model, payload, p, stream=on_delta is not None, extra=self.extra_body)
        request = io.build(
            "POST",
            self.api_base + ("/chat/completions" if chat else "/completions"),
            json=body,
            timeout=self._timeout(timeout),
        )
        est = estimate_tokens(payload, p)
        t0 = time.perf_counter()
        attempt = 0
        while True:
            reader = StreamReader(chat, p.stop, self.base_url, on_delta) if on_delta is not None else None
            try:
                c = await self._attempt(io, request, chat, p, t0, est, reader)
            except Retryable as r:
                wait = self.policy.next_wait(r, attempt, may_retry=reader is None or not reader.emitted)
                if isinstance(wait, LLMError):
                    self._count(retries=attempt, failed=True)
                    raise wait from None
            except LLMError as e:
                self._count(retries=attempt, failed=True)
                if p.schema and isinstance(e, LLMBadRequest):
                    hint = "the request asked for structured output (response_format with a JSON schema)"
                    raise LLMBadRequest(f"{e} ({hint}; this server may not support it)", status=e.status) from None
                raise
            else:
                self._count(retries=attempt, usage=c.usage)
                return c
            attempt += 1
            await io.sleep(wait)  # outside the limiter: a backing-off call holds no slot

    async def _attempt(
        self, io: IO, request: httpx.Request, chat: bool, p: GenParams, t0: float, est: int, reader: StreamReader | None
    ) -> Completion:
        """One attempt (raises :class:`Retryable` or a final :class:`LLMError`)."""
        if self.limiter is not None:
            await io.acquire(self.limiter, est)
        actual: int | None = None
        try:
            try:
                resp = await io.send(request, stream=reader is not None)
            except httpx.HTTPError as e:
                raise self.policy.transport_error(e) from None
            try:
                if resp.status_code >= 400:
                    await io.read(resp)
                    raise self.policy.classify(resp)
                if reader is None:
                    c = completion_from(parse_json(resp, self.base_url), chat, p, t0, self.model, self.base_url)
                else:
                    c = await self._read_stream(io, resp, reader, t0)
            finally:
                await io.close(resp)
            actual = c.usage.prompt_tokens + c.usage.completion_tokens or None
            return c
        finally:
            if self.limiter is not None:
                self.limiter.release(est, actual)

    async def _read_stream(self, io: IO, resp: httpx.Response, reader: StreamReader, t0: float) -> Completion:
        try:
            lines = await io.lines(resp)
            while (line := await io.next_line(lines)) is not None:
                if reader.feed(line):
                    break
        except httpx.HTTPError as e:
            raise self.policy.transport_error(e) from None
        if not reader.finished:
            raise Retryable(LLMUnavailable(f"{self.base_url} closed the stream before it finished"))
        return reader.completion(t0, self.model)
