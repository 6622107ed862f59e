"""Would a final reading pass help a multi-hop strategy?  Replayed on committed runs, with the model.

For each record of the chosen strategies in a run directory, the passages its searches found
(in order of first retrieval, each once, at most ``--k``) are handed to Sleuth's RAG strategy
as if one search had found them, and RAG answers the question from them: "RAG over the
passages Search-o1 (or Self-Ask) found".  The reader's answer is scored with the run's own
metrics beside the strategy's recorded answer and RAG's recorded answer on the same question,
with paired differences.  It measures one proposed change (a final pass that reads the
strategy's evidence, as RAT's final pass now does) before any strategy is changed.

    OMP_WAIT_POLICY=PASSIVE PYTHONPATH=src .venv/bin/python benchmarks/bench_final_read.py \\
        docs/results/hotpotqa-open --strategies search-o1,self-ask --limit 30

Passages are re-read in full from the data file when the trace clipped them (a passage whose id
is ``<title>#0`` and whose paragraph fits one chunk); others keep the trace's text.  The model's
responses are cached (``--no-cache`` to turn that off), so a rerun or a longer ``--limit`` only
pays for new questions.  Per-question rows go to ``--out`` (JSON lines).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_records import items_of, records
from sleuth.eval.metrics import score
from sleuth.eval.summary import bootstrap_ci
from sleuth.llm import get_llm
from sleuth.search.base import Filters, Passage
from sleuth.strategies import get_strategy

CHUNK_CHARS = 1200  # the eval's passage window: a paragraph this long or shorter is one chunk


class Replayed:
    """A retriever that returns the passages it was given, whatever the query."""

    name = "replayed"

    def __init__(self, passages: Sequence[Passage]) -> None:
        self.passages = list(passages)

    def search(self, query: str, k: int = 5, filters: Filters | None = None) -> list[Passage]:
        return [Passage.from_dict(p.to_dict()) for p in self.passages[:k]]

    def search_batch(self, queries: Sequence[str], k: int = 5, filters: Filters | None = None) -> list[list[Passage]]:
        return [self.search(q, k, filters) for q in queries]


def found_passages(result: dict[str, Any], full: dict[str, str], k: int) -> list[Passage]:
    """The passages of the trace's searches, first retrieval first, each once, at most ``k``."""
    seen: dict[str, Passage] = {}
    for ev in result.get("trace") or []:
        if ev.get("kind") != "search":
            continue
        for d in (ev.get("data") or {}).get("passages") or []:
            if d.get("id") in seen:
                continue
            p = Passage.from_dict(d)
            doc = full.get(p.doc_id or p.title)
            if doc is not None and p.id.endswith("#0") and len(doc) <= CHUNK_CHARS:
                p.text = doc
            seen[p.id] = p
    return list(seen.values())[:k]


def paragraphs(items: dict[str, Any]) -> dict[str, str]:
    """Title (the pooled corpus's document id) -> full paragraph text, over every question's paragraphs."""
    out: dict[str, str] = {}
    for it in items.values():
        for p in it.paragraphs:
            out.setdefault(p.title or p.id, p.text)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="run directories (results.jsonl[.gz] and run.json)")
    ap.add_argument("--strategies", default="search-o1,self-ask")
    ap.add_argument("--limit", type=int, default=30, help="questions per run (the first in the results file)")
    ap.add_argument("--k", type=int, default=8, help="passages the reader sees at most (default 8)")
    ap.add_argument("--model", default="qwen2.5-1.5b")
    ap.add_argument("--no-cache", action="store_true")
    ap.add_argument("--out", type=Path, default=Path("/tmp/final_read.jsonl"))
    a = ap.parse_args(argv)
    chosen = a.strategies.split(",")
    llm = get_llm(a.model, cache=not a.no_cache)
    rows: list[dict[str, Any]] = []
    with a.out.open("w", encoding="utf-8") as out:
        for run in a.runs:
            items = items_of(run)
            full = paragraphs(items)
            recs = [r for r in records(run) if (r.get("task") or {}).get("kind", "main") == "main"]
            rag = {str(r["qid"]): r for r in recs if r["strategy"] == "rag"}
            qids = list(dict.fromkeys(str(r["qid"]) for r in recs))[: a.limit]
            for r in recs:
                qid = str(r["qid"])
                if r["strategy"] not in chosen or qid not in qids or qid not in items:
                    continue
                passages = found_passages(r.get("result") or {}, full, a.k)
                if not passages:
                    continue
                reader = get_strategy("rag", llm, Replayed(passages), k=len(passages))
                res = reader.run(items[qid].prompt())
                s = score(items[qid], res.to_dict())
                row = {
                    "run": run.name,
                    "strategy": r["strategy"],
                    "qid": qid,
                    "passages": len(passages),
                    "recorded": float(r["scores"]["score"]),
                    "reader": float(s["score"]),
                    "rag": float(rag[qid]["scores"]["score"]) if qid in rag else None,
                    "reader_short": res.short_answer,
                    "recorded_short": r.get("short_answer"),
                    "reader_tokens": s["processed_prompt_tokens"],
                    "reader_seconds": s["seconds"],
                }
                rows.append(row)
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
                out.flush()
                print(
                    f"{run.name} {r['strategy']} {qid}: recorded {row['recorded']:.2f} reader {row['reader']:.2f}",
                    flush=True,
                )
    report(rows)
    return 0


def report(rows: list[dict[str, Any]]) -> None:
    by: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by[(r["run"], r["strategy"])].append(r)
    print("\nrun / strategy | n | recorded | reader | reader - recorded [95% CI] | reader - rag [95% CI] | tokens")
    for (run, strat), rs in sorted(by.items()):
        n = len(rs)
        rec = sum(r["recorded"] for r in rs) / n
        rd = sum(r["reader"] for r in rs) / n
        m, lo, hi = bootstrap_ci([r["reader"] - r["recorded"] for r in rs])
        paired = [r["reader"] - r["rag"] for r in rs if r["rag"] is not None]
        vs = "–"
        if paired:
            m2, lo2, hi2 = bootstrap_ci(paired)
            vs = f"{m2:+.3f} [{lo2:+.3f}, {hi2:+.3f}]"
        tok = sum(r["reader_tokens"] for r in rs) / n
        print(f"{run} / {strat} | {n} | {rec:.3f} | {rd:.3f} | {m:+.3f} [{lo:+.3f}, {hi:+.3f}] | {vs} | {tok:.0f}")


if __name__ == "__main__":
    raise SystemExit(main())
