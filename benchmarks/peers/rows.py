"""The rows of the comparison: which system and pipeline, which Sleuth method it pairs with, how it runs.

Every row writes the same JSON lines (``{qid, answer, llm_calls, prompt_tokens,
processed_prompt_tokens, completion_tokens, model_ms, seconds, failure, error, sitting}``;
Sleuth's rows also ``short_answer`` and ``reason``), one file per (row, dataset), resumable.  A row is
made again after a change to Sleuth's code by deleting its file and running it again.
"""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.peers.adapters.common import append_line, counted, done_ids
from benchmarks.peers.proxy import CountingProxy
from benchmarks.peers.questions import Benchmark
from benchmarks.peers.venvs import PEERS

__all__ = [
    "ROWS",
    "UNRUNNABLE",
    "Row",
    "answer_fields",
    "run_peer_row",
    "run_sleuth_row",
    "sleuth_config",
]

ADAPTERS = Path(__file__).resolve().parent / "adapters"


@dataclass(frozen=True)
class Row:
    name: str
    system: str  # "sleuth" or a key of PEERS
    method: str  # the Sleuth method it is paired with
    pipeline: str  # what runs: a Sleuth strategy or the peer's pipeline, with its defaults
    #: why the comparison is complete without this row ("" when it is required): an alternative the
    #: issue leaves open ("and/or"); it still runs when named in ``--rows`` and is reported like any other
    optional: str = ""


ROWS: dict[str, Row] = {
    r.name: r
    for r in (
        Row("sleuth-direct", "sleuth", "direct", "direct"),
        Row("sleuth-rag", "sleuth", "rag", "rag"),
        Row("sleuth-self-ask", "sleuth", "self-ask", "self-ask"),
        Row("sleuth-search-o1", "sleuth", "search-o1", "search-o1"),
        Row("flashrag-standard", "flashrag", "rag", "SequentialPipeline (standard RAG)"),
        Row("flashrag-self-ask", "flashrag", "self-ask", "SelfAskPipeline (multi-hop, max_iter=5, max_tokens=100)"),
        Row("flashrag-ircot", "flashrag", "search-o1", "IRCOTPipeline (max_iter=5)"),
        Row("langchain-self-ask", "langchain", "self-ask", "self-ask-with-search agent"),
        Row("dspy-multihop", "dspy", "self-ask", "SimplifiedBaleen (docs' multi-hop program)"),
        Row(
            "dspy-react",
            "dspy",
            "search-o1",
            "dspy.ReAct with a search tool",
            optional="an alternative to dspy-multihop (the comparison asks for DSPy's multi-hop program and/or dspy.ReAct); "
            "11 calls and 469 s a question in the smoke run on the 0.5B model (no max_tokens, up to 20 "
            "iterations), so hours for the 60 on 2 cores; `--rows dspy-react` runs it",
        ),
    )
}

#: rows on a peer's own default retriever, and why they cannot run here (offline, no keys)
UNRUNNABLE: dict[str, str] = {
    "flashrag-own-retriever": "FlashRAG's default retriever is e5 dense retrieval (intfloat/e5-base-v2 "
    "weights from the Hugging Face hub plus a prebuilt faiss index): no weights are reachable offline",
    "langchain-own-retriever": "the self-ask agent's documented search tool is SerpAPI (a web API with a key): "
    "not reachable offline",
    "dspy-own-retriever": "DSPy's documented retriever is a hosted ColBERTv2 server (wiki17 abstracts): "
    "not reachable offline",
}

#: a Sleuth finish reason -> the report's failure kind ("finished" is none; an unlisted reason,
#: such as a model or search error, is an exception); Search-o1's repeat_limit (its queries kept
#: repeating, the answer forced) is a loop
_SLEUTH_FAILURE = {"step_limit": "step_limit", "repeat_limit": "loop", "parse_error": "parse_error", "loop": "loop"}


def sleuth_failure(reason: str) -> str:
    """The failure kind of a Sleuth record that ended with ``reason`` ("" when it finished)."""
    return "" if reason == "finished" else _SLEUTH_FAILURE.get(reason, "exception")


def answer_fields(rec: dict[str, Any]) -> dict[str, str]:
    """What a Sleuth row's line says of an eval worker's record: its answers and how it ended."""
    result = rec.get("result") or {}
    reason = str(rec.get("reason") or "")
    return {
        "answer": str(result.get("answer") or ""),
        "short_answer": str(result.get("short_answer") or ""),
        "failure": sleuth_failure(reason),
        "reason": reason,
        "error": str(rec.get("error") or "")[:2000],
    }


def sleuth_config(model: str, base_url: str, k: int, bench: Benchmark) -> dict[str, Any]:
    """The eval worker's task config of a Sleuth row (the model reached at ``base_url``)."""
    return {
        "model": model,
        "base_url": base_url,
        "options": {"k": k},
        # no response cache: every call reaches the model, so calls and seconds are comparable;
        # the embedded backend's own request settings (prompt cache on, its timeout) kept behind the proxy
        "llm_options": {
            "cache": False,
            "n_parallel": 1,
            "isolated": False,
            "timeout": 600,
            "extra_body": {"cache_prompt": True},
        },
        "retrieval": bench.plan,
    }


def run_sleuth_row(
    row: Row,
    bench: Benchmark,
    proxy: CountingProxy,
    model: str,
    k: int,
    out: Path,
    deadline: float | None = None,
    sitting: str = "",
) -> None:
    """Sleuth's strategy through Sleuth's own eval worker, on the proxy (as a remote OpenAI-compatible server).

    No question starts after ``deadline`` (``time.time()`` seconds)."""
    from sleuth.eval.worker import run_task

    config = sleuth_config(model, proxy.url + "/v1", k, bench)
    seen = done_ids(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    for item in bench.dataset.items:
        if item.id in seen:
            continue
        if deadline is not None and time.time() >= deadline:
            print(f"{row.name}: time limit reached; stopping before {item.id}", flush=True)
            return
        before = proxy.counters()
        t0 = time.perf_counter()
        rec = run_task({"item": item, "strategy": row.pipeline, "config": config})
        seconds = time.perf_counter() - t0
        after = proxy.counters()
        line: dict[str, Any] = {
            "qid": item.id,
            **answer_fields(rec),
            "seconds": round(seconds, 3),
            **counted(before, after),
        }
        if sitting:
            line["sitting"] = sitting
        append_line(out, line)
        print(f"{row.name} {item.id}: {line['short_answer'] or line['answer'][:80]!r} {line['failure']}", flush=True)


def run_peer_row(
    row: Row,
    python: Path,
    bench: Benchmark,
    llm_url: str,
    search_url: str,
    model: str,
    k: int,
    out: Path,
    log: Path,
    deadline: float | None = None,
    sitting: str = "",
) -> int:
    """The peer's adapter in the peer's own venv; its exit status (its lines are in ``out``).

    The adapter starts no question after ``deadline``; if this process is stopped (Ctrl-C, or
    SIGTERM, which the driver turns into Ctrl-C) the adapter is killed with it, never left running
    against the model."""
    qfile = out.with_suffix(".questions.jsonl")
    qfile.parent.mkdir(parents=True, exist_ok=True)
    qfile.write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in bench.questions()), encoding="utf-8")
    adapter = ADAPTERS / f"{PEERS[row.system].name}_row.py"
    cmd = [str(python), str(adapter), "--row", row.name, "--questions", str(qfile), "--out", str(out)]
    cmd += ["--llm", llm_url, "--search", search_url, "--model", model, "--k", str(k)]
    if deadline is not None:
        cmd += ["--deadline", f"{deadline:.3f}"]
    if sitting:
        cmd += ["--sitting", sitting]
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a", encoding="utf-8") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        return subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT)  # kills the adapter if we are stopped
