"""The report's "Policy conclusions" section: conclusion accuracy by kind of policy question
(:mod:`sleuth.eval.policy` scores each record)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sleuth.eval.store import is_composed
from sleuth.eval.summary import cell, mean_or_nan


def policy_section(records: Sequence[Mapping[str, Any]], order: Sequence[str]) -> list[str]:
    """The report's "Policy conclusions" table (only when the records are policy questions)."""
    by: dict[str, list[Mapping[str, Any]]] = {}
    for r in records:
        sc = r.get("scores") or {}
        if is_composed(r) and "conclusion" in sc:
            by.setdefault(str(r["strategy"]), []).append(r)
    if not by:
        return []
    out = [
        "",
        "## Policy conclusions",
        "",
        "Conclusion accuracy (`sleuth.eval.policy`): a yes/no question counts with the right polarity, no "
        "contradiction and the deciding clause's terms; an out-of-scope question (its deciding clause is outside "
        "the asker's scope) counts when the answer says the accessible documents do not settle it and cites "
        "nothing restricted; any other question when it mentions its terms. Evidence precision and recall are "
        "the cited documents against the question's `evidence`. A scope violation is a cited passage outside "
        "the asker's scope, a restricted document seen, or a restricted fact stated (must be 0).",
        "",
        "| strategy | n | conclusion | yes/no (n) | out of scope (n) | lookup (n) | must-mention | contradictions "
        "| evidence precision | evidence recall | scope violations |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def mean(rs: Sequence[Mapping[str, Any]], key: str) -> float:
        return mean_or_nan([float(v) for r in rs if (v := (r.get("scores") or {}).get(key)) is not None])

    for s in [x for x in order if x in by] + sorted(set(by) - set(order)):
        rs = by[s]
        kinds = {k: [r for r in rs if r.get("kind") == k] for k in ("yes/no", "out of scope", "lookup")}
        cols = [f"{cell(mean(v, 'conclusion'))} ({len(v)})" if v else "–" for v in kinds.values()]
        violations = sum(1 for r in rs if (r.get("scores") or {}).get("scope_violation"))
        out.append(
            f"| {s} | {len(rs)} | {cell(mean(rs, 'conclusion'))} | "
            + " | ".join(cols)
            + f" | {cell(mean(rs, 'terms'))} "
            f"| {int(sum((r.get('scores') or {}).get('contradiction') or 0 for r in rs))} "
            f"| {cell(mean(rs, 'cite_precision'))} | {cell(mean(rs, 'cited_recall_id'))} | {violations} |"
        )
    return out
