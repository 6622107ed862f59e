"""What a re-run costs with the response cache warm: ``sleuth eval`` on the fake OpenAI server, then
``sleuth eval rerun`` of the same directory with no code change.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_rerun.py [--limit 30] [--data PATH]

Prints the requests the model server received and the seconds of each, how many records the re-run
made again from the cache, and the report's lines that changed (only its code line should).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fake_openai_server import FakeOpenAIServer  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(ROOT.parent / "shared/data/hotpotqa/train.jsonl"))
    ap.add_argument("--limit", type=int, default=30)
    ap.add_argument("--strategies", default="direct,rag,self-ask")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-rerun-"))
    env = {**os.environ, "SLEUTH_CACHE_DIR": str(work / "cache"), "SLEUTH_EVAL_CACHE": str(work / "indexes")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    out = work / "run"
    sleuth = [sys.executable, "-m", "sleuth", "eval"]
    with FakeOpenAIServer(token_latency_s=0.002) as srv:
        first = [*sleuth, "--data", args.data, "--setting", "open", "--search-mode", "lexical", "--max-steps", "3"]
        first += ["--strategies", args.strategies, "--limit", str(args.limit), "--out", str(out)]
        first += ["--model", "scripted", "--base-url", srv.base_url, "--no-progress"]
        for name, cmd in (("first run", first), ("warm rerun", [*sleuth, "rerun", str(out), "--no-progress"])):
            before, t0 = len(srv.requests), time.perf_counter()
            report = (out / "report.md").read_text(encoding="utf-8") if (out / "report.md").exists() else ""
            done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
            print(
                f"{name}: {len(srv.requests) - before} requests, {time.perf_counter() - t0:.1f} s wall; {done.stdout.strip()}"
            )
    recs = [json.loads(ln) for ln in (out / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    newest = {(r["strategy"], r["qid"]): r for r in recs}
    print(f"records made again from the cache: {sum(bool(r.get('cached')) for r in newest.values())} of {len(newest)}")
    now = (out / "report.md").read_text(encoding="utf-8").splitlines()
    changed = [b for a, b in zip(report.splitlines(), now, strict=True) if a != b]
    print("report lines changed:", *changed, sep="\n  ")


if __name__ == "__main__":
    main()
