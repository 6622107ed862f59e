"""Old against re-made records of a run directory: what a code change did to the scores.

``--redo-stale`` keeps the old line of every task it runs again; the newest line is the one
the report reads (``sleuth eval compact`` moves the old ones to ``replaced.jsonl.gz``).  This
script reads both: for every strategy with replaced records it prints
the old and new means on exactly those records, and, on the composed questions whose baseline
record was replaced and that every strategy has finished, each strategy's paired difference
against the old and against the new baseline (the report's bootstrap, questions in the
report's order).

    python docs/results/replaced.py docs/results/hotpotqa-open [--baseline rag]
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

from sleuth.eval.diagnose import is_sentence, signals
from sleuth.eval.report import bootstrap_ci
from sleuth.eval.store import is_composed, iter_history, primary_score


def history(run_dir: Path) -> dict[tuple[str, str], list[dict]]:
    """Every record the run keeps (replaced.jsonl.gz, then the results), grouped by (strategy, qid), oldest first."""
    out: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in iter_history(run_dir):
        out[(r["strategy"], str(r["qid"]))].append(r)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--baseline", default="rag")
    a = ap.parse_args()
    hist = history(a.run_dir)
    strategies = sorted({s for s, _ in hist})

    for s in strategies:
        pairs = [(v[0], v[-1]) for (st, _), v in sorted(hist.items()) if st == s and len(v) > 1]
        if not pairs:
            continue
        n = len(pairs)

        def mean(i: int, key: str, pairs: list = pairs, n: int = n) -> float:
            return sum(p[i]["scores"].get(key) or 0 for p in pairs) / n

        words = [sum(is_sentence(p[i]["short_answer"]) for p in pairs) for i in (0, 1)]
        same = sum(p[0]["answer"] == p[1]["answer"] for p in pairs)
        print(
            f"{s}: {n} records replaced | F1 {mean(0, 'f1'):.3f} -> {mean(1, 'f1'):.3f}"
            f" | EM {mean(0, 'em'):.3f} -> {mean(1, 'em'):.3f}"
            f" | cover-EM {mean(0, 'cover_em'):.3f} -> {mean(1, 'cover_em'):.3f}"
            f" | sentence answers {words[0]} -> {words[1]}"
            f" | parse_fallback in {sum(signals(p[1])['parse_fallback'] > 0 for p in pairs)}"
            f" | seconds {mean(0, 'seconds'):.1f} -> {mean(1, 'seconds'):.1f}"
            f" | long answer unchanged in {same}/{n}"
        )

    base = a.baseline
    qids = sorted(
        q
        for (s, q), v in hist.items()
        if s == base and len(v) > 1 and is_composed(v[-1]) and all((t, q) in hist for t in strategies)
    )
    if not qids:
        return
    print(f"\npaired against {base} on the {len(qids)} composed questions whose {base} record was replaced:")
    for s in strategies:
        if s == base:
            continue
        for tag, i in (("old", 0), ("new", -1)):
            d = [primary_score(hist[(s, q)][-1]) - primary_score(hist[(base, q)][i]) for q in qids]
            m, lo, hi = bootstrap_ci(d)
            print(
                f"  {s} - {tag} {base}: {m:+.3f} [{lo:+.3f}, {hi:+.3f}]"
                f"  better {sum(x > 0 for x in d)}, worse {sum(x < 0 for x in d)}"
            )


if __name__ == "__main__":
    main()
