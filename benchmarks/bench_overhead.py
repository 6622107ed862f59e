"""Orchestration overhead per strategy: wall time spent outside LLM calls and searches.

Every strategy answers the same real HotpotQA questions against the fake
OpenAI-compatible server (``tests/fake_openai_server.py``: a real HTTP server on
127.0.0.1 with a fixed per-token latency, answers scripted so that every
scaffold runs its full course: 2 follow-ups / searches per question) and a real
BM25 index over 1000 Wikipedia passages.

Two measurements per strategy, in the same run:

* trace: ``overhead = wall - llm_seconds - search_seconds`` (the durations the
  strategy records around each call);
* baseline: the same LLM calls (same prompts, same parameters) and searches
  replayed by a bare loop with no strategy code; ``overhead = wall - replay``;
* CPU: the strategy thread's CPU time outside the LLM client and the index
  (``time.thread_time``), which a shared, overloaded CPU does not inflate.

Target: overhead < 2 % of the wall time.

    .venv/bin/python benchmarks/bench_overhead.py [--questions 8] [--request-latency 0.05] [--token-latency 0.01] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scripted import ScriptedModel, fake_server_class, hotpot_questions, pct, wiki_retriever
from sleuth.llm import GenParams, OnDelta, OpenAICompatLLM
from sleuth.strategies import STRATEGIES, get_strategy

TARGET = 0.02


class RecordingLLM:
    """Passes calls through to ``inner`` and records them for the replay baseline."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.model = inner.model
        self.calls: list[tuple[str, Any, GenParams | None]] = []
        self.cpu = 0.0  # this thread's CPU seconds inside the client (HTTP, JSON)

    def complete(self, prompt: str, params: GenParams | None = None, *, on_delta: OnDelta | None = None) -> Any:
        self.calls.append(("complete", prompt, params))
        c = time.thread_time()
        try:
            return self.inner.complete(prompt, params, on_delta=on_delta)
        finally:
            self.cpu += time.thread_time() - c

    def chat(
        self, messages: Sequence[dict[str, str]], params: GenParams | None = None, *, on_delta: OnDelta | None = None
    ) -> Any:
        self.calls.append(("chat", [dict(m) for m in messages], params))
        c = time.thread_time()
        try:
            return self.inner.chat(messages, params, on_delta=on_delta)
        finally:
            self.cpu += time.thread_time() - c


class RecordingRetriever:
    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[tuple[str, Any, Any, Any]] = []
        self.cpu = 0.0

    def search(self, query: str, k: int = 5, filters: Any = None) -> Any:
        self.calls.append(("search", query, k, filters))
        c = time.thread_time()
        try:
            return self.inner.search(query, k, filters)
        finally:
            self.cpu += time.thread_time() - c

    def search_batch(self, queries: Sequence[str], k: int = 5, filters: Any = None) -> Any:
        self.calls.append(("search_batch", list(queries), k, filters))
        c = time.thread_time()
        try:
            return self.inner.search_batch(queries, k, filters)
        finally:
            self.cpu += time.thread_time() - c


@dataclass
class Row:
    strategy: str
    n: int
    calls: float
    searches: float
    wall: float  # seconds per question
    llm: float
    search: float
    replay: float
    cpu: float  # orchestration CPU seconds per question (this thread, outside the client and the index)

    @property
    def overhead(self) -> float:
        return self.wall - self.llm - self.search

    @property
    def overhead_vs_replay(self) -> float:
        return self.wall - self.replay


def replay(llm: Any, retriever: Any, rec_llm: RecordingLLM, rec_ret: RecordingRetriever, order: list[str]) -> float:
    """The same calls in the same order, no strategy code: the floor a strategy cannot beat."""
    it_llm, it_ret = iter(rec_llm.calls), iter(rec_ret.calls)
    t = time.perf_counter()
    for kind in order:
        if kind == "llm":
            name, payload, params = next(it_llm)
            getattr(llm, name)(payload, params)
        else:
            name, q, k, f = next(it_ret)
            getattr(retriever, name)(q, k, f)
    return time.perf_counter() - t


def flush(llm: Any) -> None:
    """Reset the fake server's one-slot prefix cache so that run and replay start from the same state."""
    llm.complete("flush", GenParams(max_tokens=1))


def measure(name: str, llm: Any, retriever: Any, questions: list[str]) -> Row:
    strat_warm = get_strategy(name, llm, retriever, lang="en")
    strat_warm.run(questions[0])  # warm-up: imports, prompt templates, connections
    walls, llms, searches, replays, ncalls, nsearch, cpus = [], [], [], [], [], [], []
    for q in questions:
        rl, rr = RecordingLLM(llm), RecordingRetriever(retriever)
        strat = get_strategy(name, rl, rr, lang="en")
        flush(llm)
        t, c = time.perf_counter(), time.thread_time()
        res = strat.run(q)
        wall = time.perf_counter() - t
        cpus.append(time.thread_time() - c - rl.cpu - rr.cpu)
        if res.finish_reason not in ("finished", "step_limit"):
            raise SystemExit(f"{name}: run failed ({res.finish_reason}: {res.error})")
        order = [e.kind for e in res.trace.events if e.kind in ("llm", "search")]
        walls.append(wall)
        llms.append(res.llm_seconds)
        searches.append(res.search_seconds)
        ncalls.append(res.llm_calls)
        nsearch.append(res.searches)
        flush(llm)
        replays.append(replay(llm, retriever, rl, rr, order))
    mean = statistics.fmean
    return Row(
        name,
        len(questions),
        mean(ncalls),
        mean(nsearch),
        mean(walls),
        mean(llms),
        mean(searches),
        mean(replays),
        mean(cpus),
    )


def profile(name: str, llm: Any, retriever: Any, questions: list[str], top: int = 12) -> str:
    """Where the time outside the LLM client and the index goes (cProfile, self time)."""
    strat = get_strategy(name, llm, retriever, lang="en")
    pr = cProfile.Profile()
    pr.enable()
    for q in questions:
        strat.run(q)
    pr.disable()
    buf = io.StringIO()
    st = pstats.Stats(pr, stream=buf)
    st.sort_stats("tottime")
    rows = []
    for (file, line, fn), (_cc, nc, tt, _ct, _callers) in st.stats.items():  # type: ignore[attr-defined]
        if "/sleuth/" in file and "/sleuth/llm/" not in file and "/sleuth/search/" not in file:
            rows.append((tt, nc, f"{file.split('/sleuth/')[-1]}:{line}({fn})"))
    rows.sort(reverse=True)
    lines = [f"  {1000 * tt / len(questions):7.2f} ms/q  {nc:6d} calls  {where}" for tt, nc, where in rows[:top]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--questions", type=int, default=8, help="questions per strategy")
    ap.add_argument("--token-latency", type=float, default=0.01, help="fake server seconds per generated token")
    ap.add_argument("--prompt-latency", type=float, default=0.0001, help="seconds per uncached prompt token")
    ap.add_argument(
        "--request-latency", type=float, default=0.05, help="fixed seconds per request (time to first token)"
    )
    ap.add_argument("--hops", type=int, default=2)
    ap.add_argument("--strategies", default=",".join(STRATEGIES))
    ap.add_argument("--profile", action="store_true", help="also print the strategy-side hot spots")
    a = ap.parse_args(argv)

    retriever = wiki_retriever()
    questions = hotpot_questions(a.questions, offset=100)
    FakeOpenAIServer = fake_server_class()
    rows: list[Row] = []
    t0 = time.perf_counter()
    with FakeOpenAIServer(
        script=ScriptedModel(hops=a.hops),
        token_latency_s=a.token_latency,
        prompt_token_latency_s=a.prompt_latency,
        request_latency_s=a.request_latency,
    ) as srv:
        llm = OpenAICompatLLM(srv.base_url, "fake-model", max_retries=0)
        for name in a.strategies.split(","):
            rows.append(measure(name, llm, retriever, questions))
        print(
            f"Orchestration overhead ({a.questions} HotpotQA questions per strategy; fake server "
            f"{1000 * a.request_latency:g} ms/request + {1000 * a.token_latency:g} ms/token + "
            f"{1000 * a.prompt_latency:g} ms/prompt token; "
            f"1000-passage BM25 index)\n"
        )
        hdr = (
            f"{'strategy':<10} {'calls':>5} {'srch':>4} {'wall ms':>8} {'llm ms':>8} {'srch ms':>7} "
            f"{'ovh ms':>7} {'ovh %':>7} {'replay ms':>9} {'ovh-vs-replay %':>15} {'ovh CPU ms':>10} {'CPU %':>6}  target <2 %"
        )
        print(hdr)
        print("-" * len(hdr))
        worst = 0.0
        for r in rows:
            share, share_b = r.overhead / r.wall, r.overhead_vs_replay / r.wall
            worst = max(worst, share)
            print(
                f"{r.strategy:<10} {r.calls:5.1f} {r.searches:4.1f} {1000 * r.wall:8.1f} {1000 * r.llm:8.1f} "
                f"{1000 * r.search:7.1f} {1000 * r.overhead:7.2f} {pct(share):>7} {1000 * r.replay:9.1f} "
                f"{pct(share_b):>15} {1000 * r.cpu:10.2f} {pct(r.cpu / r.wall):>6}  {'ok' if share < TARGET else 'MISS'}"
            )
        tot_wall = sum(r.wall for r in rows)
        tot_ovh = sum(r.overhead for r in rows)
        tot_cpu = sum(r.cpu for r in rows)
        print(
            f"\nall strategies: overhead {1000 * tot_ovh / len(rows):.2f} ms per question, "
            f"{pct(tot_ovh / tot_wall)} of wall time; worst {pct(worst)} (target < {pct(TARGET)})\n"
            f"orchestration CPU time (this thread, outside client and index): {1000 * tot_cpu / len(rows):.2f} ms "
            f"per question, {pct(tot_cpu / tot_wall)}; wall overhead above it is waiting for a CPU "
            f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)"
        )
        if a.profile:
            worst_row = max(rows, key=lambda r: r.overhead / r.wall)
            print(f"\nstrategy-side hot spots of {worst_row.strategy} (cProfile self time, inflated by profiling):")
            print(profile(worst_row.strategy, llm, retriever, questions))
        llm.close()
    print(f"\n(benchmark ran {time.perf_counter() - t0:.1f} s)")
    return 0 if worst < TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
