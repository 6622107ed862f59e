"""The client's I/O, blocking (:class:`BlockingIO`, run by :func:`run_blocking` with no event loop) or asyncio
(:class:`AsyncIO`), behind one awaitable interface, so the call logic is written once as a coroutine.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any, TypeVar

import httpx

from sleuth.llm.limits import Limiter

__all__ = ["IO", "AsyncIO", "BlockingIO", "run_blocking"]

T = TypeVar("T")


class BlockingIO:
    """Blocking I/O through an ``httpx.Client``; its coroutines finish without suspending."""

    def __init__(self, client: httpx.Client) -> None:
        self.client = client

    def build(self, method: str, url: str, *, json: Any = None, timeout: httpx.Timeout) -> httpx.Request:
        return self.client.build_request(method, url, json=json, timeout=timeout)

    async def send(self, request: httpx.Request, *, stream: bool = False) -> httpx.Response:
        return self.client.send(request, stream=stream)

    async def lines(self, resp: httpx.Response) -> Iterator[str]:
        return resp.iter_lines()

    async def next_line(self, lines: Iterator[str]) -> str | None:
        return next(lines, None)

    async def read(self, resp: httpx.Response) -> None:
        resp.read()

    async def close(self, resp: httpx.Response) -> None:
        resp.close()

    async def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    async def acquire(self, limiter: Limiter, est_tokens: int) -> None:
        limiter.acquire(est_tokens)


class AsyncIO:
    """asyncio I/O through an ``httpx.AsyncClient`` of the running loop."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    def build(self, method: str, url: str, *, json: Any = None, timeout: httpx.Timeout) -> httpx.Request:
        return self.client.build_request(method, url, json=json, timeout=timeout)

    async def send(self, request: httpx.Request, *, stream: bool = False) -> httpx.Response:
        return await self.client.send(request, stream=stream)

    async def lines(self, resp: httpx.Response) -> AsyncIterator[str]:
        return resp.aiter_lines()

    async def next_line(self, lines: AsyncIterator[str]) -> str | None:
        return await anext(lines, None)

    async def read(self, resp: httpx.Response) -> None:
        await resp.aread()

    async def close(self, resp: httpx.Response) -> None:
        await resp.aclose()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def acquire(self, limiter: Limiter, est_tokens: int) -> None:
        await limiter.aacquire(est_tokens)


#: what one call needs from the outside world: the two kinds of I/O share every method
IO = BlockingIO | AsyncIO


def run_blocking(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine over :class:`BlockingIO` to its end in this thread (it never suspends)."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError("an LLM call over blocking I/O tried to suspend (an awaitable of an event loop was used)")
