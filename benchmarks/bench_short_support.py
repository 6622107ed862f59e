"""The short answer's fail-safe, measured offline on recorded runs (no model is started).

:func:`sleuth.strategies.repairs.support.unsupported_note` makes no model call and nothing in a run
depends on it, so applying it to stored records is the paired comparison: "without" scores the
stored short answer, "with" scores it as the check leaves it (empty when refused: the long answer
stands), over the question, the stored answer and the passages of the trace's ``search`` events.
Only tuning questions are read: MuSiQue's tuning half (:mod:`sleuth.eval.splits`), never
``hotpotqa/test.jsonl``.  Prints, per run and strategy, the records, the refusals and the primary
metric without and with the check, then every refused span with its gold answer::

    python benchmarks/bench_short_support.py docs/results/musique-open docs/results/musique-hybrid \\
        docs/results/timeqa-open docs/results/policy_zh
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from sleuth.eval.datasets import load_dataset
from sleuth.eval.metrics import primary_metric, score
from sleuth.eval.splits import HOTPOTQA_REPORTING, MUSIQUE, musique_split
from sleuth.eval.store import read_records
from sleuth.strategies.repairs.support import unsupported_note


def measure(run: Path) -> None:
    path = json.loads((run / "run.json").read_text(encoding="utf-8"))["data"]["path"]
    if path.endswith(HOTPOTQA_REPORTING):
        print(f"{run}: a reporting split, skipped")
        return
    ds = load_dataset(Path(path))
    if path.endswith(MUSIQUE):
        ds = musique_split(ds, "tuning")
    items = {it.id: it for it in ds.items}
    agg: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0])  # records, without, with, refused
    refused = []
    for rec in read_records(run):
        res, item = rec.get("result"), items.get(rec["qid"])
        if not res or item is None:
            continue
        events = res.get("trace") or []
        passages = [
            f"{p.get('title') or ''}\n{p.get('text') or ''}"
            for e in events
            if e.get("kind") == "search"
            for p in e["data"].get("passages") or ()
        ]
        short = res.get("short_answer", "")
        note = unsupported_note(rec["question"], short, res.get("answer", ""), passages)
        metric = primary_metric(item)
        before = score(item, res)[metric]
        after = score(item, {**res, "short_answer": ""})[metric] if note else before
        a = agg[rec["strategy"]]
        a[0], a[1], a[2], a[3] = a[0] + 1, a[1] + before, a[2] + after, a[3] + bool(note)
        if note:
            refused.append(
                f"  {rec['strategy']} {rec['qid']}: {short!r} (gold {item.answers[0]!r}) {before:.2f} -> {after:.2f}"
            )
    n, without, with_, k = (sum(a[i] for a in agg.values()) for i in range(4))
    if not n:
        print(f"{run}: no tuning records")
        return
    print(f"{run}: {n:.0f} records, {k:.0f} refused, primary metric {without / n:.3f} -> {with_ / n:.3f}")
    for s, a in sorted(agg.items()):
        print(f"  {s}: {a[0]:.0f} records, {a[3]:.0f} refused, {a[1] / a[0]:.3f} -> {a[2] / a[0]:.3f}")
    print("\n".join(refused))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path, help="run directories (results.jsonl[.gz] and run.json)")
    for run in ap.parse_args().runs:
        measure(run)


if __name__ == "__main__":
    main()
