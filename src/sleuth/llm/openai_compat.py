"""A client for any server speaking the OpenAI chat-completions / completions protocol.

Works with OpenAI, DashScope (Qwen), DeepSeek, vLLM, Ollama, llama.cpp's
server and Sleuth's embedded server.  One class, sync and async, streaming,
retries with backoff honouring ``Retry-After``, per-call timeouts, optional rate
limits, and a client-side cut at the first stop string so that every backend
behaves the same.

Errors (all subclasses of :class:`~sleuth.llm.base.LLMError`):

* :class:`LLMAuthError` on 401/403: never retried;
* :class:`LLMBadRequest` on other 4xx (except 408/429);
* :class:`LLMBadResponse` for malformed JSON or a body without choices;
* :class:`LLMTimeout` / :class:`LLMUnavailable` when retries are exhausted on
  429/5xx/timeouts/connection errors.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import random
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlparse

import httpx

from sleuth.llm.base import (
    Completion,
    GenParams,
    LLMAuthError,
    LLMBadRequest,
    LLMBadResponse,
    LLMError,
    LLMTimeout,
    LLMUnavailable,
    Message,
    Usage,
    cut_at_stop,
)
from sleuth.llm.limits import Limiter, RateLimits

__all__ = ["ClientStats", "OpenAICompatLLM", "api_base", "parse_retry_after"]

log = logging.getLogger("sleuth.llm")

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 521, 522, 523, 524, 529})
#: OpenAI accepts at most 4 stop strings; the rest are applied client-side
MAX_SERVER_STOPS = 4


def api_base(base_url: str) -> str:
    """Normalise a base URL to the ``.../v1``-style prefix the endpoints hang off.

    ``http://host:8080`` -> ``http://host:8080/v1``; a URL that already has a
    path (``https://api.openai.com/v1``, ``.../compatible-mode/v1``) is kept.
    """
    url = base_url.strip().rstrip("/")
    for suffix in ("/chat/completions", "/completions"):
        if url.endswith(suffix):
            url = url[: -len(suffix)]
    path = urlparse(url).path
    if path in ("", "/"):
        url += "/v1"
    return url


def parse_retry_after(value: str | None, cap: float) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (seconds or HTTP date), capped."""
    if not value:
        return None
    value = value.strip()
    try:
        secs = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        secs = (when - datetime.now(UTC)).total_seconds()
    if secs != secs:  # NaN
        return None
    return max(0.0, min(cap, secs))


@dataclass
class ClientStats:
    """Counters of one client (thread-safe updates through :meth:`OpenAICompatLLM._count`)."""

    calls: int = 0
    retries: int = 0
    failures: int = 0
    usage: Usage = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.usage is None:
            self.usage = Usage()


class _Retryable(Exception):
    """Internal: one attempt failed in a way worth retrying."""

    def __init__(self, err: LLMError, retry_after: float | None = None) -> None:
        super().__init__(str(err))
        self.err = err
        self.retry_after = retry_after


class _StopCutter:
    """Cuts a stream of text deltas at the first stop string, holding back a possible prefix."""

    def __init__(self, stop: Sequence[str] | None) -> None:
        self.stop = [s for s in (stop or ()) if s]
        self.hold = max((len(s) for s in self.stop), default=1) - 1
        self.buf = ""
        self.done = False

    def feed(self, delta: str) -> str:
        if self.done:
            return ""
        self.buf += delta
        text, cut = cut_at_stop(self.buf, self.stop)
        if cut:
            self.done = True
            self.buf = ""
            return text
        keep = self.hold
        if keep <= 0 or len(self.buf) <= keep:
            if keep <= 0:
                out, self.buf = self.buf, ""
                return out
            return ""
        out, self.buf = self.buf[:-keep], self.buf[-keep:]
        return out

    def flush(self) -> str:
        out, self.buf = ("" if self.done else self.buf), ""
        return out


def _check_url(base_url: str) -> None:
    """Refuse a base URL that can never work (no http(s) scheme, no host, bad port) in one sentence."""
    try:
        u = urlparse((base_url or "").strip())
        ok = u.scheme in ("http", "https") and bool(u.hostname)
        u.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError:
        ok = False
    if not ok:
        raise LLMUnavailable(
            f"{base_url!r} is not a usable LLM server URL (expected http(s)://host[:port][/v1]); "
            "check SLEUTH_LLM_BASE_URL or --base-url"
        )


def _server_message(resp: httpx.Response) -> str:
    """A short error message from a JSON or text error body."""
    try:
        d = resp.json()
    except (ValueError, UnicodeDecodeError):
        text = resp.text if resp.content else ""
        return " ".join(text.split())[:200]
    if isinstance(d, dict):
        e = d.get("error", d)
        if isinstance(e, dict):
            return str(e.get("message") or e.get("msg") or e)[:200]
        return str(e)[:200]
    return str(d)[:200]


#: connections per client (at least; more when the limiter allows more concurrent requests).
#: Every one may stay alive, so concurrency up to the pool size never re-opens connections.
MAX_CONNECTIONS = 64


def _http_limits(limiter: Limiter | None = None) -> httpx.Limits:
    n = max(MAX_CONNECTIONS, (limiter.limits.max_concurrency or 0) if limiter is not None else 0)
    return httpx.Limits(max_connections=n, max_keepalive_connections=n)


class OpenAICompatLLM:
    """An :class:`~sleuth.llm.base.LLM` over HTTP (OpenAI protocol).

    Parameters
    ----------
    base_url:
        Server URL, with or without ``/v1`` (``http://127.0.0.1:8080``,
        ``https://api.openai.com/v1``).
    model:
        Model name sent with each request; empty -> asked from ``/v1/models``
        on first use (llama.cpp / vLLM / Ollama serve one model).
    api_key:
        Sent as ``Authorization: Bearer``; never logged nor shown in ``repr``.
    timeout:
        Seconds per attempt (connect, read and write each); overridable per
        call with ``timeout=``.
    max_retries:
        Retries after the first attempt on 429/5xx/timeouts/connection errors.
    backoff_base, backoff_max:
        Exponential backoff with jitter: ``min(max, base * 2**i) * U(0.5, 1)``.
    retry_after_cap:
        Longest wait honoured from a ``Retry-After`` header.
    limits:
        :class:`RateLimits` (or a shared :class:`Limiter`): requests/min,
        tokens/min and max concurrent requests.
    defaults:
        :class:`GenParams` used where a call leaves a parameter ``None``.
    extra_body:
        Fields merged into every request body (e.g. ``{"cache_prompt": True}``
        for llama.cpp).
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
    ) -> None:
        _check_url(base_url)
        self.base_url = base_url.rstrip("/")
        self.api_base = api_base(base_url)
        self.model = model
        self._api_key = api_key or None
        self.timeout = float(timeout)
        self.max_retries = max(0, int(max_retries))
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.retry_after_cap = retry_after_cap
        if isinstance(limits, RateLimits):
            limits = Limiter(limits) if limits.any else None
        self.limiter: Limiter | None = limits
        self.defaults = defaults or GenParams()
        self.extra_body = dict(extra_body or {})
        self.name = name or self.base_url
        self.stats = ClientStats()
        self._stats_lock = threading.Lock()
        self._headers = {"Accept": "application/json", **(headers or {})}
        if self._api_key:
            self._headers["Authorization"] = f"Bearer {self._api_key}"
        self._client: httpx.Client | None = None
        self._client_lock = threading.Lock()
        self._aclients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
            weakref.WeakKeyDictionary()
        )
        self._closed = False
        self._prompt_cache_reset = prompt_cache_reset

    # ------------------------------------------------------------------ plumbing
    def __repr__(self) -> str:
        return f"OpenAICompatLLM(base_url={self.base_url!r}, model={self.model!r}, api_key=<{'set' if self._api_key else 'none'}>)"

    def _timeout(self, t: float | None) -> httpx.Timeout:
        t = float(t if t is not None else self.timeout)
        return httpx.Timeout(t, connect=min(t, 10.0))

    @property
    def client(self) -> httpx.Client:
        """The shared sync ``httpx.Client`` (created lazily, thread-safe)."""
        with self._client_lock:
            if self._client is None or self._client.is_closed:
                self._client = httpx.Client(
                    headers=self._headers,
                    timeout=self._timeout(None),
                    limits=_http_limits(self.limiter),
                )
            return self._client

    def _aclient(self) -> httpx.AsyncClient:
        """One ``httpx.AsyncClient`` per running event loop (clients are loop-bound)."""
        loop = asyncio.get_running_loop()
        c = self._aclients.get(loop)
        if c is None or c.is_closed:
            c = httpx.AsyncClient(
                headers=self._headers,
                timeout=self._timeout(None),
                limits=_http_limits(self.limiter),
            )
            self._aclients[loop] = c
        return c

    def reset_prompt_cache(self) -> bool:
        """Wipe the server's KV / prompt cache, when this client can (Sleuth's embedded
        server started ``isolated``); ``False`` when it cannot (any other server).

        The next request is then computed from scratch, so its output does not depend
        on what was asked before (see :meth:`EmbeddedServer.erase_slots`).
        """
        if self._prompt_cache_reset is None:
            return False
        self._prompt_cache_reset()
        return True

    def close(self) -> None:
        """Close the sync client (async clients close with :meth:`aclose` or their loop)."""
        with self._client_lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    async def aclose(self) -> None:
        """Close the async client of the running loop and the sync client."""
        try:
            loop = asyncio.get_running_loop()
            c = self._aclients.pop(loop, None)
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

    # ------------------------------------------------------------------ requests
    def _body(
        self,
        kind: str,
        payload: str | Sequence[Message],
        params: GenParams,
        stream: bool,
        extra: dict[str, Any],
    ) -> dict[str, Any]:
        body: dict[str, Any] = {}
        if self.model:
            body["model"] = self.model
        if kind == "chat":
            body["messages"] = [dict(m) for m in payload]  # type: ignore[union-attr]
        else:
            body["prompt"] = payload
        body["max_tokens"] = params.max_tokens
        body["temperature"] = params.temperature
        if params.seed is not None:
            body["seed"] = params.seed
        stops = [s for s in params.stop if s]
        if stops:
            body["stop"] = stops[:MAX_SERVER_STOPS]
        if stream:
            body["stream"] = True
        body.update(self.extra_body)
        body.update(extra)
        return body

    def _params(
        self, stop: Sequence[str] | None, max_tokens: int | None, temperature: float | None, seed: int | None
    ) -> GenParams:
        if isinstance(stop, str):  # a lone string is one stop sequence, not a list of characters
            stop = [stop]
        return self.defaults.with_(
            stop=tuple(stop) if stop is not None else None, max_tokens=max_tokens, temperature=temperature, seed=seed
        )

    @staticmethod
    def _estimate_tokens(payload: str | Sequence[Message], params: GenParams) -> int:
        chars = len(payload) if isinstance(payload, str) else sum(len(m.get("content") or "") for m in payload)
        return chars // 4 + params.max_tokens

    def _classify(self, resp: httpx.Response) -> LLMError | _Retryable:
        code = resp.status_code
        msg = _server_message(resp)
        where = self.base_url
        if code in (401, 403):
            what = "no API key was sent" if not self._api_key else "the API key was rejected"
            return LLMAuthError(
                f"{where} refused the request with HTTP {code} ({what}): check SLEUTH_LLM_API_KEY "
                f"or the provider's key variable{'; server said: ' + msg if msg else ''}.",
                status=code,
            )
        if code in RETRY_STATUS or code >= 500:
            ra = parse_retry_after(resp.headers.get("retry-after"), self.retry_after_cap)
            err_cls = LLMTimeout if code == 408 else LLMUnavailable
            return _Retryable(err_cls(f"{where} answered HTTP {code}: {msg or resp.reason_phrase}", status=code), ra)
        return LLMBadRequest(f"{where} rejected the request with HTTP {code}: {msg or resp.reason_phrase}", status=code)

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return retry_after
        return min(self.backoff_max, self.backoff_base * (2**attempt)) * (0.5 + random.random() / 2)

    @staticmethod
    def _transport_error(e: Exception, where: str) -> _Retryable:
        if isinstance(e, httpx.TimeoutException):
            return _Retryable(LLMTimeout(f"{where} did not answer in time ({type(e).__name__})"))
        return _Retryable(LLMUnavailable(f"cannot reach {where}: {type(e).__name__}: {e}"))

    def _parse(self, resp: httpx.Response, kind: str) -> dict[str, Any]:
        try:
            data = resp.json()
        except (ValueError, UnicodeDecodeError) as e:
            snippet = " ".join(resp.text.split())[:120] if resp.content else "<empty body>"
            raise LLMBadResponse(
                f"{self.base_url} returned malformed JSON ({e.__class__.__name__}): {snippet!r}", status=resp.status_code
            ) from None
        if not isinstance(data, dict):
            raise LLMBadResponse(f"{self.base_url} returned JSON that is not an object", status=resp.status_code)
        if "error" in data and not data.get("choices"):
            raise LLMBadResponse(f"{self.base_url} returned an error: {_server_message(resp)}", status=resp.status_code)
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise LLMBadResponse(f"{self.base_url} returned no choices", status=resp.status_code)
        return data

    def _completion(self, data: dict[str, Any], kind: str, params: GenParams, t0: float) -> Completion:
        ch = data["choices"][0]
        if kind == "chat":
            msg = ch.get("message")
            if not isinstance(msg, dict):
                raise LLMBadResponse(f"{self.base_url} returned a chat choice without a message")
            text = msg.get("content") or ""
        else:
            text = ch.get("text")
            if text is None:
                raise LLMBadResponse(f"{self.base_url} returned a completion choice without text")
        if not isinstance(text, str):
            raise LLMBadResponse(f"{self.base_url} returned non-text content")
        finish = ch.get("finish_reason") or "stop"
        text, cut = cut_at_stop(text, params.stop)
        if cut:
            finish = "stop"
        return Completion(
            text=text,
            finish_reason=str(finish),
            usage=usage_from(data),
            latency_s=time.perf_counter() - t0,
            model=self.model or str(data.get("model") or ""),
        )

    # -------------------------------------------------------------- sync core
    def _ensure_model(self) -> None:
        if self.model:
            return
        try:
            r = self.client.get(self.api_base + "/models", timeout=self._timeout(10))
        except httpx.HTTPError:
            return  # best effort: the call itself then reports the server's state (with retries)
        self.model = self._discover_model(r)

    async def _aensure_model(self) -> None:
        if self.model:
            return
        try:
            r = await self._aclient().get(self.api_base + "/models", timeout=self._timeout(10))
        except httpx.HTTPError:
            return
        self.model = self._discover_model(r)

    def _discover_model(self, r: httpx.Response) -> str:
        if r.status_code in (401, 403):
            raise self._classify(r)  # type: ignore[misc]
        try:
            data = r.json().get("data") or []
            return str(data[0]["id"]) if data else ""
        except (ValueError, KeyError, IndexError, AttributeError, TypeError):
            return ""

    def _once(self, path: str, body: dict[str, Any], kind: str, params: GenParams, timeout: float | None, t0: float, est: int) -> Completion:
        """One attempt (raises :class:`_Retryable` or a final :class:`LLMError`)."""
        if self.limiter is not None:
            self.limiter.acquire(est)
        actual: int | None = None
        try:
            try:
                resp = self.client.post(self.api_base + path, json=body, timeout=self._timeout(timeout))
            except httpx.HTTPError as e:
                raise self._transport_error(e, self.base_url) from None
            if resp.status_code >= 400:
                raise self._classify(resp)
            c = self._completion(self._parse(resp, kind), kind, params, t0)
            actual = c.usage.prompt_tokens + c.usage.completion_tokens or None
            return c
        finally:
            if self.limiter is not None:
                self.limiter.release(est, actual)

    async def _aonce(
        self, path: str, body: dict[str, Any], kind: str, params: GenParams, timeout: float | None, t0: float, est: int
    ) -> Completion:
        if self.limiter is not None:
            await self.limiter.aacquire(est)
        actual: int | None = None
        try:
            try:
                resp = await self._aclient().post(self.api_base + path, json=body, timeout=self._timeout(timeout))
            except httpx.HTTPError as e:
                raise self._transport_error(e, self.base_url) from None
            if resp.status_code >= 400:
                raise self._classify(resp)
            c = self._completion(self._parse(resp, kind), kind, params, t0)
            actual = c.usage.prompt_tokens + c.usage.completion_tokens or None
            return c
        finally:
            if self.limiter is not None:
                self.limiter.release(est, actual)

    def _next_wait(self, r: _Retryable, attempt: int) -> float:
        """Seconds to wait before the next attempt, or raise the final error."""
        if attempt >= self.max_retries:
            self._count(retries=attempt, failed=True)
            raise self._final(r, attempt) from None
        wait = self._backoff(attempt, r.retry_after)
        log.warning(
            "LLM call to %s failed (%s); retry %d/%d in %.2fs", self.base_url, r.err, attempt + 1, self.max_retries, wait
        )
        return wait

    def _post(self, path: str, body: dict[str, Any], kind: str, params: GenParams, timeout: float | None) -> Completion:
        t0 = time.perf_counter()
        est = self._estimate_tokens(body.get("prompt") or body.get("messages") or "", params)
        attempt = 0
        while True:
            try:
                c = self._once(path, body, kind, params, timeout, t0, est)
            except _Retryable as r:
                wait = self._next_wait(r, attempt)
            except LLMError:
                self._count(retries=attempt, failed=True)
                raise
            else:
                self._count(retries=attempt, usage=c.usage)
                return c
            attempt += 1
            time.sleep(wait)  # outside the limiter: a backing-off call holds no slot

    def _final(self, r: _Retryable, attempt: int) -> LLMError:
        err = r.err
        n = attempt + 1
        msg = f"{err} (after {n} attempt{'s' if n > 1 else ''})"
        out = type(err)(msg, status=err.status)
        return out

    async def _apost(
        self, path: str, body: dict[str, Any], kind: str, params: GenParams, timeout: float | None
    ) -> Completion:
        t0 = time.perf_counter()
        est = self._estimate_tokens(body.get("prompt") or body.get("messages") or "", params)
        attempt = 0
        while True:
            try:
                c = await self._aonce(path, body, kind, params, timeout, t0, est)
            except _Retryable as r:
                wait = self._next_wait(r, attempt)
            except LLMError:
                self._count(retries=attempt, failed=True)
                raise
            else:
                self._count(retries=attempt, usage=c.usage)
                return c
            attempt += 1
            await asyncio.sleep(wait)

    # ----------------------------------------------------------- streaming core
    @staticmethod
    def _sse_delta(line: str, kind: str, where: str) -> tuple[str | None, str | None, bool]:
        """Parse one SSE line -> (text delta, finish_reason, done)."""
        if not line.startswith("data:"):
            return None, None, False
        payload = line[5:].strip()
        if payload == "[DONE]":
            return None, None, True
        if not payload:
            return None, None, False
        try:
            d = json.loads(payload)
        except ValueError:
            raise LLMBadResponse(f"{where} sent a malformed stream event: {payload[:80]!r}") from None
        if not isinstance(d, dict):
            raise LLMBadResponse(f"{where} sent a stream event that is not an object")
        if d.get("error"):
            e = d["error"]
            raise LLMUnavailable(f"{where} reported an error mid-stream: {e.get('message') if isinstance(e, dict) else e}")
        choices = d.get("choices") or []
        if not choices:
            return None, None, False  # e.g. a trailing usage-only event
        ch = choices[0]
        text = (ch.get("delta") or {}).get("content") if kind == "chat" else ch.get("text")
        return (text or None), ch.get("finish_reason"), False

    def _stream(self, path: str, body: dict[str, Any], kind: str, params: GenParams, timeout: float | None) -> Iterator[str]:
        est = self._estimate_tokens(body.get("prompt") or body.get("messages") or "", params)
        attempt = 0
        cutter = _StopCutter(params.stop)
        while True:
            emitted = False
            if self.limiter is not None:
                self.limiter.acquire(est)
            try:
                try:
                    with self.client.stream("POST", self.api_base + path, json=body, timeout=self._timeout(timeout)) as resp:
                        if resp.status_code >= 400:
                            resp.read()
                            err = self._classify(resp)
                            if isinstance(err, _Retryable):
                                raise err
                            self._count(retries=attempt, failed=True)
                            raise err
                        finished = False
                        for line in resp.iter_lines():
                            text, fin, done = self._sse_delta(line, kind, self.base_url)
                            if text:
                                out = cutter.feed(text)
                                if out:
                                    emitted = True
                                    yield out
                                if cutter.done:
                                    finished = True
                                    break
                            if fin:
                                finished = True
                            if done:
                                finished = True
                                break
                        if not finished:
                            raise _Retryable(LLMUnavailable(f"{self.base_url} closed the stream before it finished"))
                except httpx.HTTPError as e:
                    raise self._transport_error(e, self.base_url) from None
                tail = cutter.flush()
                if tail:
                    yield tail
                self._count(retries=attempt)
                return
            except _Retryable as r:
                if emitted or attempt >= self.max_retries:
                    self._count(retries=attempt, failed=True)
                    raise self._final(r, attempt) from None
                wait = self._backoff(attempt, r.retry_after)
                attempt += 1
            finally:
                if self.limiter is not None:
                    self.limiter.release(est, None)
            time.sleep(wait)  # outside the limiter

    async def _astream(
        self, path: str, body: dict[str, Any], kind: str, params: GenParams, timeout: float | None
    ) -> AsyncIterator[str]:
        est = self._estimate_tokens(body.get("prompt") or body.get("messages") or "", params)
        attempt = 0
        cutter = _StopCutter(params.stop)
        while True:
            emitted = False
            if self.limiter is not None:
                await self.limiter.aacquire(est)
            try:
                try:
                    async with self._aclient().stream(
                        "POST", self.api_base + path, json=body, timeout=self._timeout(timeout)
                    ) as resp:
                        if resp.status_code >= 400:
                            await resp.aread()
                            err = self._classify(resp)
                            if isinstance(err, _Retryable):
                                raise err
                            self._count(retries=attempt, failed=True)
                            raise err
                        finished = False
                        async for line in resp.aiter_lines():
                            text, fin, done = self._sse_delta(line, kind, self.base_url)
                            if text:
                                out = cutter.feed(text)
                                if out:
                                    emitted = True
                                    yield out
                                if cutter.done:
                                    finished = True
                                    break
                            if fin:
                                finished = True
                            if done:
                                finished = True
                                break
                        if not finished:
                            raise _Retryable(LLMUnavailable(f"{self.base_url} closed the stream before it finished"))
                except httpx.HTTPError as e:
                    raise self._transport_error(e, self.base_url) from None
                tail = cutter.flush()
                if tail:
                    yield tail
                self._count(retries=attempt)
                return
            except _Retryable as r:
                if emitted or attempt >= self.max_retries:
                    self._count(retries=attempt, failed=True)
                    raise self._final(r, attempt) from None
                wait = self._backoff(attempt, r.retry_after)
                attempt += 1
            finally:
                if self.limiter is not None:
                    self.limiter.release(est, None)
            await asyncio.sleep(wait)  # outside the limiter

    # ------------------------------------------------------------- public API
    def complete(
        self,
        prompt: str,
        *,
        stop: Sequence[str] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        seed: int | None = None,
        timeout: float | None = None,
        **extra: Any,
    ) -> Completion:
        """Raw text completion (``/v1/completions``)."""
        self._ensure_model()
        p = self._params(stop, max_tokens, temperature, seed)
        return self._post("/completions", self._body("complete", prompt, p, False, extra), "complete", p, timeout)

    def chat(
        self,
        messages: Sequence[Message],
        *,
        stop: Sequence[str] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        seed: int | None = None,
        timeout: float | None = None,
        **extra: Any,
    ) -> Completion:
        """Chat completion (``/v1/chat/completions``)."""
        self._ensure_model()
        p = self._params(stop, max_tokens, temperature, seed)
        return self._post("/chat/completions", self._body("chat", messages, p, False, extra), "chat", p, timeout)

    async def acomplete(
        self,
        prompt: str,
        *,
        stop: Sequence[str] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        seed: int | None = None,
        timeout: float | None = None,
        **extra: Any,
    ) -> Completion:
        """Async :meth:`complete`; cancelling the task closes the request."""
        await self._aensure_model()
        p = self._params(stop, max_tokens, temperature, seed)
        return await self._apost("/completions", self._body("complete", prompt, p, False, extra), "complete", p, timeout)

    async def achat(
        self,
        messages: Sequence[Message],
        *,
        stop: Sequence[str] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        seed: int | None = None,
        timeout: float | None = None,
        **extra: Any,
    ) -> Completion:
        """Async :meth:`chat`; cancelling the task closes the request."""
        await self._aensure_model()
        p = self._params(stop, max_tokens, temperature, seed)
        return await self._apost("/chat/completions", self._body("chat", messages, p, False, extra), "chat", p, timeout)

    def stream_complete(
        self,
        prompt: str,
        *,
        stop: Sequence[str] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        seed: int | None = None,
        timeout: float | None = None,
        **extra: Any,
    ) -> Iterator[str]:
        """Stream text deltas of a raw completion (cut at the first stop string)."""
        self._ensure_model()
        p = self._params(stop, max_tokens, temperature, seed)
        return self._stream("/completions", self._body("complete", prompt, p, True, extra), "complete", p, timeout)

    def stream_chat(
        self,
        messages: Sequence[Message],
        *,
        stop: Sequence[str] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        seed: int | None = None,
        timeout: float | None = None,
        **extra: Any,
    ) -> Iterator[str]:
        """Stream text deltas of a chat completion (cut at the first stop string)."""
        self._ensure_model()
        p = self._params(stop, max_tokens, temperature, seed)
        return self._stream("/chat/completions", self._body("chat", messages, p, True, extra), "chat", p, timeout)

    async def astream_chat(
        self,
        messages: Sequence[Message],
        *,
        stop: Sequence[str] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        seed: int | None = None,
        timeout: float | None = None,
        **extra: Any,
    ) -> AsyncIterator[str]:
        """Async stream of chat deltas (cut at the first stop string)."""
        await self._aensure_model()
        p = self._params(stop, max_tokens, temperature, seed)
        async for d in self._astream("/chat/completions", self._body("chat", messages, p, True, extra), "chat", p, timeout):
            yield d

    async def astream_complete(
        self,
        prompt: str,
        *,
        stop: Sequence[str] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        seed: int | None = None,
        timeout: float | None = None,
        **extra: Any,
    ) -> AsyncIterator[str]:
        """Async stream of raw-completion deltas (cut at the first stop string)."""
        await self._aensure_model()
        p = self._params(stop, max_tokens, temperature, seed)
        async for d in self._astream("/completions", self._body("complete", prompt, p, True, extra), "complete", p, timeout):
            yield d

    def health(self, timeout: float = 5.0) -> bool:
        """Whether the server answers ``/v1/models`` (or llama.cpp's ``/health``) with 200."""
        for url in (self.api_base + "/models", self.base_url + "/health"):
            try:
                if self.client.get(url, timeout=timeout).status_code == 200:
                    return True
            except httpx.HTTPError:
                continue
        return False


def usage_from(data: dict[str, Any]) -> Usage:
    """Token usage from an OpenAI-style body, including cached prompt tokens.

    * ``usage.prompt_tokens_details.cached_tokens`` (OpenAI, vLLM, llama.cpp),
      ``usage.prompt_cache_hit_tokens`` (DeepSeek);
    * llama.cpp's ``timings.prompt_n`` (tokens actually evaluated) and
      ``timings.cache_n`` (tokens reused from the slot's KV cache).
    """
    u = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    t = data.get("timings") if isinstance(data.get("timings"), dict) else {}

    def _int(v: Any) -> int:
        try:
            return int(v or 0)
        except (TypeError, ValueError):
            return 0

    prompt = _int(u.get("prompt_tokens"))
    completion = _int(u.get("completion_tokens"))
    details = u.get("prompt_tokens_details") if isinstance(u.get("prompt_tokens_details"), dict) else {}
    cached = _int(details.get("cached_tokens")) or _int(u.get("prompt_cache_hit_tokens"))
    if t:
        if "cache_n" in t:
            cached = _int(t.get("cache_n"))
        processed = _int(t.get("prompt_n")) if "prompt_n" in t else max(0, prompt - cached)
        if not prompt:
            prompt = processed + cached
        if not completion:
            completion = _int(t.get("predicted_n"))
    else:
        processed = max(0, prompt - cached)
    return Usage(prompt, completion, cached, processed)
