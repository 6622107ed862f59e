"""Indexing through an embedding server, the bundled models over HTTP, and the LLM reranker.

    .venv/bin/python benchmarks/bench_embed_server.py throughput --sizes 10000,100000,1000000
    .venv/bin/python benchmarks/bench_embed_server.py recall --n 100
    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/bench_embed_server.py llm-rerank --n 20 --pool 100

``throughput``: a fake embedding server (``tests/fake_model_server.py``, its own process,
vectors from one hash per text so that it costs next to nothing) serves ``--slots``
requests at once and holds each one ``--latency`` seconds: its capacity is
``slots * batch / latency`` texts per second.  The same run first measures that capacity
with a plain load generator (``2 * slots`` threads posting batches, no Sleuth), then
builds an index of N synthetic passages (``sleuth.search.Index.build`` with
``embed_server``, in a fresh process per size) and prints the embedding stage's rate
against the measured capacity (target >= 0.9), the server's busy share, the whole
build's time and the build process's peak RSS.

``recall``: Sleuth's bundled models served over HTTP on 127.0.0.1 (the fake server with
the model behind it) against the same models in-process: R@5 on HotpotQA's tuning file
(``hotpotqa/train.jsonl``, 300 questions, pooled corpus) with all-MiniLM-L6-v2 and
evidence@5 on policy_zh (each question in its own scope) with multilingual-e5-small.
``--n 100``: the first 100 questions and the pool of their paragraphs only (1,032 passages).
The server embeds through the in-process embedding cache, so passages embedded by the
in-process run are not embedded twice; queries are embedded afresh on both sides.

``llm-rerank``: the embedded model as a listwise reranker of hybrid's top ``--depth``
passages against no reranker, paired per question on ``hotpotqa/train.jsonl`` (first
``--n`` questions, searching the pool of the first ``--pool`` questions' paragraphs): R@5 of
the supporting titles and the seconds per search it costs.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("SLEUTH_DATA_DIR", ROOT.parent / "shared" / "data"))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

_SERVER = """
import sys, time
sys.path.insert(0, sys.argv[1])
from fake_model_server import ModelServer
s = ModelServer(slots=int(sys.argv[2]), batch_latency_s=float(sys.argv[3]), dim=int(sys.argv[4]),
                cheap=True, keep_inputs=False).start()
print(s.url, flush=True)
time.sleep(10**6)
"""

_BUILD = """
import json, resource, sys, time
from sleuth.search import EmbedServer, Index
corpus, out, url, batch, conc = sys.argv[1:6]
es = EmbedServer.resolve("fake-embed", url, batch_size=int(batch), concurrency=int(conc)) if url != "none" else None
t = time.perf_counter()
idx = Index.build([corpus], out, embed_server=es)
r = idx.last_report
print(json.dumps({"build_s": time.perf_counter() - t, "embed_s": r.embed_seconds, "rows": idx.manifest["rows"],
                  "faiss": (idx.gen / "dense.faiss").exists(),
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def _corpus(path: Path, n: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(5000)]
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            words = " ".join(rng.choices(vocab, k=40))
            f.write(json.dumps({"id": f"d{i}", "title": f"doc {i}", "text": words}) + "\n")


def _measure_capacity(url: str, slots: int, batch: int, seconds: float = 6.0) -> float:
    """Texts per second the server answers under a plain load (2 * slots threads, no Sleuth)."""
    texts = [f"capacity probe text {i}" for i in range(batch)]
    done = [0]
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def worker() -> None:
        with httpx.Client(timeout=60) as c:
            while time.monotonic() < stop:
                r = c.post(url + "/v1/embeddings", json={"model": "fake-embed", "input": texts})
                r.raise_for_status()
                r.json()
                with lock:
                    done[0] += batch

    t0 = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(2 * slots)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return done[0] / (time.monotonic() - t0)


def throughput(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="bench-embed-"))
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), SLEUTH_CACHE_DIR=str(work / "cache"))
    srv = subprocess.Popen(
        [sys.executable, "-c", _SERVER, str(ROOT / "tests"), str(args.slots), str(args.latency), str(args.dim)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert srv.stdout is not None
        url = srv.stdout.readline().strip()
        declared = args.slots * args.batch / args.latency
        cap = _measure_capacity(url, args.slots, args.batch)
        print(
            f"server: {args.slots} slots x {args.batch} texts / {args.latency * 1000:.0f} ms = {declared:,.0f} texts/s "
            f"declared; measured in this run: {cap:,.0f} texts/s (plain load generator, {2 * args.slots} threads)"
        )
        print(f"client: batch {args.batch}, {args.inflight or 2 * args.slots} requests in flight; dim {args.dim}")
        head = f"{'passages':>10} {'embed/s':>9} {'of cap':>7} {'busy':>6} {'embed s':>8} {'build s':>8} {'peak MB':>8}  vectors"
        print(head)
        rows = []
        for n in [int(x) for x in args.sizes.split(",")]:
            corpus = work / f"c{n}.jsonl"
            _corpus(corpus, n)
            before = httpx.get(url + "/stats").json()
            p = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    _BUILD,
                    str(corpus),
                    str(work / f"ix{n}"),
                    "none" if args.lexical_only else url,
                    str(args.batch),
                    str(args.inflight or 2 * args.slots),
                ],
                capture_output=True,
                text=True,
                env=env,
            )
            if p.returncode != 0:
                print(p.stderr[-2000:])
                raise SystemExit(f"build of {n} failed")
            res = json.loads(p.stdout.strip().splitlines()[-1])
            if args.lexical_only:
                print(f"{n:>10,} lexical only: build {res['build_s']:.1f} s, peak {res['peak_mb']:.0f} MB")
                rows.append({"passages": n, **res})
                subprocess.run(["rm", "-rf", str(work / f"ix{n}"), str(corpus)], check=False)
                continue
            after = httpx.get(url + "/stats").json()
            rate = n / res["embed_s"]
            busy = (after["busy_s"] - before["busy_s"]) / (args.slots * res["embed_s"])
            sent = after["texts"] - before["texts"]
            row = {"passages": n, "embed_per_s": rate, "of_capacity": rate / cap, "busy": busy, "sent": sent, **res}
            rows.append(row)
            print(
                f"{n:>10,} {rate:>9,.0f} {rate / cap:>7.2f} {busy:>6.2f} {res['embed_s']:>8.1f} {res['build_s']:>8.1f} "
                f"{res['peak_mb']:>8.0f}  {'faiss IVF' if res['faiss'] else 'exact'}"
            )
            for f in work.glob(f"ix{n}"):
                subprocess.run(["rm", "-rf", str(f)], check=False)
            corpus.unlink()
            (work / "cache").exists() and subprocess.run(["rm", "-rf", str(work / "cache")], check=False)
        if args.json:
            Path(args.json).write_text(json.dumps({"capacity": cap, "declared": declared, "rows": rows}, indent=2))
    finally:
        srv.kill()
        srv.wait()
        subprocess.run(["rm", "-rf", str(work)], check=False)


class _CachedModel:
    """A bundled embedder behind the in-process embedding cache (what the server answers with)."""

    def __init__(self, name: str) -> None:
        from sleuth.search.dense import get_embedder

        self.model = get_embedder(name)
        self.dim = self.model.dim

    def embed(self, texts: list[str], *, is_query: bool = False) -> np.ndarray:
        from sleuth.search.embedding import embed_texts

        if is_query:
            return self.model.embed(texts, is_query=True)
        return embed_texts(self.model, texts)


def _hotpot(work: Path, n: int) -> tuple[Any, Path]:
    """hotpotqa/train.jsonl (tuning data), or its first ``n`` questions, and the pool of their paragraphs."""
    from bench_retrieval import pooled_corpus

    src = DATA / "hotpotqa" / "train.jsonl"
    if n:
        lines = src.read_text(encoding="utf-8").splitlines()[:n]
        src = work / "train.jsonl"
        src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return pooled_corpus(src, work)


def recall(args: argparse.Namespace) -> None:
    from fake_model_server import ModelServer
    from sleuth.search import EmbedServer, Filters, Index

    work = Path(tempfile.mkdtemp(prefix="bench-embed-recall-"))
    ds, corpus = _hotpot(work, args.n)
    items = [it for it in ds.items if it.gold_titles]
    local = Index.build([corpus], work / "local", dense=True, embedder="all-MiniLM-L6-v2", progress=args.progress)
    with ModelServer(embedder=_CachedModel("all-MiniLM-L6-v2"), model="all-MiniLM-L6-v2", keep_inputs=False) as srv:
        es = EmbedServer.resolve("all-MiniLM-L6-v2", srv.url + "/v1")
        remote = Index.build([corpus], work / "http", embed_server=es, progress=args.progress)
        print(
            f"hotpotqa/train.jsonl (first {len(items)} questions): {len(items)} questions, {local.manifest['rows']} pooled passages; R@5 of the supporting titles"
        )
        for mode in ("dense", "hybrid"):
            out = []
            for idx in (local, remote):
                rec = []
                for it in items:
                    gold = set(it.gold_titles)
                    top = {p.title for p in idx.search(it.question, 5, mode=mode)}
                    rec.append(len(gold & top) / max(1, len(gold)))
                out.append(float(np.mean(rec)))
            print(f"  {mode:<7} in-process {out[0]:.3f}   over HTTP {out[1]:.3f}")
    qs = [json.loads(x) for x in (DATA / "policy_zh" / "questions.jsonl").read_text(encoding="utf-8").splitlines() if x]
    pcorpus = DATA / "policy_zh" / "corpus.jsonl"
    plocal = Index.build([pcorpus], work / "plocal", dense=True, embedder="multilingual-e5-small")
    with ModelServer(embedder=_CachedModel("multilingual-e5-small"), model="multilingual-e5-small") as srv:
        premote = Index.build(
            [pcorpus], work / "phttp", embed_server=EmbedServer.resolve("multilingual-e5-small", srv.url)
        )
        print("policy_zh: 8 questions, each in its own scope; evidence@5 (leaks)")
        for mode in ("dense", "hybrid"):
            cells = []
            for idx in (plocal, premote):
                found = total = leaks = 0
                for q in qs:
                    scope = dict(q["scope"])
                    f = Filters.make(equals={k: v for k, v in scope.items() if k != "acl"}, acl=scope["acl"])
                    hits = idx.search(q["question"], 5, f, mode=mode)
                    leaks += sum(not f.matches(p) for p in hits)
                    found += len(set(q["evidence"]) & {p.doc_id for p in hits})
                    total += len(q["evidence"])
                cells.append(f"{found / total:.3f} ({leaks})")
            print(f"  {mode:<7} in-process {cells[0]}   over HTTP {cells[1]}")


def llm_rerank(args: argparse.Namespace) -> None:
    from sleuth.llm import get_llm
    from sleuth.search import open_retriever
    from sleuth.search.rerank import LLMReranker, RerankedRetriever

    work = Path(tempfile.mkdtemp(prefix="bench-llm-rerank-"))
    ds, corpus = _hotpot(work, args.pool)
    items = [it for it in ds.items if it.gold_titles][: args.n]
    base = open_retriever(str(corpus), dense=True, rerank="none")
    llm = get_llm(args.model)
    rr = RerankedRetriever(base, LLMReranker(llm, max_chars=args.max_chars), depth=args.depth)
    from sleuth.llm.base import GenParams

    llm.chat([{"role": "user", "content": "Say OK."}], GenParams(max_tokens=2))  # start the engine before timing
    rows = []
    t_all = time.perf_counter()
    for it in items:
        gold = set(it.gold_titles)
        a = {p.title for p in base.search(it.question, 5)}
        t = time.perf_counter()
        b = {p.title for p in rr.search(it.question, 5)}
        dt = time.perf_counter() - t
        rows.append((len(gold & a) / len(gold), len(gold & b) / len(gold), dt))
        if args.time_limit and time.perf_counter() - t_all > args.time_limit:
            break
    a_r = np.array([r[0] for r in rows])
    b_r = np.array([r[1] for r in rows])
    d = b_r - a_r
    rng = np.random.default_rng(0)
    boots = [float(np.mean(rng.choice(d, len(d)))) for _ in range(2000)]
    lo, hi = np.percentile(boots, [2.5, 97.5])
    print(
        f"hotpotqa/train.jsonl, first {len(rows)} questions (pool: the paragraphs of the first {args.pool}), "
        f"hybrid top {args.depth} reranked by {llm.model} "
        f"(passages clipped to {args.max_chars} chars)"
    )
    print(f"  R@5 no reranker {a_r.mean():.3f}   LLM reranker {b_r.mean():.3f}   paired diff {d.mean():+.3f} "
          f"[{lo:+.3f}, {hi:+.3f}] (95% bootstrap); better {int((d > 0).sum())}, worse {int((d < 0).sum())}, "
          f"same {int((d == 0).sum())}")  # fmt: skip
    print(f"  cost: {np.mean([r[2] for r in rows]):.1f} s per search (median {np.median([r[2] for r in rows]):.1f})")
    print(f"  unreadable rankings: {rr.reranker.unreadable}")  # type: ignore[attr-defined]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("throughput")
    t.add_argument("--sizes", default="10000,100000,1000000")
    t.add_argument("--slots", type=int, default=4)
    t.add_argument("--batch", type=int, default=64)
    t.add_argument("--latency", type=float, default=0.1)
    t.add_argument("--dim", type=int, default=64)
    t.add_argument("--inflight", type=int, default=0, help="client requests in flight (default 2 * slots)")
    t.add_argument("--json")
    t.add_argument("--lexical-only", action="store_true", help="build without vectors: the peak memory of the rest")
    r = sub.add_parser("recall")
    r.add_argument("--progress", action="store_true")
    r.add_argument("--n", type=int, default=0, help="only the first N questions of hotpotqa/train.jsonl (0: all)")
    m = sub.add_parser("llm-rerank")
    m.add_argument("--n", type=int, default=30)
    m.add_argument("--pool", type=int, default=100, help="corpus: the paragraphs of the first POOL questions")
    m.add_argument("--depth", type=int, default=10)
    m.add_argument("--max-chars", type=int, default=300)
    m.add_argument("--model", default=None)
    m.add_argument("--time-limit", type=float, default=0)
    a = ap.parse_args()
    {"throughput": throughput, "recall": recall, "llm-rerank": llm_rerank}[a.cmd](a)


if __name__ == "__main__":
    main()
