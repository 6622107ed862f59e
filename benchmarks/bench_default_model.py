"""Choose the default embedded model by measurement: HotpotQA answer quality vs seconds per question.

For the first N questions of ``hotpotqa/test.jsonl`` each model gets the question
plus its two gold paragraphs (the ``supporting_facts`` titles) and is asked for a
short answer ("gold" mode); "closed" mode gives the question alone.  Scores are
SQuAD-normalised exact match and token F1.

    .venv/bin/python benchmarks/bench_default_model.py --n 20 --models qwen2.5-0.5b qwen2.5-1.5b --modes gold closed
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import string
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from sleuth.llm import GenParams, get_llm
from sleuth.llm.embedded import stop_model

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("SLEUTH_DATA_DIR", ROOT.parent / "shared" / "data"))

SYSTEM = (
    "You answer questions with a short answer only: a name, a date, a number, or yes/no. No sentence, no explanation."
)


def normalize(s: str) -> str:
    """SQuAD answer normalisation."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def f1(pred: str, gold: str) -> float:
    p, g = normalize(pred).split(), normalize(gold).split()
    if not p or not g:
        return float(p == g)
    common = collections.Counter(p) & collections.Counter(g)
    same = sum(common.values())
    if same == 0:
        return 0.0
    prec, rec = same / len(p), same / len(g)
    return 2 * prec * rec / (prec + rec)


def gold_paragraphs(rec: dict) -> str:
    titles = list(dict.fromkeys(rec["supporting_facts"]["title"]))
    ctx = dict(zip(rec["context"]["title"], rec["context"]["sentences"], strict=False))
    return "\n\n".join(f"{t}: {''.join(ctx[t]).strip()}" for t in titles if t in ctx)


def messages(rec: dict, mode: str) -> list[dict[str, str]]:
    if mode == "gold":
        user = f"Paragraphs:\n{gold_paragraphs(rec)}\n\nQuestion: {rec['question']}\nShort answer:"
    else:
        user = f"Question: {rec['question']}\nShort answer:"
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def prompt(rec: dict, mode: str) -> str:
    """The same content as :func:`messages` for raw completion mode."""
    ctx = f"Paragraphs:\n{gold_paragraphs(rec)}\n\n" if mode == "gold" else ""
    return f"{SYSTEM}\n\n{ctx}Question: {rec['question']}\nShort answer:"


def clean(ans: str) -> str:
    ans = ans.strip().split("\n")[0]
    ans = re.sub(r"^(short answer|answer)\s*:\s*", "", ans, flags=re.I)
    return ans.strip().rstrip(".")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--models", nargs="+", default=["qwen2.5-0.5b", "qwen2.5-1.5b"])
    ap.add_argument("--modes", nargs="+", default=["gold", "closed"], choices=["gold", "closed"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--format", choices=["chat", "complete"], default="chat", help="chat messages or a raw completion prompt"
    )
    ap.add_argument("--out", type=Path, default=None, help="write per-question JSONL here")
    a = ap.parse_args(argv)

    recs = [json.loads(line) for line in (DATA / "hotpotqa" / "test.jsonl").open()][: a.n]
    rows = []
    out = a.out.open("w") if a.out else None
    for name in a.models:
        t0 = time.perf_counter()
        llm = get_llm(name, cache=False, ctx_size=4096, threads=a.threads)
        load = time.perf_counter() - t0
        for mode in a.modes:
            em = f1_sum = secs = 0.0
            for rec in recs:
                if a.format == "chat":
                    c = llm.chat(messages(rec, mode), GenParams(max_tokens=24, temperature=0, stop=["\n"]))
                else:
                    c = llm.complete(prompt(rec, mode), GenParams(max_tokens=24, temperature=0, stop=["\n"]))
                pred = clean(c.text)
                e = float(normalize(pred) == normalize(rec["answer"]))
                f = f1(pred, rec["answer"])
                em, f1_sum, secs = em + e, f1_sum + f, secs + c.latency_s
                if out:
                    out.write(
                        json.dumps(
                            {
                                "model": name,
                                "mode": mode,
                                "format": a.format,
                                "id": rec["id"],
                                "pred": pred,
                                "gold": rec["answer"],
                                "em": e,
                                "f1": f,
                                "s": c.latency_s,
                            }
                        )
                        + "\n"
                    )
            n = len(recs)
            rows.append((name, mode, n, em / n, f1_sum / n, secs / n, load))
            print(
                f"{name:14s} {mode:6s} {a.format:8s} n={n} EM={em / n:.2f} F1={f1_sum / n:.2f} s/q={secs / n:.2f}",
                file=sys.stderr,
                flush=True,
            )
        llm.close()
        stop_model(name)
    print("| model | context | format | n | EM | F1 | s / question | load s |")
    print("|---|---|---|---|---|---|---|---|")
    for name, mode, n, em, f, s, load in rows:
        ctx = "question + 2 gold paragraphs" if mode == "gold" else "closed book"
        print(f"| {name} | {ctx} | {a.format} | {n} | {em:.2f} | {f:.2f} | {s:.2f} | {load:.1f} |")


if __name__ == "__main__":
    main()
