"""What an HTTP outcome means for an LLM call (a final :class:`~sleuth.llm.base.LLMError` or :class:`Retryable`)
and how long to wait before the next attempt (sans I/O).
"""

from __future__ import annotations

import email.utils
import logging
import random
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx

from sleuth.llm.base import LLMAuthError, LLMBadRequest, LLMError, LLMTimeout, LLMUnavailable
from sleuth.llm.wire import server_message

__all__ = ["RETRY_STATUS", "HttpPolicy", "Retryable", "parse_retry_after"]

log = logging.getLogger("sleuth.llm")

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 521, 522, 523, 524, 529})


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


class Retryable(Exception):
    """One attempt failed in a way worth retrying; ``err`` is what to raise if it is the last."""

    def __init__(self, err: LLMError, retry_after: float | None = None) -> None:
        super().__init__(str(err))
        self.err = err
        self.retry_after = retry_after


@dataclass(frozen=True)
class HttpPolicy:
    """Classification and retry decisions for the server at ``where``."""

    where: str
    has_key: bool = False
    max_retries: int = 3
    backoff_base: float = 0.5
    backoff_max: float = 20.0
    retry_after_cap: float = 60.0
    #: the variable a rejected key is named by in the message (an embedding or rerank server has its own)
    key_var: str = "SLEUTH_LLM_API_KEY"
    #: what the retry log line calls a call to this server
    what: str = "LLM call"

    def classify(self, resp: httpx.Response) -> LLMError | Retryable:
        """The error an HTTP status >= 400 stands for (its body already read)."""
        code = resp.status_code
        msg = server_message(resp)
        where = self.where
        if code in (401, 403):
            what = "no API key was sent" if not self.has_key else "the API key was rejected"
            return LLMAuthError(
                f"{where} refused the request with HTTP {code} ({what}): check {self.key_var} "
                f"or the provider's key variable{'; server said: ' + msg if msg else ''}.",
                status=code,
            )
        if code in RETRY_STATUS or code >= 500:
            ra = parse_retry_after(resp.headers.get("retry-after"), self.retry_after_cap)
            err_cls = LLMTimeout if code == 408 else LLMUnavailable
            return Retryable(err_cls(f"{where} answered HTTP {code}: {msg or resp.reason_phrase}", status=code), ra)
        return LLMBadRequest(f"{where} rejected the request with HTTP {code}: {msg or resp.reason_phrase}", status=code)

    def transport_error(self, e: Exception) -> Retryable:
        """A connection error or timeout, as a retryable failure."""
        if isinstance(e, httpx.TimeoutException):
            return Retryable(LLMTimeout(f"{self.where} did not answer in time ({type(e).__name__})"))
        return Retryable(LLMUnavailable(f"cannot reach {self.where}: {type(e).__name__}: {e}"))

    def backoff(self, attempt: int, retry_after: float | None) -> float:
        """Seconds before attempt ``attempt + 1``: the server's ``Retry-After`` or jittered backoff."""
        if retry_after is not None:
            return retry_after
        return min(self.backoff_max, self.backoff_base * (2**attempt)) * (0.5 + random.random() / 2)

    def final(self, r: Retryable, attempt: int) -> LLMError:
        """The error to raise when attempt ``attempt`` (0-based) was the last one."""
        n = attempt + 1
        return type(r.err)(f"{r.err} (after {n} attempt{'s' if n > 1 else ''})", status=r.err.status)

    def next_wait(self, r: Retryable, attempt: int, *, may_retry: bool = True) -> float | LLMError:
        """Seconds to wait before retrying after ``r``, or the final error when retries are over.

        ``may_retry=False`` (a stream that already delivered text) makes ``r`` final.
        """
        if not may_retry or attempt >= self.max_retries:
            return self.final(r, attempt)
        wait = self.backoff(attempt, r.retry_after)
        log.warning(
            "%s to %s failed (%s); retry %d/%d in %.2fs",
            self.what,
            self.where,
            r.err,
            attempt + 1,
            self.max_retries,
            wait,
        )
        return wait
