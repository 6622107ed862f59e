"""Index build throughput, query latency and memory: Sleuth's lexical index (tantivy),
its dense side (faiss IVF over vectors), hybrid (both + RRF + passage fetch), bm25s and
the naive rank_bm25 baseline, at 10k / 100k / 200k synthetic passages - side by side.

    .venv/bin/python benchmarks/bench_index.py                 # 10k, 100k, 200k
    .venv/bin/python benchmarks/bench_index.py --sizes 10000   # quick

Every engine runs in its own subprocess so that memory figures are its own (Sleuth's
hybrid row adds the vector index to the lexical one in the same process: its RSS is
the total).
All queries carry a scope filter (``acl=all``, ~80% of passages visible), enforced
inside each engine before its top-k cut.

* Corpus: Zipf-distributed words (vocabulary 50k, ~60 words per passage), ACL
  labels all/hr/finance (80/10/10 %); queries: 5 words drawn from a random passage.
* Dense: for 100k/200k the vectors are random unit vectors (384 dims) - this
  measures *search* cost, not quality; query vectors are perturbed stored
  vectors.  Embedding throughput of the real model is measured separately on a
  small sample (the ``embed`` row).  Hybrid latency = lexical top-40 + dense
  top-40 + RRF + fetching the k=5 passages from the store, given the query
  vector; add the embedding time per query (``embed`` row) for end to end.
* rank_bm25 scores every passage in Python per query: measured at 10k (50
  queries); 100k/200k are extrapolated linearly (stated in the table).
* bm25s (numpy backend; numba is not installed) is measured up to 100k.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
VOCAB = 50_000
WORDS_PER_PASSAGE = 60
N_QUERIES = 300
K = 5
DIM = 384


def corpus(n: int, seed: int = 0) -> tuple[list[str], np.ndarray]:
    rng = np.random.default_rng(seed)
    w = 1.0 / np.arange(1, VOCAB + 1) ** 1.07
    w /= w.sum()
    ids = rng.choice(VOCAB, size=(n, WORDS_PER_PASSAGE), p=w)
    vocab = np.array([f"w{i}" for i in range(VOCAB)])
    texts = [" ".join(row) for row in vocab[ids]]
    acl = rng.choice(np.array(["all", "hr", "finance"]), size=n, p=[0.8, 0.1, 0.1])
    return texts, acl


def queries(texts: list[str], n: int = N_QUERIES, seed: int = 1) -> list[str]:
    rng = np.random.default_rng(seed)
    out = []
    for i in rng.integers(0, len(texts), size=n):
        words = texts[i].split()
        out.append(" ".join(rng.choice(words, size=5, replace=False)))
    return out


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def pct(lat: list[float]) -> tuple[float, float]:
    a = np.array(lat) * 1000
    return float(np.percentile(a, 50)), float(np.percentile(a, 99))


def unit_vectors(n: int, seed: int = 2) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v


# ------------------------------------------------------------------------- workers


def work_sleuth(n: int) -> dict:
    """Build the real index (lexical), query it; then add a vector index over random unit
    vectors and query dense and hybrid - one process, so the build is done once."""
    from sleuth.search import Filters, Index
    from sleuth.search.dense import DenseIndex, build_faiss
    from sleuth.search.hybrid import rrf

    texts, acl = corpus(n)
    qs = queries(texts)
    f = Filters.parse(["acl=all"])
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as d:
        src = Path(d) / "c.jsonl"
        with src.open("w") as fh:
            for i, (t, a) in enumerate(zip(texts, acl, strict=True)):
                fh.write(json.dumps({"id": f"d{i}", "title": "", "text": t, "acl": a}) + "\n")
        del texts
        gc.collect()
        base = rss_mb()
        t0, c0 = time.perf_counter(), time.process_time()
        Index.build([src], Path(d) / "ix")
        build_s, build_cpu = time.perf_counter() - t0, time.process_time() - c0
        idx = Index.open(Path(d) / "ix")
        disk = sum(p.stat().st_size for p in idx.gen.rglob("*") if p.is_file())
        for q in qs[:20]:
            idx.search(q, K, f)
        lat = []
        for q in qs:
            t = time.perf_counter()
            idx.search(q, K, f)
            lat.append(time.perf_counter() - t)
        lex: dict = {
            "n": n,
            "disk_mb": disk / 2**20,
            "build_per_s": n / build_s,
            "build_s": build_s,
            "build_per_cpu_s": n / build_cpu,
            "rss_mb": rss_mb() - base,
        }
        lex["p50"], lex["p99"] = pct(lat)
        c0 = time.process_time()
        for q in qs:
            idx.search(q, K, f)
        lex["cpu_ms_per_query"] = (time.process_time() - c0) / len(qs) * 1000
        lex["peak_mb"] = peak_mb()

        vecs = unit_vectors(n)
        t0 = time.perf_counter()
        ann = build_faiss(vecs) if n >= 30_000 else None
        ann_s = time.perf_counter() - t0
        dense = DenseIndex(vecs, ann, embedder=None, lexical=idx.lexical)  # type: ignore[arg-type]
        rng = np.random.default_rng(5)
        qv = vecs[rng.integers(0, n, size=len(qs))] + 0.05 * rng.normal(size=(len(qs), DIM)).astype(np.float32)
        qv /= np.linalg.norm(qv, axis=1, keepdims=True)
        dense.visible(f)  # the scope bitmap is computed once per scope and cached
        lat_d, lat_h = [], []
        for i, q in enumerate(qs):
            t = time.perf_counter()
            dense.search_vectors(qv[i : i + 1], K, f)
            lat_d.append(time.perf_counter() - t)
            t = time.perf_counter()
            depth = max(4 * K, 40)
            fused = rrf([idx.lexical.search(q, depth, f), dense.search_vectors(qv[i : i + 1], depth, f)[0]], K)
            idx._passages(fused, f)
            lat_h.append(time.perf_counter() - t)
        hyb: dict = {
            "n": n,
            "build_s": ann_s,
            "build_per_s": n / ann_s if ann_s > 0 else None,
            "rss_mb": rss_mb() - base,
            "disk_mb": None,
            "ann": "ivf" if ann is not None else "exact",
        }
        hyb["dense_p50"], hyb["dense_p99"] = pct(lat_d)
        hyb["p50"], hyb["p99"] = pct(lat_h)
        hyb["peak_mb"] = peak_mb()
    return {"lexical": lex, "hybrid": hyb}


def work_bm25s(n: int) -> dict:
    import bm25s

    from sleuth.search.tokenize import tokenize

    texts, acl = corpus(n)
    qs = queries(texts)
    gc.collect()
    base = rss_mb()
    t0 = time.perf_counter()
    toks = [tokenize(t) for t in texts]
    vocab: dict[str, int] = {}
    ids = [[vocab.setdefault(w, len(vocab)) for w in tk] for tk in toks]
    model = bm25s.BM25()
    model.index(bm25s.tokenization.Tokenized(ids=ids, vocab=vocab), show_progress=False)
    build_s = time.perf_counter() - t0
    del toks, ids, texts
    mask = (acl == "all").astype(np.float32)
    lat = []
    for q in qs:
        t = time.perf_counter()
        qids = [[vocab[w] for w in tokenize(q) if w in vocab]]
        model.retrieve(qids, k=K, show_progress=False, n_threads=1, weight_mask=mask)
        lat.append(time.perf_counter() - t)
    res = {"n": n, "build_per_s": n / build_s, "build_s": build_s, "rss_mb": rss_mb() - base, "disk_mb": None}
    res["p50"], res["p99"] = pct(lat)
    res["peak_mb"] = peak_mb()
    return res


def work_rank_bm25(n: int) -> dict:
    from rank_bm25 import BM25Okapi

    from sleuth.search.tokenize import tokenize

    texts, acl = corpus(n)
    nq = 50
    qs = queries(texts, nq)
    gc.collect()
    base = rss_mb()
    t0 = time.perf_counter()
    model = BM25Okapi([tokenize(t) for t in texts])
    build_s = time.perf_counter() - t0
    visible = acl == "all"
    lat = []
    for q in qs:
        t = time.perf_counter()
        scores = np.asarray(model.get_scores(tokenize(q)))
        scores[~visible] = -np.inf  # scope before the cut
        np.argpartition(-scores, K)[:K]
        lat.append(time.perf_counter() - t)
    res = {
        "n": n,
        "build_per_s": n / build_s,
        "build_s": build_s,
        "rss_mb": rss_mb() - base,
        "disk_mb": None,
        "queries": nq,
    }
    res["p50"], res["p99"] = pct(lat)
    res["peak_mb"] = peak_mb()
    return res


def work_embed() -> dict:
    from sleuth.search.dense import get_embedder

    data = ROOT.parent / "shared" / "data" / "hotpotqa" / "test.jsonl"
    paras: list[str] = []
    qs: list[str] = []
    with data.open(encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            qs.append(rec["question"])
            for title, sents in zip(rec["context"]["title"], rec["context"]["sentences"], strict=True):
                paras.append(f"{title}\n{''.join(sents)}")
            if len(paras) >= 128:
                break
    emb = get_embedder()
    t0 = time.perf_counter()
    emb.embed(["warm up"])
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    emb.embed(paras[:128], batch_size=32)
    p_s = time.perf_counter() - t0
    qs = (qs * 10)[:100]
    lat = []
    for q in qs:
        t = time.perf_counter()
        emb.embed([q], is_query=True)
        lat.append(time.perf_counter() - t)
    p50, p99 = pct(lat)
    return {"load_s": load_s, "passages_per_s": 128 / p_s, "query_p50": p50, "query_p99": p99, "peak_mb": peak_mb()}


# ------------------------------------------------------------------------- driver


def run_worker(args: list[str], timeout: float) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1", "SLEUTH_EMBED_THREADS": "2"}
    t0 = time.perf_counter()
    try:
        out = subprocess.run(
            [sys.executable, __file__, "--worker", *args], capture_output=True, text=True, timeout=timeout, env=env
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f}s"}
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or ["failed"])[-1]}
    res = json.loads(out.stdout.strip().splitlines()[-1])
    res["wall_s"] = time.perf_counter() - t0
    return res


def fmt(v: object, spec: str = ".1f") -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return format(v, spec)
    return str(v)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000,200000")
    ap.add_argument("--worker", nargs="*")
    ap.add_argument("--json", type=Path, help="Also write all figures to this JSON file.")
    a = ap.parse_args()
    if a.worker is not None:
        kind = a.worker[0]
        if kind == "embed":
            print(json.dumps(work_embed()))
        elif kind == "sleuth":
            print(json.dumps(work_sleuth(int(a.worker[1]))))
        elif kind == "bm25s":
            print(json.dumps(work_bm25s(int(a.worker[1]))))
        elif kind == "rank_bm25":
            print(json.dumps(work_rank_bm25(int(a.worker[1]))))
        return
    sizes = [int(s) for s in a.sizes.split(",")]
    rows: list[tuple[str, int, dict]] = []
    for n in sizes:
        print(f"... sleuth lexical + hybrid at {n:,}", file=sys.stderr, flush=True)
        r = run_worker(["sleuth", str(n)], 3600)
        rows.append(("sleuth lexical (tantivy)", n, r.get("lexical", r)))
        rows.append(("sleuth hybrid (+faiss)", n, r.get("hybrid", r)))
        if n <= 100_000:
            print(f"... bm25s at {n:,}", file=sys.stderr, flush=True)
            rows.append(("bm25s (numpy)", n, run_worker(["bm25s", str(n)], 3600)))
        if n <= 10_000:
            print(f"... rank_bm25 at {n:,}", file=sys.stderr, flush=True)
            rows.append(("rank_bm25 (baseline)", n, run_worker(["rank_bm25", str(n)], 3600)))
        else:
            base = next((r for nm, m, r in rows if nm.startswith("rank_bm25") and "p50" in r), None)
            if base:
                scale = n / base["n"]
                rows.append(
                    (
                        "rank_bm25 (baseline)",
                        n,
                        {
                            "p50": base["p50"] * scale,
                            "p99": base["p99"] * scale,
                            "build_per_s": base["build_per_s"],
                            "note": f"extrapolated linearly from {base['n']:,} (it scores every passage in Python per query)",
                        },
                    )
                )
    print("... embedding model", file=sys.stderr, flush=True)
    emb = run_worker(["embed"], 900)

    print()
    print(
        f"{'engine':28} {'passages':>9} {'build/s':>9} {'build s':>8} {'p50 ms':>8} {'p99 ms':>8} "
        f"{'dense p50':>9} {'dense p99':>9} {'RSS MB':>7} {'peak MB':>8} {'disk MB':>8}  note"
    )
    for name, n, r in rows:
        if "error" in r:
            print(f"{name:28} {n:>9,} error: {r['error']}")
            continue
        note = r.get("note", "")
        if name.startswith("sleuth lexical"):
            note = f"{r['build_per_cpu_s']:,.0f} passages per CPU-second; {r['cpu_ms_per_query']:.2f} CPU-ms per query"
        if name.startswith("sleuth hybrid"):
            note = f"build = {r.get('ann')} vector index only (random unit vectors); p50/p99 = full hybrid given the query vector"
        if name.startswith("rank_bm25") and "queries" in r:
            note = f"{r['queries']} queries"
        print(
            f"{name:28} {n:>9,} {fmt(r.get('build_per_s'), ',.0f'):>9} {fmt(r.get('build_s')):>8} {fmt(r.get('p50'), '.2f'):>8} "
            f"{fmt(r.get('p99'), '.2f'):>8} {fmt(r.get('dense_p50'), '.2f'):>9} {fmt(r.get('dense_p99'), '.2f'):>9} "
            f"{fmt(r.get('rss_mb'), '.0f'):>7} {fmt(r.get('peak_mb'), '.0f'):>8} {fmt(r.get('disk_mb'), '.1f'):>8}  {note}"
        )
    if "error" in emb:
        print(f"embedding (all-MiniLM-L6-v2): error: {emb['error']}")
    else:
        print(
            f"embedding (all-MiniLM-L6-v2, {os.environ.get('SLEUTH_EMBED_THREADS', '2')} threads): load {emb['load_s']:.1f}s, "
            f"{emb['passages_per_s']:.0f} passages/s, one query p50 {emb['query_p50']:.1f} ms / p99 {emb['query_p99']:.1f} ms"
        )
    if a.json:
        a.json.write_text(
            json.dumps({"rows": [{"engine": nm, "n": n, **r} for nm, n, r in rows], "embed": emb}, indent=2)
        )


if __name__ == "__main__":
    main()
