"""Grounded citations on committed runs, offline: the recorded citations against re-grounded ones.

For every record of a run directory (``results.jsonl`` or ``results.jsonl.gz``) the claims
are read back from its trace (:mod:`sleuth.strategies.grounding_trace`), grounded
(:func:`sleuth.strategies.grounding.ground`) and scored with the project's own metrics
(:func:`sleuth.eval.metrics.citation_precision`, :func:`~sleuth.eval.metrics.recall` by id)
against the data file named in the run's ``run.json``.  Both the recorded ("old") and the
re-grounded ("new") citations are scored in the same pass.  No model is started.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_citations.py docs/results/hotpotqa-open docs/results/musique-open

Precision is the mean over the answers that cite something (as in the reports' Citations
table), recall the mean over all answers; ``citing`` is how many cite.
"""

from __future__ import annotations

import argparse
import gzip
import json
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sleuth.eval.datasets import load_dataset
from sleuth.eval.items import Item
from sleuth.eval.metrics import citation_precision, recall
from sleuth.strategies.grounding_trace import reground

ROOT = Path(__file__).resolve().parents[1]


def records(run: Path) -> Iterator[dict[str, Any]]:
    for name in ("results.jsonl.gz", "results.jsonl"):
        path = run / name
        if path.is_file():
            with gzip.open(path, "rt") if name.endswith(".gz") else path.open() as f:
                yield from (json.loads(line) for line in f if line.strip())
            return


def items_of(run: Path) -> dict[str, Item]:
    manifest = json.loads((run / "run.json").read_text())
    data = Path(manifest["data"]["path"])
    if not data.is_absolute():  # written relative to the directory the run was started in
        data = next((b / data for b in (ROOT, run, Path.cwd()) if (b / data).is_file()), ROOT / data)
    fmt = (manifest.get("settings") or {}).get("format")
    return {it.id: it for it in load_dataset(data, fmt).items}


def mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def measure(run: Path) -> list[dict[str, Any]]:
    items = items_of(run)
    by: dict[str, dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
    for rec in records(run):
        item = items.get(str(rec.get("qid")))
        result = rec.get("result") or {}
        if item is None or not item.gold_ids or not result:
            continue
        new = [p.to_dict() for p in reground(rec["strategy"], result).citations]
        row = by[rec["strategy"]]
        for tag, cited in (("old", list(result.get("citations") or [])), ("new", new)):
            p = citation_precision(item.gold_ids, cited)
            if p is not None:
                row[f"{tag}_p"].append(p)
            row[f"{tag}_r"].append(recall(item.gold_ids, cited, by="id"))
            row[f"{tag}_n"].append(len(cited))
    out = []
    for s, row in by.items():
        if not any(row["old_n"]) and not any(row["new_n"]):
            continue  # a strategy that never cites (direct, CoT)
        out.append(
            {
                "strategy": s,
                "n": len(row["old_r"]),
                **{
                    f"{tag}_{k}": v
                    for tag in ("old", "new")
                    for k, v in (
                        ("citing", len(row[f"{tag}_p"])),
                        ("precision", mean(row[f"{tag}_p"])),
                        ("recall", mean(row[f"{tag}_r"])),
                        ("per_answer", mean(row[f"{tag}_n"])),
                    )
                },
            }
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="run directories (with run.json and results)")
    args = ap.parse_args()
    for run in args.runs:
        print(f"\n## {run}\n")
        print(
            "| strategy | n | old citing | old precision | old recall | old cited/answer "
            "| new citing | new precision | new recall | new cited/answer |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|")
        for r in measure(run):
            cells = [r["strategy"], str(r["n"])]
            for tag in ("old", "new"):
                cells += [
                    str(r[f"{tag}_citing"]),
                    f"{r[f'{tag}_precision']:.3f}",
                    f"{r[f'{tag}_recall']:.3f}",
                    f"{r[f'{tag}_per_answer']:.1f}",
                ]
            print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
