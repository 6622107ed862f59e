"""Retrieval quality of the embedded index on a pooled QA corpus: modes, k, title weight and passage size side by side.

    .venv/bin/python benchmarks/bench_retrieval.py                       # hotpotqa/train.jsonl (tuning data)
    .venv/bin/python benchmarks/bench_retrieval.py --data musique/train.json
    .venv/bin/python benchmarks/bench_retrieval.py --modes lexical      # no embedding

* The corpus is pooled exactly as ``sleuth eval --setting open`` pools it
  (:func:`sleuth.eval.corpus.plan_retrieval`: every paragraph of the questions file,
  each id once, or the dataset's companion corpus file such as MuSiQue's
  ``train_corpus.json``).  Choose defaults on tuning files (``hotpotqa/train.jsonl``,
  ``musique/train.json``), never on ``hotpotqa/test.jsonl``.
* Gold: the item's supporting titles (HotpotQA ``supporting_facts``, MuSiQue
  ``is_supporting``).  R@k is the mean fraction of a question's supporting titles in
  the top k; all@k the share of questions with every one of them in the top k.
* ``--hops`` (MuSiQue): each decomposition hop is searched too, with the answers of
  the earlier hops put in for ``#1``, ``#2``... (what a decomposing strategy asks);
  hop@k is the share of hops whose supporting paragraph's title is in the top k.
* Rows: ``lexical`` (BM25 over body), ``lexical+tN`` (BM25 plus the title/section
  field boosted by N, :data:`sleuth.search.lexical.HEAD_BOOST` is what Chinese
  queries use), ``dense``, ``hybrid`` (RRF of BM25 and dense, as
  :meth:`sleuth.search.Index.search_batch` fuses them) and ``hybrid+tN``; with
  ``--chunks 400,800`` lexical rows for indexes built with a smaller passage size
  (``max_chars``; the default is 1200).  ms/query: one query at a time for BM25, the
  batch for dense (query embedding included).
* policy_zh (``--policy``): each of the 8 questions searched within its own scope
  (version/region/acl); evidence recall@5 and a leak count (must be 0).

The dense side embeds every passage once with the model ``embedder="auto"`` picks
(all-MiniLM-L6-v2 for English), cached in ``<cache dir>/embeddings.sqlite``; the index
itself is cached by content hash, so reruns take seconds.  Embedding ~3k passages
takes minutes on idle cores, much longer beside a model run (``nice -n 19``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("SLEUTH_DATA_DIR", ROOT.parent / "shared" / "data"))
MODES = ("lexical", "dense", "hybrid")
KS = (3, 5, 8, 10)

Ranked = list[tuple[int, float]]


def pooled_corpus(path: Path, work: Path) -> tuple[Any, Path]:
    """The dataset and the corpus file ``sleuth eval`` would index for its open setting."""
    from sleuth.eval.corpus import plan_retrieval
    from sleuth.eval.datasets import load_dataset

    ds = load_dataset(path)
    plan = plan_retrieval(ds, "open")
    if plan.corpus_file:
        return ds, Path(plan.corpus_file)
    records = plan._records_for_open  # type: ignore[attr-defined]
    out = work / f"{path.parent.name}-{path.stem}-pooled.jsonl"
    out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return ds, out


def _fill(question: str, answers: list[str]) -> str:
    """``#n`` replaced by the answer of hop n (where known)."""

    def one(m: re.Match[str]) -> str:
        n = int(m.group(1))
        return answers[n - 1] if 0 < n <= len(answers) else m.group(0)

    return re.sub(r"#(\d+)", one, question)


def hop_queries(ds: Any) -> list[tuple[str, str]]:
    """(query, gold title) per decomposition hop, earlier answers put in for ``#n``."""
    out = []
    for it in ds.items:
        titles = {p.id: p.title for p in it.paragraphs}
        answers: list[str] = []
        for sub in it.decomposition:
            q = _fill(sub.question, answers)
            answers.append(sub.answer)
            if sub.support_id in titles:
                out.append((q, titles[sub.support_id]))
    return out


def lexical_ranker(lex: Any, head_boost: float) -> Callable[[str, int], Ranked]:
    """BM25 over ``body`` plus, when ``head_boost`` > 0, the title/section field boosted (every language)."""
    import tantivy

    from sleuth.search.tokenize import tokenize

    if head_boost <= 0:
        return lambda q, k: lex.search(q, k, None)

    def run(q: str, k: int) -> Ranked:
        uniq = list(dict.fromkeys(tokenize(q)))
        if not uniq:
            return []
        term = tantivy.Query.term_query
        clauses = [(tantivy.Occur.Should, term(lex.schema, "body", t)) for t in uniq]
        clauses += [
            (tantivy.Occur.Should, tantivy.Query.boost_query(term(lex.schema, "head", t), head_boost)) for t in uniq
        ]
        s = lex.searcher
        hits = s.search(tantivy.Query.boolean_query(clauses), k, count=False).hits
        rows = s.fast_field_values("row", [a for _, a in hits]) if hits else []
        return [(int(r), float(sc)) for (sc, _), r in zip(hits, rows, strict=True) if r is not None]

    return run


def score(idx: Any, ranked: list[Ranked], gold: list[set[str]]) -> dict[str, float]:
    titles = {}
    for rows in ranked:
        for r, _ in rows:
            titles.setdefault(r, None)
    got = idx.store.get_many(list(titles))
    out: dict[str, float] = {}
    for k in KS:
        rec, full = [], []
        for rows, g in zip(ranked, gold, strict=True):
            top = {got[r].title for r, _ in rows[:k] if r in got}
            rec.append(len(g & top) / len(g))
            full.append(g <= top)
        out[f"R@{k}"] = float(np.mean(rec))
        out[f"all@{k}"] = float(np.mean(full))
    return out


def measure(
    idx: Any, queries: Sequence[str], gold: list[set[str]], modes: Sequence[str], boosts: Sequence[float]
) -> list[tuple[str, dict[str, float]]]:
    from sleuth.search.hybrid import rrf

    kmax = max(KS)
    depth = max(4 * kmax, 40)  # what Index.search_batch fuses for hybrid
    rows: list[tuple[str, dict[str, float]]] = []
    lex_runs: dict[float, tuple[list[Ranked], float]] = {}
    for b in (0.0, *boosts):
        rank = lexical_ranker(idx.lexical, b)
        t0 = time.perf_counter()
        deep = [rank(q, depth) for q in queries]
        lex_runs[b] = (deep, (time.perf_counter() - t0) / len(queries) * 1000)
        if "lexical" in modes:
            name = "lexical" if b == 0 else f"lexical+t{b:g}"
            rows.append((name, {**score(idx, [d[:kmax] for d in deep], gold), "ms": lex_runs[b][1]}))
    if "dense" in modes or "hybrid" in modes:
        dense = idx._dense_index()
        t0 = time.perf_counter()
        dhits = dense.search_batch(list(queries), depth, None)
        dms = (time.perf_counter() - t0) / len(queries) * 1000
        if "dense" in modes:
            rows.append(("dense", {**score(idx, [d[:kmax] for d in dhits], gold), "ms": dms}))
        if "hybrid" in modes:
            for b in (0.0, *boosts):
                deep, lms = lex_runs[b]
                fused = [rrf([lx, dh], kmax) for lx, dh in zip(deep, dhits, strict=True)]
                name = "hybrid" if b == 0 else f"hybrid+t{b:g}"
                rows.append((name, {**score(idx, fused, gold), "ms": dms + lms}))
    return rows


def chunk_rows(
    corpus: Path, queries: Sequence[str], gold: list[set[str]], sizes: Sequence[int], work: Path
) -> list[tuple[str, dict[str, float]]]:
    from sleuth.search import Index

    rows = []
    for size in sizes:
        t0 = time.perf_counter()
        idx = Index.build([corpus], work / f"chunks-{size}", max_chars=size)
        build = time.perf_counter() - t0
        t0 = time.perf_counter()
        deep = [idx.lexical.search(q, max(KS), None) for q in queries]
        ms = (time.perf_counter() - t0) / len(queries) * 1000
        rows.append(
            (
                f"lexical/{size}",
                {**score(idx, deep, gold), "ms": ms, "passages": idx.manifest["passages"], "build_s": build},
            )
        )
    return rows


def print_rows(title: str, rows: list[tuple[str, dict[str, float]]], label: str = "R") -> None:
    print(f"\n{title}")
    head = " ".join(f"{label}@{k:<3}" for k in KS) + " " + " ".join(f"all@{k:<3}" for k in KS)
    print(f"{'row':14} {head} {'ms/query':>8}")
    for name, r in rows:
        cells = " ".join(f"{r[f'R@{k}']:6.3f}" for k in KS) + " " + " ".join(f"{r[f'all@{k}']:6.3f}" for k in KS)
        extra = f"  ({int(r['passages'])} passages, built in {r['build_s']:.1f}s)" if "passages" in r else ""
        print(f"{name:14} {cells} {r['ms']:8.2f}{extra}")


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
    ap.add_argument(
        "--data", default="hotpotqa/train.jsonl", help="Questions file (relative to the data dir or a path)."
    )
    ap.add_argument("--modes", default=",".join(MODES), help="Comma-separated subset of lexical,dense,hybrid.")
    ap.add_argument("--title-boosts", default="0.5,1,2", help="Title (head field) weights to try beside plain BM25.")
    ap.add_argument("--chunks", default="", help="Also build lexical indexes with these passage sizes (max_chars).")
    ap.add_argument("--hops", action="store_true", help="Also search every decomposition hop (MuSiQue).")
    ap.add_argument("--policy", action="store_true", help="Also check policy_zh (scoped evidence recall, leaks).")
    ap.add_argument("--no-progress", action="store_true")
    a = ap.parse_args()
    from sleuth.search import open_retriever

    modes = tuple(m for m in a.modes.split(",") if m in MODES)
    boosts = [float(b) for b in a.title_boosts.split(",") if b.strip()]
    path = Path(a.data) if Path(a.data).exists() else DATA / a.data
    with tempfile.TemporaryDirectory(prefix="bench-retrieval-") as tmp:
        work = Path(tmp)
        ds, corpus = pooled_corpus(path, work)
        t0 = time.perf_counter()
        idx = open_retriever(corpus, dense=modes != ("lexical",), progress=not a.no_progress)
        setup = time.perf_counter() - t0
        items = [it for it in ds.items if it.gold_titles]
        queries = [it.question for it in items]
        gold = [set(it.gold_titles) for it in items]
        print(
            f"{ds.name}: {len(items)} questions, {idx.manifest['passages']} pooled passages (index ready in {setup:.1f}s)"
        )  # type: ignore[attr-defined]
        print_rows("whole questions (supporting titles)", measure(idx, queries, gold, modes, boosts))
        if a.hops:
            hops = hop_queries(ds)
            print_rows(
                f"decomposition hops ({len(hops)}; the hop's supporting title)",
                measure(idx, [q for q, _ in hops], [{t} for _, t in hops], modes, boosts),
                label="hop",
            )
        if a.chunks:
            sizes = [int(s) for s in a.chunks.split(",") if s.strip()]
            print_rows("passage size (lexical, whole questions)", chunk_rows(corpus, queries, gold, sizes, work))
    if a.policy:
        pol = policy(modes)
        print("\npolicy_zh: 8 questions, each within its own scope (k=5)")
        print(f"{'mode':8} {'evidence@5':>10} {'leaks':>6}  per question")
        for mode, r in pol:
            print(f"{mode:8} {r['evidence@5']:10.3f} {r['leaks']:6d}  {r['per_question']}")
        if any(r["leaks"] for _, r in pol):
            sys.exit("an out-of-scope passage was returned")


if __name__ == "__main__":
    main()
