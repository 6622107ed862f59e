"""Where answers go wrong, read off each record's trace.

Two views, both pure functions of ``results.jsonl`` (the report regenerates them):

* :func:`outcome` puts each composed question's record in one bucket: correct, or
  wrong because the run failed, answered closed-book, never saw the gold evidence,
  saw part of it, or saw all of it and still answered wrong (a reading failure);
  "evidence" is the gold supporting paragraphs (ids, else titles) the dataset names.
* :func:`signals` counts what the strategies themselves noticed and logged: forced
  finishes, repeated or restated follow-ups, Reason-in-Documents steps that found
  nothing helpful, step-back fallbacks, skipped RAT revisions, parse fallbacks.
* :func:`answer_form_section` (EM/F1 datasets) counts short answers written as sentences
  and wrong answers that nevertheless contain the gold answer (cover-EM): the part of a
  low score that is the answer's form, not its knowledge.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sleuth.eval.store import in_order, is_composed, primary_score

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

#: a short answer of more than this many words is a sentence, not an answer span
SENTENCE_WORDS = 6
#: primary metrics that compare answer tokens (and so punish a right answer written as a sentence)
TOKEN_METRICS = ("f1", "em")

#: trace notes that describe the run rather than a problem
_INFORMATIONAL = {"scaffold", "reasoning", "batch"}


def _evidence_recall(scores: Mapping[str, Any]) -> float | None:
    for key in ("recall_id", "recall_title"):
        v = scores.get(key)
        if v is not None:
            return float(v)
    return None


def outcome(rec: Mapping[str, Any]) -> str:
    """The bucket (a key of :data:`OUTCOMES`) of one record."""
    scores = rec.get("scores") or {}
    if rec.get("status") == "failed":
        return "failed"
    if primary_score(rec) >= CORRECT_AT:
        return "correct"
    if not int(scores.get("searches") or 0):
        return "closed_book"
    r = _evidence_recall(scores)
    if r is None:
        return "unknown_evidence"
    if r <= 0.0:
        return "no_evidence"
    return "all_evidence" if r >= 1.0 else "some_evidence"


def signals(rec: Mapping[str, Any]) -> Counter[str]:
    """What one run's trace logged about its own trouble (counts per signal)."""
    c: Counter[str] = Counter()
    for ev in (rec.get("result") or {}).get("trace") or []:
        kind, data = ev.get("kind"), ev.get("data") or {}
        if kind == "note":
            t = str(data.get("type") or "note")
            if t not in _INFORMATIONAL:
                c[t] += 1
        elif kind == "reason_in_documents":
            c["rid_steps"] += 1
            c["rid_nothing_helpful"] += not data.get("helpful", True)
        elif kind == "follow_up" and data.get("repeat_of") is not None:
            c["repeated_follow_up"] += 1
        elif kind == "step_back" and data.get("fallback"):
            c["step_back_fallback"] += 1
        elif kind == "revision" and data.get("skipped"):
            c["revision_skipped"] += 1
    return c


def _composed_by_strategy(records: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """The records of composed questions (not gap hops), grouped by strategy."""
    by: dict[str, list[Mapping[str, Any]]] = {}
    for r in records:
        if is_composed(r):
            by.setdefault(r["strategy"], []).append(r)
    return by


def diagnosis_section(records: Sequence[Mapping[str, Any]], order: Sequence[str]) -> list[str]:
    """Markdown: the outcome table and the trace-signal table (empty without records)."""
    by = _composed_by_strategy(records)
    if not by:
        return []
    names = in_order(by, order)
    out = [
        "",
        "## Where the answers go wrong",
        "",
        f"Each composed question in one bucket (correct: primary score ≥ {CORRECT_AT}). *Gold evidence* is the "
        "dataset's supporting paragraphs (ids, else titles) among all passages the run saw; "
        "*all gold evidence seen* and still wrong is a reading failure, *none seen* a retrieval failure.",
        "",
        "| strategy | n | " + " | ".join(OUTCOMES.values()) + " |",
        "|---|---|" + "---|" * len(OUTCOMES),
    ]
    for s in names:
        c = Counter(outcome(r) for r in by[s])
        out.append(f"| {s} | {len(by[s])} | " + " | ".join(str(c.get(k, 0)) for k in OUTCOMES) + " |")
    sig = {s: [signals(r) for r in by[s]] for s in names}
    if any(any(x) for x in sig.values()):
        out += [
            "",
            "What the traces logged (records with the signal / occurrences):",
            "",
            "| strategy | signals |",
            "|---|---|",
        ]
        for s in names:
            per = sig[s]
            keys = sorted({k for x in per for k in x})
            cells = []
            for k in keys:
                if k == "rid_steps":
                    continue
                if k == "rid_nothing_helpful":
                    cells.append(
                        f"Reason-in-Documents found nothing helpful: {sum(x[k] for x in per)} of "
                        f"{sum(x['rid_steps'] for x in per)} steps"
                    )
                    continue
                cells.append(f"{k}: {sum(1 for x in per if x[k])} / {sum(x[k] for x in per)}")
            out.append(f"| {s} | {'; '.join(cells) if cells else '–'} |")
    return out


def is_sentence(short_answer: str) -> bool:
    """Whether a short answer is a sentence (more than :data:`SENTENCE_WORDS` words)."""
    return len(str(short_answer).split()) > SENTENCE_WORDS


def answer_form_section(records: Sequence[Mapping[str, Any]], order: Sequence[str]) -> list[str]:
    """Markdown: per strategy, sentence answers and wrong answers that contain the gold answer.

    Only for token-metric datasets (primary EM or F1), where the form of an answer moves its score.
    """
    by = _composed_by_strategy(r for r in records if r.get("status") != "failed")
    if not by or any((r.get("scores") or {}).get("primary") not in TOKEN_METRICS for rs in by.values() for r in rs):
        return []
    out = [
        "",
        "## Answer form",
        "",
        f"EM and F1 compare answer tokens, so a right answer written as a sentence scores low. *Sentence "
        f"answers*: short answers of more than {SENTENCE_WORDS} words. *Wrong but containing the gold answer*: "
        f"primary score below {CORRECT_AT} while the gold answer appears in the answer (cover-EM); some of "
        "these are right answers in a sentence, some name several candidates.",
        "",
        "| strategy | answered | sentence answers | correct | wrong but containing the gold answer | cover-EM |",
        "|---|---|---|---|---|---|",
    ]
    for s in in_order(by, order):
        rs = by[s]
        sentences = sum(is_sentence(r.get("short_answer", "")) for r in rs)
        right = [outcome(r) == "correct" for r in rs]
        covered = [float((r.get("scores") or {}).get("cover_em") or 0.0) >= 1.0 for r in rs]
        hidden = sum(c and not ok for c, ok in zip(covered, right, strict=True))
        out.append(f"| {s} | {len(rs)} | {sentences} | {sum(right)} | {hidden} | {sum(covered)} |")
    return out
