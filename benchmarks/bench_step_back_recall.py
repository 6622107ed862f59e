"""What Step-back's abstraction buys in retrieval: its context against RAG's passages, per prompt variant.

Step-back's answer can only use what its two routes found.  This runs Step-back's own steps
1-5 (:meth:`sleuth.strategies.step_back.StepBack.evidence`: retrieve for the question, ask
for the step-back question, retrieve for it, merge, rerank) with the model, stops before
the answer call, and scores the passages against the gold supporting titles:

* ``rag@k``: the question's own top ``k`` (what RAG shows the model);
* ``route``: the step-back question's own ``k_stepback`` passages;
* ``context``: the reranked context Step-back shows (``k_context`` passages), and
  ``ctx@k`` its first ``k``;
* ``all``: the share of questions with every supporting title in the context;
* ``new``: supporting titles in the context that RAG's top ``k`` missed, summed;
* ``fallback``: step-back questions the parser rejected (the template was used);
  ``echo``: step-back questions whose content words are all the question's.

Each ``--variant FILE`` is another step-back question template (``$question`` in it) run on
the same questions beside the shipped one, so a proposed prompt is measured against the
current one in the same run, before any answer is paid for.  Questions, index and search
mode are those of a committed or scratch eval run (``RUN``), so tune on a run over
``hotpotqa/train.jsonl``, never on the test set:

    OMP_WAIT_POLICY=PASSIVE PYTHONPATH=src .venv/bin/python benchmarks/bench_step_back_recall.py \\
        RUN --variant my_step_back_question.txt --limit 40

Only the step-back question call reaches the model (about 300 prompt tokens, 64 at most
out); its responses are cached (``--no-cache`` to turn that off).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from string import Template
from typing import Any

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_records import items_of, records
from sleuth.llm import get_llm
from sleuth.search import open_retriever
from sleuth.strategies.step_back import StepBack
from sleuth.strategies.text import content_tokens

SHIPPED = "shipped"


class Variant(StepBack):
    """Step-back with another step-back question template (the experiment's only variable)."""

    template: str | None = None

    def prompt(self, st: Any, name: str, **kw: Any) -> str:
        if self.template is not None and name == "step_back_question":
            return Template(self.template).substitute(**kw)
        return super().prompt(st, name, **kw)


def titles(passages: list[Any]) -> set[str]:
    return {p.title or p.doc_id for p in passages}


def measure(strategy: Variant, question: str, gold: set[str], k: int) -> dict[str, Any]:
    st = strategy.begin(question)
    abstract, context, _ = strategy.evidence(question, st)
    searches = {e.data["route"]: e.data["passages"] for e in st.result.trace.events if e.kind == "search"}
    rag = {p["title"] or p["doc_id"] for p in searches.get("original", [])[:k]}
    route = {p["title"] or p["doc_id"] for p in searches.get("stepback", [])}
    step = next(e.data for e in st.result.trace.events if e.kind == "step_back")
    ctx = titles(context)
    return {
        "question": question,
        "step_back": abstract,
        "fallback": bool(step["fallback"]),
        "echo": content_tokens(abstract) <= content_tokens(question),
        "rag@k": len(gold & rag) / len(gold),
        "route": len(gold & route) / len(gold),
        "context": len(gold & ctx) / len(gold),
        "ctx@k": len(gold & titles(context[:k])) / len(gold),
        "all": float(gold <= ctx),
        "new": len((gold & ctx) - rag),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, help="An eval run directory (its questions, index and search mode).")
    ap.add_argument("--variant", action="append", default=[], help="Another step-back question template file.")
    ap.add_argument("--limit", type=int, default=40)
    ap.add_argument("--model", default="qwen2.5-1.5b")
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--no-cache", action="store_true")
    ap.add_argument("--out", type=Path, help="Per-question rows (JSON lines).")
    ap.add_argument("--show", action="store_true", help="Print each question's step-back questions.")
    a = ap.parse_args()

    manifest = json.loads((a.run / "run.json").read_text())
    index = manifest.get("index") or {}
    if not index.get("spec"):
        sys.exit(f"{a.run} has no index (a closed or distractor run); give an open-setting run")
    mode = index.get("mode")
    retriever = open_retriever(index["spec"], mode=mode) if mode else open_retriever(index["spec"])
    items = items_of(a.run)
    qids = list(dict.fromkeys(str(r["qid"]) for r in records(a.run)))
    chosen = [items[q] for q in qids if q in items and items[q].gold_titles][: a.limit]
    llm = get_llm(a.model, cache=not a.no_cache)
    variants: dict[str, str | None] = {SHIPPED: None}
    variants |= {Path(v).stem: Path(v).read_text(encoding="utf-8") for v in a.variant}

    rows: dict[str, list[dict[str, Any]]] = {}
    for name, text in variants.items():
        strategy = Variant(llm, retriever, k=a.k)
        strategy.template = text
        rows[name] = [measure(strategy, it.question, set(it.gold_titles), a.k) for it in chosen]
        print(f"{name}: {len(rows[name])} questions done", file=sys.stderr)

    keys = ("rag@k", "route", "context", "ctx@k", "all")
    print(f"{len(chosen)} questions of {manifest['data']['name']}, {index.get('mode')} search, k={a.k}")
    print(f"{'variant':22}" + "".join(f"{k:>9}" for k in keys) + f"{'new':>6}{'fallback':>9}{'echo':>6}")
    for name, rs in rows.items():
        means = [sum(r[k] for r in rs) / len(rs) for k in keys]
        extra = (sum(r["new"] for r in rs), sum(r["fallback"] for r in rs), sum(r["echo"] for r in rs))
        print(f"{name:22}" + "".join(f"{m:9.3f}" for m in means) + f"{extra[0]:6d}{extra[1]:9d}{extra[2]:6d}")
    if a.show:
        for i, it in enumerate(chosen):
            print(f"\n{it.question}")
            for name, rs in rows.items():
                print(f"  {name:12} {rs[i]['context']:.2f}  {rs[i]['step_back']}")
    if a.out:
        with a.out.open("w", encoding="utf-8") as f:
            for name, rs in rows.items():
                for r in rs:
                    f.write(json.dumps({"variant": name, **r}, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
