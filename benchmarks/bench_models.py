"""Speed of each installed embedded model: load time, prompt and decode tokens/s, resident memory.

Each model is started fresh in its own server process (so its RSS is measured
alone), with ``OMP_WAIT_POLICY=PASSIVE``; rates are llama.cpp's own timings,
best of ``--repeats``.

    .venv/bin/python benchmarks/bench_models.py [--threads 2] [--json] [NAMES...]
"""

from __future__ import annotations

import argparse
import json
import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from sleuth.llm.bench import bench_model, format_table
from sleuth.llm.models import MODELS, is_installed


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="models (default: every installed one)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt-tokens", type=int, default=384)
    ap.add_argument("--decode-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    names = a.names or [n for n in MODELS if is_installed(n)]
    rows = [
        bench_model(
            n, threads=a.threads, prompt_tokens=a.prompt_tokens, decode_tokens=a.decode_tokens, repeats=a.repeats
        )
        for n in names
    ]
    if a.json:
        print(json.dumps([r.to_dict() for r in rows], indent=2))
    else:
        print(format_table(rows))


if __name__ == "__main__":
    main()
