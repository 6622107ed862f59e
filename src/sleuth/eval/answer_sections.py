"""Report sections read from what a strategy records about its own answer: the draft it wrote
before its last pass against its final answer (RAT, Self-Ask's reading pass, Search-o1's), and
answers of several parts (RGB).  Part of ``report.md`` (:mod:`sleuth.eval.report`)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from sleuth.eval.store import in_order, is_composed, primary_score
from sleuth.eval.summary import BOOTSTRAP, bootstrap_ci, cell, mean_or_nan


def draft_section(records: Sequence[Mapping[str, Any]], order: Sequence[str]) -> list[str]:
    """The final answer against the strategy's own draft (RAT's; Self-Ask's scaffold answer
    when it reads the documents again), paired per question."""
    by: dict[str, list[tuple[float, float]]] = defaultdict(list)
    total: Counter[str] = Counter()
    for r in records:
        if not is_composed(r):
            continue
        total[r["strategy"]] += 1
        d = (r.get("scores") or {}).get("draft_score")
        if d is not None:
            by[r["strategy"]].append((float(d), primary_score(r)))
    names = [s for s in in_order(by, order) if by[s]]
    if not names:
        return []
    out = [
        "",
        "## Draft and final answer",
        "",
        "The answer a strategy wrote before its last pass (RAT's chain-of-thought draft before it searched; "
        "Self-Ask's scaffold answer before its final reading pass; Search-o1's reasoning answer before its "
        "reading pass or its settled comparison, with `final_read` or `settle_comparison`) against its final "
        "answer on the same "
        "questions: primary score of each, and the final minus the draft "
        f"with a 95% paired bootstrap CI ({BOOTSTRAP} resamples). Records made before drafts had a short answer "
        "are not counted (*with a draft* of *questions*).",
        "",
        "| strategy | with a draft | questions | draft | final | final − draft [95% CI] | final better | worse | same |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in names:
        pairs = by[s]
        diff = [f - d for d, f in pairs]
        m, lo, hi = bootstrap_ci(diff)
        out.append(
            f"| {s} | {len(pairs)} | {total[s]} | {cell(mean_or_nan([d for d, _ in pairs]))} | "
            f"{cell(mean_or_nan([f for _, f in pairs]))} | {m:+.3f} [{lo:+.3f}, {hi:+.3f}] | "
            f"{sum(x > 0 for x in diff)} | {sum(x < 0 for x in diff)} | {sum(x == 0 for x in diff)} |"
        )
    return out


def parts_section(records: Sequence[Mapping[str, Any]], order: Sequence[str]) -> list[str]:
    """Questions whose answer has several parts (RGB): every part, the share of parts, and the
    share of parts with a supporting passage among those the strategy saw."""
    by: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for r in records:
        sc = r.get("scores") or {}
        if is_composed(r) and "part_rate" in sc:
            by[r["strategy"]].append(sc)
    names = [s for s in in_order(by, order) if by[s]]
    if not names:
        return []
    out = [
        "",
        "## Answer parts",
        "",
        "For answers of several parts (RGB): *all parts* is the primary score (the reply mentions every "
        "part), *part rate* the share of parts it mentions, *part recall* the share of parts with a "
        "supporting passage among all the passages the strategy's searches returned.",
        "",
        "| strategy | questions | all parts | part rate | part recall |",
        "|---|---|---|---|---|",
    ]

    for s in names:
        rows = by[s]
        recall = [float(x["part_recall"]) for x in rows if "part_recall" in x]
        out.append(
            f"| {s} | {len(rows)} | {cell(mean_or_nan([float(x.get('parts', 0)) for x in rows]))} | "
            f"{cell(mean_or_nan([float(x['part_rate']) for x in rows]))} | {cell(mean_or_nan(recall))} |"
        )
    return out
