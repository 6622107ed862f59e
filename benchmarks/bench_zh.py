"""Chinese retrieval: the English and the multilingual embedder side by side, in one run.

    .venv/bin/python benchmarks/bench_zh.py            # both embedders, all modes
    .venv/bin/python benchmarks/bench_zh.py --embedders multilingual-e5-small

For each embedder (all-MiniLM-L6-v2, the English default, and multilingual-e5-small,
what ``embedder="auto"`` picks for a Chinese corpus):

* speed: passages/s embedding :data:`SPEED_SAMPLE` rgb_zh passages (no cache), median
  query latency over the 50 rgb_zh questions embedded one at a time, vector bytes;
* rgb_zh dev (``../shared/data/rgb_zh/int_dev.jsonl``): the positive and negative
  passages of all 50 questions pooled into one corpus (each text once, as
  ``sleuth eval --format rgb_zh`` pools them), each question searched with k=5;
  recall@5 per answer part (a part is found when a positive passage that supports
  it, :func:`sleuth.eval.datasets.part_passages`, is in the top 5) and the share
  of questions with every part found; index size on disk;
* policy_zh: each of the 8 questions searched within its own scope (version, region,
  acl), evidence recall@5 and the per-question detail.

Lexical rows do not depend on the embedder (printed once).  Vectors are cached in
``<cache dir>/embeddings.sqlite``, so a rerun only re-measures the speed sample.
The data are never copied into the package; the pooled rgb_zh corpus is written to a
temporary folder.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
EMBEDDERS = ("all-MiniLM-L6-v2", "multilingual-e5-small")
MODES = ("lexical", "dense", "hybrid")
SPEED_SAMPLE = 100


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(ln) for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]


def rgb_pool(questions: list[dict[str, Any]]) -> list[str]:
    pool: dict[str, None] = {}
    for q in questions:
        for part in q["positive"]:
            pool.update(dict.fromkeys(part))
        pool.update(dict.fromkeys(q["negative"]))
    return list(pool)


def speed(name: str, passages: list[str], queries: list[str]) -> dict[str, float]:
    from sleuth.search.dense import get_embedder
    from sleuth.search.embedding import embed_texts

    emb = get_embedder(name)
    emb.embed(["warm up"], is_query=True)
    sample = passages[:SPEED_SAMPLE]
    t0 = time.perf_counter()
    embed_texts(emb, sample, cache=False)
    pps = len(sample) / (time.perf_counter() - t0)
    lat = []
    for q in queries:
        t0 = time.perf_counter()
        emb.embed([q], is_query=True)
        lat.append((time.perf_counter() - t0) * 1000)
    return {"passages_per_s": pps, "query_ms_p50": statistics.median(lat), "bytes_per_vector": emb.dim * 4}


def rgb(idx: Any, questions: list[dict[str, Any]], mode: str) -> dict[str, float]:
    from sleuth.eval.datasets import answer_parts, part_passages, passage_id

    found = parts = complete = 0
    for q in questions:
        top = {p.doc_id for p in idx.search(q["query"], 5, None, mode=mode)}
        ok = [any(passage_id(t) in top for t in group) for group in part_passages(q, answer_parts(q))]
        found += sum(ok)
        parts += len(ok)
        complete += all(ok)
    return {"part_recall@5": found / parts, "all_parts@5": complete / len(questions)}


def policy(idx: Any, mode: str) -> dict[str, Any]:
    from sleuth.search import Filters

    found = total = 0
    detail = []
    for q in _jsonl(DATA / "policy_zh" / "questions.jsonl"):
        scope = dict(q["scope"])
        f = Filters.make(equals={k: v for k, v in scope.items() if k != "acl"}, acl=scope["acl"])
        got = {p.doc_id for p in idx.search(q["question"], 5, f, mode=mode)}
        ev = set(q["evidence"])
        found += len(ev & got)
        total += len(ev)
        detail.append(f"{q['id']}:{len(ev & got)}/{len(ev)}")
    return {"evidence@5": found / total if total else 0.0, "detail": " ".join(detail)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--embedders", default=",".join(EMBEDDERS), help="Comma-separated embedder names.")
    a = ap.parse_args()
    from sleuth.eval.datasets import passage_id
    from sleuth.search import Index

    questions = _jsonl(DATA / "rgb_zh" / "int_dev.jsonl")
    pool = rgb_pool(questions)
    queries = [q["query"] for q in questions]
    print(f"rgb_zh dev: {len(questions)} questions, {len(pool)} pooled passages; policy_zh: 12 passages, 8 questions")
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "rgb_zh_pool.jsonl"
        with open(corpus, "w", encoding="utf-8") as f:
            for text in pool:
                f.write(json.dumps({"id": passage_id(text), "title": "", "text": text}, ensure_ascii=False) + "\n")
        rows = []
        for i, name in enumerate(a.embedders.split(",")):
            sp = speed(name, pool, queries)
            t0 = time.perf_counter()
            r_idx = Index.build([corpus], Path(tmp) / f"rgb-{i}", dense=True, embedder=name)
            build_s = time.perf_counter() - t0
            p_idx = Index.build(
                [DATA / "policy_zh" / "corpus.jsonl"], Path(tmp) / f"pol-{i}", dense=True, embedder=name
            )
            size = r_idx.stats()["disk_bytes"]
            vec = (r_idx.gen / "vectors.npy").stat().st_size
            modes = MODES if i == 0 else MODES[1:]
            for mode in modes:
                rows.append(
                    (name if mode != "lexical" else "-", mode, rgb(r_idx, questions, mode), policy(p_idx, mode))
                )
            print(
                f"\n{name}: {sp['passages_per_s']:.1f} passages/s, query p50 {sp['query_ms_p50']:.1f} ms, "
                f"{sp['bytes_per_vector']} B/vector; rgb_zh index {size / 1e6:.1f} MB on disk "
                f"(vectors {vec / 1e6:.1f} MB), built in {build_s:.0f}s (embeddings cached across runs)"
            )
    print(
        f"\n{'embedder':22} {'mode':8} {'rgb part R@5':>12} {'rgb all@5':>9} {'policy ev@5':>11}  policy per question"
    )
    for name, mode, r, p in rows:
        print(
            f"{name:22} {mode:8} {r['part_recall@5']:12.3f} {r['all_parts@5']:9.3f} {p['evidence@5']:11.3f}  {p['detail']}"
        )
    if not any(r["part_recall@5"] for *_, r, _ in rows):
        sys.exit("no answer part was found at all")


if __name__ == "__main__":
    main()
