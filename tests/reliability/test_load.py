"""Load: ``sleuth serve`` (a real process) with the embedded index and the fake LLM
server, hit by 100 concurrent requests, several rounds.

* beyond ``--max-concurrency`` requests get 429 at once, with ``Retry-After``
  and a JSON error - never a queue, a hang or a 5xx;
* never more runs at once than the limit (the fake LLM server sees at most that
  many requests in flight);
* retrying as told, every request is answered, correctly;
* the server's memory stays bounded (RSS before/after several rounds).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from .conftest import EN_DOCS, rss_kb, serve_process, write_jsonl

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(240)]

LIMIT = 8
N = 100
STRATEGIES = ["direct", "rag", "self-ask", "search-o1"]


async def _one(c: httpx.AsyncClient, i: int) -> tuple[int, dict[str, Any], float]:
    body = {"question": f"Who was the father of the director of Jaws? ({i})", "strategy": STRATEGIES[i % len(STRATEGIES)],
            "max_steps": 2, "filters": ["acl=all"]}  # fmt: skip
    r = await c.post("/v1/ask", json=body)
    ra = float(r.headers.get("retry-after", "0") or 0) if r.status_code == 429 else 0.0
    return r.status_code, r.json(), ra


async def _round(url: str, tally: Any, n: int = N) -> dict[str, int]:
    """``n`` at once; 429s retried after their Retry-After (capped for test speed) until all are answered."""
    stats = {"ok": 0, "429": 0, "other": 0, "rounds": 0}
    todo = list(range(n))
    limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
    while todo and stats["rounds"] < 40:  # bounded: the loop ends even if the service misbehaves
        stats["rounds"] += 1
        # a fresh client per wave: a pooled keep-alive connection the server has just closed is the
        # client's race, not the service's fault
        async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as c:
            got = await asyncio.gather(*(_one(c, i) for i in todo))
        tally.add("requests", len(todo))
        retry, wait = [], 0.0
        for i, (code, body, ra) in zip(todo, got, strict=True):
            if code == 200:
                assert body["finish_reason"] == "finished", body["error"]
                assert body["short_answer"] == "Arnold Spielberg", body["short_answer"]
                stats["ok"] += 1
            elif code == 429:
                assert body["error"]["type"] == "rate_limit_error" and ra >= 1, body
                stats["429"] += 1
                retry.append(i)
                wait = max(wait, ra)
            else:
                stats["other"] += 1
        todo = retry
        if todo:
            await asyncio.sleep(min(wait, 0.2))
    assert not todo, f"{len(todo)} requests never got through"
    return stats


async def _burst(url: str) -> list[tuple[int, dict[str, Any], float]]:
    limits = httpx.Limits(max_connections=N, max_keepalive_connections=N)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as c:
        return await asyncio.gather(*(_one(c, i * len(STRATEGIES)) for i in range(N)))  # all "direct"


def test_hundred_concurrent_requests(tmp_path: Path, fake_llm, tally) -> None:
    srv = fake_llm(token_latency_s=0.002)
    corpus = write_jsonl(tmp_path / "c.jsonl", EN_DOCS)
    args = ["-m", "sleuth", "serve", "--port", "{port}", "--base-url", srv.base_url, "--model", "fake-model",
            "--corpus", f"en={corpus}", "--max-concurrency", str(LIMIT), "--timeout", "60", "--log-level", "warning"]  # fmt: skip
    with serve_process(args) as (proc, url):
        warm = asyncio.run(_round(url, tally, 24))  # warm-up: imports, index, first connections
        before = rss_kb(proc.pid)
        t = time.perf_counter()
        rounds = [asyncio.run(_round(url, tally)) for _ in range(2)]
        dt = time.perf_counter() - t
        after = rss_kb(proc.pid)
        tally.add("fault_scenarios", 3)
        tally.note(
            f"load: 2 x {N} concurrent requests (after 24 to warm up), limit {LIMIT}: "
            f"{sum(r['429'] for r in rounds)} answers were 429 and retried; server RSS {before // 1024} MiB -> "
            f"{after // 1024} MiB ({dt:.1f}s)"
        )
        assert warm["ok"] == 24 and warm["other"] == 0, warm
        for st in rounds:
            assert st["other"] == 0, st
            assert st["ok"] == N, st
            assert st["429"] > 0, f"some of {N} concurrent requests are beyond the limit of {LIMIT}: {st}"
        # a burst while every run is slow (each model call takes 3 s): exactly LIMIT admitted, the rest 429 at once
        srv.fault, srv.slow_s = "slow", 3.0
        try:
            t = time.perf_counter()
            burst = asyncio.run(_burst(url))
            dt_429 = time.perf_counter() - t
        finally:
            srv.fault = "ok"
        tally.add("requests", N)
        codes = [code for code, _, _ in burst]
        assert codes.count(200) == LIMIT and codes.count(429) == N - LIMIT, sorted(set(codes))
        assert all(b["error"]["type"] == "rate_limit_error" and ra >= 1 for code, b, ra in burst if code == 429)
        # the limit really bounds the work: the LLM never saw more runs at once
        assert srv.stats.max_in_flight <= LIMIT, srv.stats.max_in_flight
        tally.note(f"load: a burst of {N} while runs were slow: {LIMIT} admitted, {N - LIMIT} got 429 ({dt_429:.1f}s)")
        assert after - before < 64 * 1024, f"RSS grew {(after - before) // 1024} MiB over 200 requests"
        health = httpx.get(url + "/healthz").json()
        assert health["active"] == 0 and health["status"] == "ok"
