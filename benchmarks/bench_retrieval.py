"""Retrieval quality of the embedded index, side by side for BM25, dense and hybrid.

    .venv/bin/python benchmarks/bench_retrieval.py

* HotpotQA (../shared/data/hotpotqa/test.jsonl, 500 hard dev questions): all
  paragraphs of the file pooled into one corpus (one per title, ~5k), recall@2/@5/@10
  of the supporting titles (mean fraction of a question's 2 supporting titles in the
  top k) and the share of questions with both titles in the top k.
* policy_zh: each of the 8 questions searched within its own scope
  (version/region/acl); evidence recall@5 and a leak count (passages returned
  outside the question's scope - must be 0).

The dense side embeds every passage once with the model ``embedder="auto"`` picks
(all-MiniLM-L6-v2 for HotpotQA, multilingual-e5-small for policy_zh; cached in
``<cache dir>/embeddings.sqlite``, the index itself cached by content hash), so
reruns take seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("SLEUTH_DATA_DIR", ROOT.parent / "shared" / "data"))
MODES = ("lexical", "dense", "hybrid")


def hotpot(progress: bool, modes: tuple[str, ...]) -> list[tuple[str, dict]]:
    from sleuth.search import Filters, open_retriever

    path = DATA / "hotpotqa" / "test.jsonl"
    qs = [json.loads(ln) for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    t0 = time.perf_counter()
    idx = open_retriever(path, dense=modes != ("lexical",), progress=progress)
    setup = time.perf_counter() - t0
    scope = Filters.parse(["acl=all"])
    rows = []
    for mode in modes:
        t0 = time.perf_counter()
        results = idx.search_batch([q["question"] for q in qs], 10, scope, mode=mode)  # type: ignore[call-arg]
        per_q = (time.perf_counter() - t0) / len(qs) * 1000
        rec = {k: [] for k in (2, 5, 10)}
        both = {k: [] for k in (2, 5, 10)}
        for q, hits in zip(qs, results, strict=True):
            gold = set(q["supporting_facts"]["title"])
            for k in rec:
                found = gold & {p.title for p in hits[:k]}
                rec[k].append(len(found) / len(gold))
                both[k].append(found == gold)
        rows.append(
            (
                mode,
                {
                    **{f"R@{k}": float(np.mean(v)) for k, v in rec.items()},
                    **{f"both@{k}": float(np.mean(v)) for k, v in both.items()},
                    "ms_per_query": per_q,
                },
            )
        )
    print(f"hotpotqa: {len(qs)} questions, {idx.manifest['passages']} pooled passages (index ready in {setup:.1f}s)")  # type: ignore[attr-defined]
    return rows


def policy(modes: tuple[str, ...]) -> list[tuple[str, dict]]:
    from sleuth.search import Filters, open_retriever

    corpus = DATA / "policy_zh" / "corpus.jsonl"
    qs = [
        json.loads(ln) for ln in (DATA / "policy_zh" / "questions.jsonl").read_text(encoding="utf-8").splitlines() if ln
    ]
    idx = open_retriever(corpus, dense=modes != ("lexical",))
    rows = []
    for mode in modes:
        found = total = leaks = 0
        detail = []
        for q in qs:
            scope = dict(q["scope"])
            f = Filters.make(equals={k: v for k, v in scope.items() if k != "acl"}, acl=scope["acl"])
            hits = idx.search(q["question"], 5, f, mode=mode)  # type: ignore[call-arg]
            leaks += sum(not f.matches(p) for p in hits)
            got = {p.doc_id for p in hits}
            ev = set(q["evidence"])
            found += len(ev & got)
            total += len(ev)
            detail.append(f"{q['id']}:{len(ev & got)}/{len(ev)}")
        rows.append((mode, {"evidence@5": found / total, "leaks": leaks, "per_question": " ".join(detail)}))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-progress", action="store_true")
    ap.add_argument("--modes", default=",".join(MODES), help="Comma-separated subset of lexical,dense,hybrid.")
    a = ap.parse_args()
    modes = tuple(m for m in a.modes.split(",") if m in MODES)
    hp = hotpot(progress=not a.no_progress, modes=modes)
    print(f"{'mode':8} {'R@2':>6} {'R@5':>6} {'R@10':>6} {'both@2':>7} {'both@5':>7} {'both@10':>8} {'ms/query':>9}")
    for mode, r in hp:
        print(
            f"{mode:8} {r['R@2']:6.3f} {r['R@5']:6.3f} {r['R@10']:6.3f} {r['both@2']:7.3f} {r['both@5']:7.3f} "
            f"{r['both@10']:8.3f} {r['ms_per_query']:9.2f}"
        )
    pol = policy(modes)
    print("\npolicy_zh: 8 questions, each within its own scope (k=5)")
    print(f"{'mode':8} {'evidence@5':>10} {'leaks':>6}  per question")
    for mode, r in pol:
        print(f"{mode:8} {r['evidence@5']:10.3f} {r['leaks']:6d}  {r['per_question']}")
    if any(r["leaks"] for _, r in pol):
        sys.exit("an out-of-scope passage was returned")


if __name__ == "__main__":
    main()
