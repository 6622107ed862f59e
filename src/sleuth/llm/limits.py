"""Client-side rate limits (requests and tokens per minute) and a concurrency cap: one :class:`Limiter` per
backend, shared by threads and event loops.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass

__all__ = ["Limiter", "RateLimits", "TokenBucket"]


class TokenBucket:
    """A token bucket refilled at ``rate_per_min / 60`` per second; ``capacity`` is the largest burst.

    ``reserve(n)`` takes ``n`` tokens (the balance may go negative) and returns how long to wait, so threads
    and coroutines can both use it without blocking the event loop.
    """

    def __init__(self, rate_per_min: float, capacity: float | None = None) -> None:
        if rate_per_min <= 0:
            raise ValueError("rate_per_min must be > 0")
        self.rate = rate_per_min / 60.0
        # default burst: one second's worth (at least 1), so load is spread over the minute
        self.capacity = float(capacity if capacity is not None else max(1.0, self.rate))
        self._tokens = self.capacity
        self._t = time.monotonic()
        self._lock = threading.Lock()

    def _refill(self) -> None:
        now = time.monotonic()
        self._tokens = min(self.capacity, self._tokens + (now - self._t) * self.rate)
        self._t = now

    def reserve(self, n: float = 1.0) -> float:
        """Take ``n`` tokens; return the seconds to wait before using them."""
        n = min(float(n), self.capacity)  # a single huge request must still pass eventually
        with self._lock:
            self._refill()
            self._tokens -= n
            if self._tokens >= 0:
                return 0.0
            return -self._tokens / self.rate

    def adjust(self, delta: float) -> None:
        """Give back (``delta < 0``) or charge extra (``delta > 0``) tokens after the fact."""
        with self._lock:
            self._refill()
            self._tokens = min(self.capacity, self._tokens - delta)


@dataclass(frozen=True)
class RateLimits:
    """Per-backend limits; ``None`` means unlimited."""

    requests_per_min: float | None = None
    tokens_per_min: float | None = None
    max_concurrency: int | None = None

    @property
    def any(self) -> bool:
        return bool(self.requests_per_min or self.tokens_per_min or self.max_concurrency)


class Limiter:
    """Applies :class:`RateLimits` around calls (``with limiter.slot(tokens)`` / ``async with``)."""

    def __init__(self, limits: RateLimits) -> None:
        self.limits = limits
        self.rpm = TokenBucket(limits.requests_per_min) if limits.requests_per_min else None
        self.tpm = TokenBucket(limits.tokens_per_min) if limits.tokens_per_min else None
        self._sem = threading.BoundedSemaphore(limits.max_concurrency) if limits.max_concurrency else None

    def _wait_s(self, est_tokens: int) -> float:
        w = 0.0
        if self.rpm is not None:
            w = max(w, self.rpm.reserve(1))
        if self.tpm is not None:
            w = max(w, self.tpm.reserve(max(1, est_tokens)))
        return w

    def acquire(self, est_tokens: int) -> None:
        w = self._wait_s(est_tokens)
        if w > 0:
            time.sleep(w)
        if self._sem is not None:
            self._sem.acquire()

    async def aacquire(self, est_tokens: int) -> None:
        w = self._wait_s(est_tokens)
        if w > 0:
            await asyncio.sleep(w)
        if self._sem is not None:
            # poll a thread semaphore so sync and async callers share one cap
            delay = 0.001
            while not self._sem.acquire(blocking=False):
                await asyncio.sleep(delay)
                delay = min(0.05, delay * 2)

    def release(self, est_tokens: int, actual_tokens: int | None) -> None:
        if self._sem is not None:
            self._sem.release()
        if self.tpm is not None and actual_tokens is not None:
            self.tpm.adjust(actual_tokens - max(1, est_tokens))
