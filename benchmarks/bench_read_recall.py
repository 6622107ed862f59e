"""Which passages should Self-Ask's final reading pass show?  Retrieval only, no model.

For each question of a run directory that has RAG and Self-Ask records, the share of questions
whose gold supporting passages are *all* among: RAG's passages (the question's own search),
the first passages of Self-Ask's follow-up searches, and the two together as the reading pass
lays them out (``sleuth.strategies.repairs.reading``: the question's own first, at most two
thirds of the places, then the follow-ups' in retrieval order or by rank), for 6 and 8 places.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_read_recall.py docs/results/hotpotqa-open
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_records import items_of, records
from sleuth.eval.metrics import recall
from sleuth.eval.store import is_composed
from sleuth.strategies.repairs.reading import interleave

Found = list[dict[str, Any]]


def searches(rec: dict[str, Any], routes: tuple[str, ...]) -> list[Found]:
    return [
        list(ev["data"].get("passages") or [])
        for ev in rec["result"].get("trace") or []
        if ev.get("kind") == "search" and (ev.get("data") or {}).get("route") in routes
    ]


def laid_out(own: Found, hops: Found, places: int) -> Found:
    """The question's own first (two thirds of the places at most), then ``hops``, each once."""
    shown: dict[str, dict[str, Any]] = {p["id"]: p for p in own[: places - places // 3]}
    for p in hops:
        shown.setdefault(p["id"], p)
    return list(shown.values())[:places]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path)
    run = ap.parse_args().run
    items = items_of(run)
    by: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for r in records(run):
        if is_composed(r):
            by[r["qid"]][r["strategy"]] = r
    hits: dict[str, int] = defaultdict(int)
    n = 0
    for qid, recs in by.items():
        gold = items[qid].gold_ids
        if "rag" not in recs or "self-ask" not in recs or not gold:
            continue
        n += 1
        own = searches(recs["rag"], ("original",))[0]
        follow = searches(recs["self-ask"], ("follow_up",))
        in_order = [p for s in follow for p in s]
        rows = {"RAG's passages": own, "Self-Ask's first 5": list({p["id"]: p for p in in_order}.values())[:5]}
        for places in (8, 6):
            rows[f"{places} places, retrieval order"] = laid_out(own, in_order, places)
            rows[f"{places} places, by rank"] = laid_out(own, interleave(follow), places)
        for name, passages in rows.items():
            hits[name] += recall(gold, passages, by="id") == 1.0
    print(f"{run}: {n} questions; all gold passages among ...")
    for name, h in hits.items():
        print(f"  {name:28s} {h:3d}  ({h / n:.2f})")


if __name__ == "__main__":
    main()
