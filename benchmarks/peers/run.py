"""Sleuth side by side with FlashRAG, LangChain and DSPy: one command, one model, one index, the same questions.

    PYTHONPATH=src:. python -m benchmarks.peers.run [--limit N] [--rows a,b] [--model NAME]

See benchmarks/peers/README.md.  Starts the embedded llama.cpp server afresh for every row (or uses
``--base-url``), a counting proxy in front of it and a search endpoint over Sleuth's open-setting
index of each dataset; runs every row (each peer in its own venv), then scores all rows with Sleuth's metrics and writes
``docs/results/peers.md``.  Answers are kept per (row, dataset) under ``--work-dir``; a rerun skips
questions already answered.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before the engine loads

from benchmarks.peers.proxy import CountingProxy
from benchmarks.peers.questions import DATASETS, Benchmark, load_benchmark
from benchmarks.peers.report import read_lines, render, scored_records
from benchmarks.peers.rows import ROWS, UNRUNNABLE, run_peer_row, run_sleuth_row
from benchmarks.peers.searchd import SearchEndpoint
from benchmarks.peers.sittings import ENGINE_FRESH, ENGINE_SHARED, read_sittings, start_sitting
from benchmarks.peers.venvs import PEERS, ensure_venv, peers_dir

REPO = Path(__file__).resolve().parents[2]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.peers.run", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated rows (default all: {', '.join(ROWS)})")
    ap.add_argument("--datasets", default=",".join(DATASETS), help="comma-separated: hotpotqa, musique")
    ap.add_argument("--n", type=int, default=30, help="questions drawn per dataset (default 30)")
    ap.add_argument("--seed", type=int, default=0, help="the draw's seed (default 0)")
    ap.add_argument("--limit", type=int, default=None, help="only the first N drawn questions per dataset")
    ap.add_argument("--model", default="qwen2.5-1.5b", help="embedded model (default qwen2.5-1.5b)")
    ap.add_argument("--base-url", default=None, help="an already running OpenAI-compatible server instead")
    ap.add_argument("--k", type=int, default=5, help="passages per search, every row (default 5)")
    ap.add_argument("--data-dir", type=Path, default=None, help="folder holding hotpotqa/ and musique/")
    ap.add_argument("--work-dir", type=Path, default=None, help="answers and logs (default under the peers cache)")
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "results" / "peers.md")
    ap.add_argument("--smoke", action="store_true", help="head the report as a smoke run, not a result")
    ap.add_argument("--report-only", action="store_true", help="score what is recorded; run nothing")
    ap.add_argument(
        "--calibrate",
        action="store_true",
        help="start the model, record this machine's sitting (its speed) and run no row",
    )
    ap.add_argument(
        "--time-limit",
        default=None,
        metavar="DURATION",
        help="start no question after this long (e.g. 90m, 2h); the report says which rows stopped early",
    )
    args = ap.parse_args(argv)
    if args.time_limit is not None:
        from sleuth.cli.common import UserError
        from sleuth.cli.eval import parse_duration

        try:
            args.time_limit = parse_duration(args.time_limit)
        except UserError as e:
            ap.error(str(e))
    unknown = [r for r in args.rows.split(",") if r not in ROWS]
    if unknown:
        ap.error(f"unknown rows {', '.join(unknown)}; choose from {', '.join(ROWS)}")
    bad = [d for d in args.datasets.split(",") if d not in DATASETS]
    if bad:
        ap.error(f"unknown datasets {', '.join(bad)}; choose from {', '.join(DATASETS)}")
    if args.limit is not None and args.limit < 1:
        ap.error("--limit must be at least 1")
    return args


def _benchmarks(args: argparse.Namespace) -> list[Benchmark]:
    out = []
    for name in args.datasets.split(","):
        b = load_benchmark(name, args.n, args.seed, args.data_dir)
        if args.limit is not None:
            b.dataset.items = b.dataset.items[: args.limit]
        out.append(b)
    return out


def _versions() -> list[str]:
    import importlib.metadata as md

    out = [f"sleuth {md.version('sleuth')}"]
    for p in PEERS.values():
        out.append(p.label + (f" ({p.note})" if p.note else ""))
    return out


def _log_tail(log: Path, n: int = 3) -> str:
    lines = (
        [x for x in log.read_text(encoding="utf-8", errors="replace").splitlines() if x.strip()] if log.exists() else []
    )
    return " | ".join(lines[-n:])[-600:]


def _model_server(args: argparse.Namespace) -> tuple[str, str]:
    """The model's base URL (no ``/v1``) and name: ``--base-url``, or the embedded engine started."""
    if args.base_url:
        return args.base_url.rstrip("/").removesuffix("/v1"), args.model
    from sleuth.llm.embedded import get_server

    # the engine in a child process: stopping it is bounded (stdin closed, then terminate and kill).
    # In-process, its destructor once blocked for minutes after a stop mid-request (it joins a
    # thread of the engine's HTTP server; released only when a debugger attached)
    srv = get_server(args.model, mode="subprocess")
    return str(srv.base_url), srv.name


def _fresh_model_server(args: argparse.Namespace) -> str:
    """The embedded engine stopped and started again: a row starts with the engine's prompt cache
    empty, so what it processes (and how long it takes) never depends on the rows before it.

    One engine for all rows let a row reuse the prompts an earlier row left in llama.cpp's
    host-memory prompt cache: Sleuth's Self-Ask after Sleuth's RAG on the same questions processed
    2,113 / 829 / 1,912 prompt tokens on three HotpotQA questions against 2,404 / 1,299 / 1,939 on
    a fresh engine, the same calls and prompts (measured in stop 49)."""
    from sleuth.llm.embedded import stop_all

    stop_all()
    return _model_server(args)[0]


def calibrate(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """``--calibrate``: record this machine's sitting (the model's speed on it), run nothing else."""
    from sleuth.llm.embedded import stop_all

    try:
        upstream, model = _model_server(args)
        return start_sitting(work, upstream, model)
    finally:
        if not args.base_url:
            stop_all()


def run_rows(args: argparse.Namespace, benches: list[Benchmark], work: Path) -> dict[str, str]:
    """Run the chosen rows; returns the rows that could not run, with why.

    With ``--time-limit`` no question starts after the limit (counted from here); the rows not
    reached are left for the next sitting, which the same command resumes."""
    deadline = None if args.time_limit is None else time.time() + args.time_limit
    from sleuth.llm.embedded import stop_all
    from sleuth.search import open_retriever

    not_run: dict[str, str] = {}
    for b in benches:
        b.plan.prepare()
    endpoint = SearchEndpoint({b.name: open_retriever(b.plan.spec) for b in benches}).start()
    upstream, model = _model_server(args)
    proxy = CountingProxy(upstream).start()
    print(f"model {model} at {upstream}; proxy {proxy.url}; search {endpoint.url}", flush=True)
    try:
        # each row on a fresh engine, unless the caller's server is used (it cannot be restarted)
        fresh = not args.base_url
        entry = start_sitting(work, upstream, model, engine=ENGINE_FRESH if fresh else ENGINE_SHARED)
        sitting = entry["sitting"]
        print(f"sitting {entry}", flush=True)
        for name in args.rows.split(","):
            if deadline is not None and time.time() >= deadline:
                print(f"time limit reached; not starting {name}", flush=True)
                break
            row = ROWS[name]
            python = None
            if row.system != "sleuth":
                try:
                    python = ensure_venv(PEERS[row.system], work / "logs" / f"venv-{row.system}.log")
                except RuntimeError as e:
                    not_run[name] = str(e)
                    continue
            if fresh:
                proxy.retarget(_fresh_model_server(args))
                print(f"{name}: on a fresh engine at {proxy.upstream}", flush=True)
            for b in benches:
                out = work / "answers" / f"{name}.{b.name}.jsonl"
                try:
                    if python is None:
                        run_sleuth_row(row, b, proxy, model, args.k, out, deadline, sitting)
                        continue
                    log = work / "logs" / f"{name}.{b.name}.log"
                    search_url = f"{endpoint.url}/search/{b.name}"
                    rc = run_peer_row(row, python, b, proxy.url, search_url, model, args.k, out, log, deadline, sitting)
                except Exception as e:  # one row's crash never stops the others
                    not_run[name] = f"the driver failed on {b.name}: {type(e).__name__}: {e}"
                    continue
                if rc != 0:
                    not_run[name] = f"the adapter exited {rc} on {b.name}: {_log_tail(log)}"
    finally:
        proxy.stop()
        endpoint.stop()
        if not args.base_url:
            stop_all()
    return not_run


def _command(args: argparse.Namespace) -> str:
    """The command that makes these figures: the selection's options, without the sitting's own
    (``--time-limit``, ``--report-only``, ``--work-dir``, ``--out``), which change nothing in them."""
    parts = ["OMP_WAIT_POLICY=PASSIVE", "PYTHONPATH=src:.", "python", "-m", "benchmarks.peers.run"]
    default = parse_args([])
    for key in ("rows", "datasets", "n", "seed", "k", "limit", "base_url", "model"):
        value = getattr(args, key)
        if value != getattr(default, key):
            parts += ["--" + key.replace("_", "-"), str(value)]
    if args.smoke:
        parts.append("--smoke")
    return shlex.join(parts)


def write_report(args: argparse.Namespace, benches: list[Benchmark], work: Path, not_run: dict[str, str]) -> str:
    chosen = args.rows.split(",")
    records: list[dict[str, Any]] = []
    for name in chosen:
        for b in benches:
            items = {it.id: it for it in b.dataset.items}
            records += scored_records(name, b.name, read_lines(work / "answers" / f"{name}.{b.name}.jsonl"), items)
    rows = [{"name": n, "system": ROWS[n].system, "pipeline": ROWS[n].pipeline} for n in chosen]
    pairs = {n: f"sleuth-{ROWS[n].method}" for n in chosen if f"sleuth-{ROWS[n].method}" in chosen}
    datasets = {b.name: len(b.dataset.items) for b in benches}
    n_q = sum(datasets.values())
    if args.smoke:
        header = f"# Peers: SMOKE RUN, {n_q} questions, not a result\n\nThis proves the rows run end to end; its figures mean nothing."
    else:
        header = "# Sleuth side by side with FlashRAG, LangChain and DSPy"
    header += (
        f"\n\nModel {args.model}; {', '.join(b.name for b in benches)}: {n_q} questions "
        f"(seed {args.seed}), open setting, k={args.k}; retrieval identical for every row (Sleuth's index over HTTP); "
        "LLM calls and processed prompt tokens counted by one proxy in front of the model for every row."
    )
    text = render(
        records,
        rows,
        header=header,
        command=_command(args),
        versions=_versions(),
        pairs=pairs,
        not_run={**not_run, **UNRUNNABLE},
        datasets=datasets,
        optional={n: ROWS[n].optional for n in chosen if ROWS[n].optional},
        sittings=read_sittings(work),
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    return text


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    work = args.work_dir or peers_dir() / "runs" / f"{args.model}-seed{args.seed}-n{args.n}"
    from sleuth.llm.base import LLMUnavailable
    from sleuth.llm.models import get_model

    if not (args.base_url or args.report_only):  # these start no model
        try:
            get_model(args.model)
        except KeyError as e:
            print(f"error: {e.args[0]}", file=sys.stderr)
            return 2
    # SIGTERM (a `timeout`, a job scheduler) stops like Ctrl-C: the model server, the proxy, the
    # search endpoint and a running peer adapter are all stopped, never left holding the cores
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        if args.calibrate:
            print(f"sitting {calibrate(args, work)}")
            return 0
        benches = _benchmarks(args)
        not_run = {} if args.report_only else run_rows(args, benches, work)
    except (ValueError, FileNotFoundError, LLMUnavailable) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"stopped; what was answered is kept in {work}: the same command resumes", file=sys.stderr)
        return 130
    print(write_report(args, benches, work, not_run))
    print(f"wrote {args.out}; answers and logs in {work}")
    return 0


if __name__ == "__main__":
    rc = main()
    if rc == 130:  # stopped: a thread still waiting on the stopped model server must not hold the exit
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rc)
    raise SystemExit(rc)
