"""The report's sections read off what the records say beyond their scores (:mod:`sleuth.eval.report`
lays them out; each is empty when the records have nothing for it): where the answers go wrong
(:func:`outcome`), the final answer against the strategy's own draft, the answer parts (RGB) and the
policy conclusions (policy_zh).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from sleuth.eval.store import primary_score
from sleuth.eval.summary import (
    BOOTSTRAP,
    Records,
    cell,
    mean_or_nan,
    paired,
    paired_cells,
    per_strategy,
    score_mean,
    section,
)

#: a composed question counts as answered correctly at this primary score or above
CORRECT_AT = 0.5
OUTCOMES = {
    "correct": "correct",
    "failed": "run failed",
    "closed_book": "wrong, no retrieval",
    "no_evidence": "wrong, no gold evidence seen",
    "some_evidence": "wrong, part of the gold evidence seen",
    "all_evidence": "wrong, all gold evidence seen",
    "unknown_evidence": "wrong, gold evidence unknown",
}


def outcome(rec: Mapping[str, Any]) -> str:
    """The bucket (a key of :data:`OUTCOMES`) of one record."""
    scores = rec.get("scores") or {}
    if rec.get("status") == "failed":
        return "failed"
    if primary_score(rec) >= CORRECT_AT:
        return "correct"
    if not int(scores.get("searches") or 0):
        return "closed_book"
    r = next((float(scores[k]) for k in ("recall_id", "recall_title") if scores.get(k) is not None), None)
    if r is None:
        return "unknown_evidence"
    return "no_evidence" if r <= 0.0 else "all_evidence" if r >= 1.0 else "some_evidence"


def diagnosis_section(records: Records, order: Sequence[str]) -> list[str]:
    """Each strategy's composed questions counted by :func:`outcome` (empty without records)."""
    return section(
        "Where the answers go wrong",
        f"Each composed question in one bucket (correct: primary score ≥ {CORRECT_AT}). *Gold evidence* is the "
        "dataset's supporting paragraphs (ids, else titles) among all passages the run saw; "
        "*all gold evidence seen* and still wrong is a reading failure, *none seen* a retrieval failure.",
        ["strategy", "n", *OUTCOMES.values()],
        (
            [s, len(rs), *(Counter(map(outcome, rs)).get(k, 0) for k in OUTCOMES)]
            for s, rs in per_strategy(records, order)
        ),
    )


def draft_section(records: Records, order: Sequence[str]) -> list[str]:
    """The final answer against the strategy's own draft, paired per question."""
    rows = []
    for s, rs in per_strategy(records, order):
        pairs = [
            (float(d), primary_score(r)) for r in rs if (d := (r.get("scores") or {}).get("draft_score")) is not None
        ]
        if pairs:
            drafts, finals = (cell(mean_or_nan([p[i] for p in pairs])) for i in (0, 1))
            rows.append([s, len(pairs), len(rs), drafts, finals, paired_cells(paired([f - d for d, f in pairs]))])
    return section(
        "Draft and final answer",
        "The answer a strategy wrote before its last pass (RAT's chain-of-thought draft before it searched; "
        "Self-Ask's scaffold answer before its final reading pass; Search-o1's reasoning answer before its "
        "reading pass or its settled comparison, with `final_read` or `settle_comparison`) against its final "
        "answer on the same questions: primary score of each, and the final minus the draft with a 95% paired "
        f"bootstrap CI ({BOOTSTRAP} resamples). Records made before drafts had a short answer are not counted "
        "(*with a draft* of *questions*).",
        "strategy | with a draft | questions | draft | final | final − draft [95% CI] | final better | worse | same",
        rows,
    )


def _scored(key: str) -> Any:
    """Keeps the records scored with ``key``."""
    return lambda r: key in (r.get("scores") or {})


def parts_section(records: Records, order: Sequence[str]) -> list[str]:
    """Questions whose answer has several parts (RGB): every part, the share of parts, and the
    share of parts with a supporting passage among those the strategy saw."""
    return section(
        "Answer parts",
        "For answers of several parts (RGB): *all parts* is the primary score (the reply mentions every "
        "part), *part rate* the share of parts it mentions, *part recall* the share of parts with a "
        "supporting passage among all the passages the strategy's searches returned.",
        "strategy | questions | all parts | part rate | part recall",
        (
            [s, len(rs), *(cell(score_mean(rs, k)) for k in ("parts", "part_rate", "part_recall"))]
            for s, rs in per_strategy(records, order, _scored("part_rate"))
        ),
    )


def policy_section(records: Records, order: Sequence[str]) -> list[str]:
    """Conclusion accuracy by kind of policy question (:mod:`sleuth.eval.policy` scores each record)."""
    rows = []
    for s, rs in per_strategy(records, order, _scored("conclusion")):
        kinds = [[r for r in rs if r.get("kind") == k] for k in ("yes/no", "out of scope", "lookup")]
        by_kind = [f"{cell(score_mean(v, 'conclusion'))} ({len(v)})" if v else "–" for v in kinds]
        flags = [sum(bool((r.get("scores") or {}).get(k)) for r in rs) for k in ("contradiction", "scope_violation")]
        rows.append([s, len(rs), cell(score_mean(rs, "conclusion")), by_kind, cell(score_mean(rs, "terms")), flags])
    return section(
        "Policy conclusions",
        "Conclusion accuracy (`sleuth.eval.policy`): a yes/no question counts with the right polarity, no "
        "contradiction and the deciding clause's terms; an out-of-scope question (its deciding clause is outside "
        "the asker's scope) counts when the answer says the accessible documents do not settle it and cites "
        "nothing restricted; any other question when it mentions its terms. A scope violation is a cited passage "
        "outside the asker's scope, a restricted document seen, or a restricted fact stated (must be 0). The "
        "cited documents against the question's `evidence` are under *Citations*.",
        "strategy | n | conclusion | yes/no (n) | out of scope (n) | lookup (n) | must-mention | contradictions "
        "| scope violations",
        rows,
    )
