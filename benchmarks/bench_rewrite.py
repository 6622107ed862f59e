"""The follow-up rewrite alone, measured on conversations: one short LLM call each, no strategy run.

For every conversation record (``messages`` + ``standalone``, as ``benchmarks/build_conversations.py``
writes them) the strategy's own rewrite step (:meth:`sleuth.strategies.base.Strategy.standalone`,
the same prompt, parsing and checks a run uses) rewrites the last message, and the rewritten
question is compared with the record's standalone question:

* **F1**: token F1 of the rewritten question against the standalone one (SQuAD normalisation);
* **bridge**: the rewritten question contains the previous answer (the last assistant turn, its
  final full stop dropped), the entity the follow-up's reference stands for;
* **exact**: the rewritten question equals the standalone one (normalised);
* **ref left**: the follow-up's reference words ("that place", from ``metadata.reference``) are
  still in the rewritten question;
* **fallback**: the rewrite's checks replaced the model's reply (the ``rewrite`` event's
  ``fallback``).

``--opt NAME=VALUE`` sets strategy options (e.g. ``--opt rewrite_check=false``), so each
switchable part of the rewrite is measured paired against the same conversations; ``--compare``
runs the options given with ``--opt`` and the defaults on the same conversations and prints the
paired differences (95% bootstrap CI).  Tune on the tuning half only::

    python benchmarks/build_conversations.py ../shared/data/musique/train.json runs/conv/tuning.jsonl --split tuning
    OMP_WAIT_POLICY=PASSIVE python benchmarks/bench_rewrite.py runs/conv/tuning.jsonl --show 10
    OMP_WAIT_POLICY=PASSIVE python benchmarks/bench_rewrite.py runs/conv/tuning.jsonl --opt rewrite_check=false --compare

Records marked ``"split": "reporting"`` (in ``metadata``) are refused unless ``--reporting`` is
given (to report a finished rewrite's figures, never to design it).  Prints one line per
setting (the figures), then ``--show N`` conversations whose rewrite missed the bridge.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from sleuth.eval.metrics import f1, normalize_answer
from sleuth.eval.summary import bootstrap_ci
from sleuth.strategies.conversation import names, parse_history
from sleuth.strategies.direct import Direct
from sleuth.strategies.options import parse_opts


def load(path: Path, reporting: bool) -> list[dict[str, Any]]:
    recs = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    recs = [r for r in recs if r.get("messages") and r.get("standalone")]
    if not reporting and any((r.get("metadata") or {}).get("split") == "reporting" for r in recs):
        raise SystemExit(f"error: {path} holds reporting conversations; pass --reporting to measure them anyway")
    return recs


def bridge_of(rec: dict[str, Any]) -> str:
    last = next((m["content"] for m in reversed(rec["messages"][:-1]) if m["role"] == "assistant"), "")
    return last.strip().rstrip(".。")


def measure(llm: Any, recs: list[dict[str, Any]], opts: dict[str, Any]) -> list[dict[str, Any]]:
    strategy = Direct(llm, **opts)
    rows = []
    for rec in recs:
        turns = parse_history(rec["messages"])
        question, history = turns[-1].content, turns[:-1]
        st = strategy.begin(question)
        t0 = time.perf_counter()
        strategy.standalone(st, history)
        seconds = time.perf_counter() - t0
        ev = next((e.data for e in st.result.trace.events if e.kind == "rewrite"), {})
        rewritten = st.result.question
        ref = (rec.get("metadata") or {}).get("reference") or ""
        rows.append(
            {
                "id": rec["id"],
                "question": question,
                "rewritten": rewritten,
                "standalone": rec["standalone"],
                "bridge_text": bridge_of(rec),
                "f1": f1(rewritten, [rec["standalone"]]),
                "bridge": float(names(rewritten, bridge_of(rec))),
                "exact": float(normalize_answer(rewritten) == normalize_answer(rec["standalone"])),
                "ref_left": float(bool(ref) and ref != "it" and names(rewritten, ref)),
                "fallback": float(bool(ev.get("fallback"))),
                "calls": sum(1 for e in st.result.trace.events if e.kind == "llm"),
                "seconds": seconds,
            }
        )
    return rows


def summary(name: str, rows: list[dict[str, Any]]) -> str:
    n = len(rows)

    def mean(k: str) -> float:
        return sum(r[k] for r in rows) / n if n else float("nan")

    lo_hi = bootstrap_ci([r["f1"] for r in rows])
    return (
        f"{name:<32} n={n:<3} F1 {mean('f1'):.3f} [{lo_hi[1]:.3f}, {lo_hi[2]:.3f}]  bridge {mean('bridge'):.3f}  "
        f"exact {mean('exact'):.3f}  ref left {mean('ref_left'):.3f}  fallback {mean('fallback'):.3f}  "
        f"calls {mean('calls'):.2f}  s/rewrite {mean('seconds'):.2f}"
    )


def paired(name: str, rows: list[dict[str, Any]], other_name: str, other: list[dict[str, Any]]) -> None:
    """Paired differences (this minus the other) on the conversations both measured."""
    by_id = {r["id"]: r for r in other}
    both = [(r, by_id[r["id"]]) for r in rows if r["id"] in by_id]
    for k in ("f1", "bridge"):
        d = [a[k] - b[k] for a, b in both]
        mean, lo, hi = bootstrap_ci(d)
        better, worse = sum(x > 0 for x in d), sum(x < 0 for x in d)
        print(f"paired {k}, {name} - {other_name} (n={len(d)}): {mean:+.3f} [{lo:+.3f}, {hi:+.3f}] ({better}/{worse})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", type=Path, help="conversations JSONL (build_conversations.py --split tuning)")
    ap.add_argument("--model", default=None, help="LLM (default: the embedded default model)")
    ap.add_argument("--opt", action="append", default=[], help="strategy option NAME=VALUE (repeatable)")
    ap.add_argument("--compare", action="store_true", help="also run the defaults and print paired differences")
    ap.add_argument("--limit", type=int, default=0, help="only the first N conversations")
    ap.add_argument("--show", type=int, default=0, help="print N conversations whose rewrite missed the bridge")
    ap.add_argument("--rows", type=Path, help="write the per-conversation rows of the (first) setting to this JSONL")
    ap.add_argument("--against", type=Path, help="rows of an earlier run (--rows): print paired differences to it")
    ap.add_argument("--reporting", action="store_true", help="allow reporting conversations (never tune on them)")
    args = ap.parse_args(argv)
    from sleuth.llm import get_llm

    recs = load(args.data, args.reporting)
    if args.limit:
        recs = recs[: args.limit]
    try:
        opts = parse_opts(args.opt)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    llm = get_llm(args.model)
    print(f"{len(recs)} conversations from {args.data}, model {args.model or 'the embedded default'}")
    settings = [(" ".join(args.opt) or "defaults", opts)]
    if args.compare and opts:
        settings.append(("defaults", {}))
    runs = []
    for name, o in settings:
        rows = measure(llm, recs, o)
        runs.append(rows)
        print(summary(name, rows))
    if len(runs) == 2:
        paired(settings[0][0], runs[0], "defaults", runs[1])
    if args.against:
        earlier = [json.loads(line) for line in args.against.read_text(encoding="utf-8").splitlines() if line.strip()]
        paired(settings[0][0], runs[0], str(args.against), earlier)
    if args.rows:
        args.rows.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in runs[0]), encoding="utf-8")
    missed = [r for r in runs[0] if not r["bridge"]][: args.show]
    for r in missed:
        print(f"- {r['id']}: {r['question']!r} [{r['bridge_text']}] -> {r['rewritten']!r} (want {r['standalone']!r})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
