"""Short answers fitted to the question's answer type, measured offline on recorded runs.

Re-applies :func:`sleuth.strategies.short_fit.fit_short` to the short answers that
recorded runs produced (no model is started) and rescores old and new with the
project's metrics (EM and token F1, Chinese gold scored as Chinese), per dataset and
strategy, and per expected answer type, in one run::

    python benchmarks/bench_short_answers.py /work/runs/tune/*/results.jsonl
    python benchmarks/bench_short_answers.py docs/results/musique-open/results.jsonl.gz --task sub --show 20

Only the *post-check* can be measured this way: a change to the short-answer prompt
changes what the model writes, which needs a real run.

``--from-long`` measures instead whether the short-answer *call* could be dropped: for the
records whose reply had no "So the answer is:" line (a ``parse_fallback`` note: the short
answer came from ``short_answer.txt``), the new short answer is the long answer fitted
directly (citation marks and a leading "The answer is:" removed), kept only when it comes to
at most 8 words::

    python benchmarks/bench_short_answers.py docs/results/hotpotqa-hybrid docs/results/musique-hybrid --from-long
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sleuth.eval.metrics import exact_match, f1
from sleuth.eval.metrics_zh import em_zh, f1_zh, is_chinese
from sleuth.strategies.answer_type import answer_type
from sleuth.strategies.short_fit import fit_short


def records(path: Path) -> Iterator[dict[str, Any]]:
    """The records of a results file, or of a run directory (its newest record per task)."""
    if path.is_dir():
        from sleuth.eval.store import read_records

        yield from read_records(path)
        return
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError:  # a torn last line of a running eval
                    continue


_CITES = re.compile(r"\s*\[\d+(?:\s*[,\-]\s*\d+)*\]")
_ANSWER_IS = re.compile(r"^(?:the\s+)?answer\s+is:?\s*", re.I)


def fell_back(r: dict[str, Any]) -> bool:
    """The record's short answer came from the short-answer call (no "So the answer is:" line)."""
    trace = (r.get("result") or {}).get("trace") or []
    return any(e.get("kind") == "note" and (e.get("data") or {}).get("type") == "parse_fallback" for e in trace)


def from_long(question: str, long: str, old: str) -> str:
    """The long answer fitted as the short one, when that is at most 8 words; else ``old``."""
    fitted = fit_short(question, _ANSWER_IS.sub("", _CITES.sub("", long).strip()))
    return fitted if len(fitted.split()) <= 8 else old


def em_f1(pred: str, golds: list[str]) -> tuple[float, float]:
    if any(is_chinese(g) for g in golds):
        return em_zh(pred, golds), f1_zh(pred, golds)
    return exact_match(pred, golds), f1(pred, golds)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", type=Path, help="results.jsonl[.gz] files or run directories")
    ap.add_argument("--task", default="", help="only records of this task kind (main, sub)")
    ap.add_argument("--show", type=int, default=0, help="print this many changed answers")
    ap.add_argument("--from-long", action="store_true", help="fallback records: the long answer fitted, no call")
    args = ap.parse_args()
    missing = [str(p) for p in args.files if not p.exists()]
    if missing:
        ap.error("no such file or run directory: " + ", ".join(missing))

    sums: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0.0, 0.0, 0])
    by_type: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0.0, 0.0, 0])
    shown = 0
    for path in args.files:
        for r in records(path):
            task = r.get("task") or {}
            kind = task.get("kind", "") if isinstance(task, dict) else str(task)
            if args.task and kind != args.task:
                continue
            golds = [str(g) for g in r.get("answers") or []]
            if r.get("status") != "ok" or r.get("type", "open") != "open" or not golds:
                continue
            old = str(r.get("short_answer") or "") or str(r.get("answer") or "")
            t = answer_type(r["question"])
            if args.from_long:
                if not fell_back(r):
                    continue
                new = from_long(r["question"], str(r.get("answer") or ""), old)
            else:
                new = fit_short(r["question"], old, t)
            (e0, f0), (e1, f1_) = em_f1(old, golds), em_f1(new, golds)
            for acc in (sums[(str(r.get("dataset", path.parent.name)), r["strategy"])], by_type[t.kind]):
                acc[0] += 1
                acc[1] += e0
                acc[2] += e1
                acc[3] += f0
                acc[4] += f1_
                acc[5] += new != old
            if new != old and shown < args.show:
                shown += 1
                print(
                    f"[{t.kind}] {r['question']}\n   gold {golds[:2]}\n   {old!r}\n-> {new!r}  F1 {f0:.2f} -> {f1_:.2f}"
                )

    def table(title: str, rows: dict[Any, list[float]]) -> None:
        print(
            f"\n{title:<44} {'n':>5} {'changed':>7} {'EM old':>7} {'EM new':>7} {'F1 old':>7} {'F1 new':>7} {'dF1':>7}"
        )
        tot = [0, 0.0, 0.0, 0.0, 0.0, 0]
        for key, (n, e0, e1, f0, f1_, ch) in sorted(rows.items()):
            name = " / ".join(key) if isinstance(key, tuple) else key
            print(
                f"{name:<44} {n:>5} {ch:>7} {e0 / n:>7.3f} {e1 / n:>7.3f} {f0 / n:>7.3f} {f1_ / n:>7.3f} {(f1_ - f0) / n:>+7.3f}"
            )
            tot = [a + b for a, b in zip(tot, (n, e0, e1, f0, f1_, ch), strict=True)]
        n = tot[0] or 1
        print(
            f"{'all':<44} {tot[0]:>5} {tot[5]:>7} {tot[1] / n:>7.3f} {tot[2] / n:>7.3f} {tot[3] / n:>7.3f} {tot[4] / n:>7.3f} {(tot[4] - tot[3]) / n:>+7.3f}"
        )

    table("dataset / strategy", sums)
    table("expected answer type", by_type)


if __name__ == "__main__":
    main()
