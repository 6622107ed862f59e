"""The report's sections read off what the records say beyond their scores (:mod:`sleuth.eval.report`
lays them out; each is empty when the records have nothing for it):

* *Where the answers go wrong* (:func:`outcome`, :func:`signals`): each composed question in one
  bucket (correct, run failed, no retrieval, none / part / all of the gold evidence seen), and what
  the traces logged about their own trouble (forced finishes, repeated follow-ups,
  Reason-in-Documents steps that found nothing helpful, step-back fallbacks, skipped revisions).
* *Answer form* (EM/F1 datasets): short answers written as sentences, wrong answers that contain the gold.
* *Ahead of the rest*: with ``sleuth eval --only`` sittings, the strategies at least :data:`AHEAD`
  questions past the common set, on the questions they have all finished.
* *Draft and final answer*: the final answer against the strategy's own draft (RAT, Self-Ask, Search-o1).
* *Answer parts* (RGB) and *Policy conclusions* (policy_zh): their own metrics.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sleuth.eval.store import composed_by_strategy, in_order, is_composed, primary_score
from sleuth.eval.summary import (
    BOOTSTRAP,
    Progress,
    cell,
    ci_cell,
    citation_rows,
    citation_table,
    heading,
    mean_or_nan,
    paired,
    paired_cells,
    paired_differences,
    summarise,
    table,
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
#: a short answer of more than this many words is a sentence, not an answer span
SENTENCE_WORDS = 6
#: trace notes that describe the run rather than a problem
_INFORMATIONAL = {"scaffold", "reasoning", "batch"}
AHEAD = 5  # questions beyond the common set before a group of strategies gets its own section

Records = Sequence[Mapping[str, Any]]


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


def signals(rec: Mapping[str, Any]) -> Counter[str]:
    """What one run's trace logged about its own trouble (counts per signal)."""
    c: Counter[str] = Counter()
    for ev in (rec.get("result") or {}).get("trace") or []:
        kind, data = ev.get("kind"), ev.get("data") or {}
        if kind == "note" and str(data.get("type") or "note") not in _INFORMATIONAL:
            c[str(data.get("type") or "note")] += 1
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


def _signal_cells(per: Sequence[Counter[str]]) -> str:
    cells = []
    for k in sorted({k for x in per for k in x} - {"rid_steps"}):
        if k == "rid_nothing_helpful":
            cells.append(
                f"Reason-in-Documents found nothing helpful: {sum(x[k] for x in per)} of "
                f"{sum(x['rid_steps'] for x in per)} steps"
            )
        else:
            cells.append(f"{k}: {sum(1 for x in per if x[k])} / {sum(x[k] for x in per)}")
    return "; ".join(cells) if cells else "–"


def diagnosis_section(records: Records, order: Sequence[str]) -> list[str]:
    """The outcome table and the trace-signal table (empty without records)."""
    by = composed_by_strategy(records)
    names = in_order(by, order)
    if not by:
        return []
    out = heading(
        "Where the answers go wrong",
        f"Each composed question in one bucket (correct: primary score ≥ {CORRECT_AT}). *Gold evidence* is the "
        "dataset's supporting paragraphs (ids, else titles) among all passages the run saw; "
        "*all gold evidence seen* and still wrong is a reading failure, *none seen* a retrieval failure.",
    )
    counts = {s: Counter(outcome(r) for r in by[s]) for s in names}
    out += table(
        ["strategy", "n", *OUTCOMES.values()],
        ([s, len(by[s]), *(counts[s].get(k, 0) for k in OUTCOMES)] for s in names),
    )
    sig = {s: [signals(r) for r in by[s]] for s in names}
    if any(any(x) for x in sig.values()):
        out += ["", "What the traces logged (records with the signal / occurrences):", ""]
        out += table(["strategy", "signals"], ([s, _signal_cells(sig[s])] for s in names))
    return out


def is_sentence(short_answer: str) -> bool:
    """Whether a short answer is a sentence (more than :data:`SENTENCE_WORDS` words)."""
    return len(str(short_answer).split()) > SENTENCE_WORDS


def answer_form_section(records: Records, order: Sequence[str]) -> list[str]:
    """Per strategy, sentence answers and wrong answers that contain the gold answer; only for
    token-metric datasets (primary EM or F1), where the form of an answer moves its score."""
    by = composed_by_strategy(r for r in records if r.get("status") != "failed")
    if not by or any((r.get("scores") or {}).get("primary") not in ("f1", "em") for rs in by.values() for r in rs):
        return []
    rows = []
    for s in in_order(by, order):
        rs = by[s]
        right = [outcome(r) == "correct" for r in rs]
        covered = [float((r.get("scores") or {}).get("cover_em") or 0.0) >= 1.0 for r in rs]
        hidden = sum(c and not ok for c, ok in zip(covered, right, strict=True))
        rows.append(
            [s, len(rs), sum(is_sentence(r.get("short_answer", "")) for r in rs), sum(right), hidden, sum(covered)]
        )
    return heading(
        "Answer form",
        f"EM and F1 compare answer tokens, so a right answer written as a sentence scores low. *Sentence "
        f"answers*: short answers of more than {SENTENCE_WORDS} words. *Wrong but containing the gold answer*: "
        f"primary score below {CORRECT_AT} while the gold answer appears in the answer (cover-EM); some of "
        "these are right answers in a sentence, some name several candidates.",
    ) + table(
        "strategy | answered | sentence answers | correct | wrong but containing the gold answer | cover-EM", rows
    )


def leading_section(records: Records, prog: Progress, order: Sequence[str]) -> list[str]:
    """The strategies at least :data:`AHEAD` questions ahead of the common set (two or more, not all),
    on the questions they have all finished: scores, cost, paired differences, citations."""
    done: dict[str, set[str]] = defaultdict(set)
    for r in records:
        if not is_composed(r):
            return []  # a --gap run: its hops make their own set
        done[str(r["strategy"])].add(str(r["qid"]))
    floor = len(prog.complete) + AHEAD
    group = [s for s in in_order(done, order) if len(done[s]) >= floor]
    if len(group) < 2 or len(group) == len(prog.strategies):
        return []
    shared = set.intersection(*(done[s] for s in group))
    if len(shared) < floor:
        return []
    behind = {s: len(done.get(s, ())) for s in prog.strategies if s not in group}
    mine = [r for r in records if r["strategy"] in group and str(r["qid"]) in shared]
    baseline, diffs = paired_differences(mine, group)
    out = heading(
        f"Ahead of the rest: {len(group)} strategies on {len(shared)} questions",
        f"The tables above compare the {len(prog.complete)} questions every strategy has finished; "
        + ", ".join(f"{s} has finished {n}" for s, n in behind.items())
        + f". These strategies have all finished {len(shared)}: their scores and cost on those questions"
        + (f", and each one's paired difference against {baseline} (95% paired bootstrap CI)." if diffs else "."),
    )
    by_name = {d["strategy"]: paired_cells(d) for d in diffs}
    out += table(
        "strategy | n | score [95% CI] | EM | F1 | processed prompt tokens | seconds "
        f"| difference against {baseline} [95% CI] | better | worse | same",
        (
            [
                r["strategy"],
                r["n"],
                ci_cell(r["score"]),
                cell(r["em"]),
                cell(r["f1"]),
                _cost(r),
                by_name.get(r["strategy"], ["–"] * 4),
            ]
            for r in summarise(mine, order)
        ),
    )
    cites = citation_rows(mine, order)
    if cites:
        out += ["", f"Their citations on those {len(shared)} questions (read as *Citations* above):", ""]
        out += citation_table(cites)
    return out


def _cost(row: Mapping[str, Any]) -> tuple[str, str]:
    return cell(row["processed_prompt_tokens"], 1), cell(row["seconds"], 2)


def draft_section(records: Records, order: Sequence[str]) -> list[str]:
    """The final answer against the strategy's own draft, paired per question."""
    by: dict[str, list[tuple[float, float]]] = defaultdict(list)
    total: Counter[str] = Counter()
    for r in records:
        if is_composed(r):
            total[r["strategy"]] += 1
            d = (r.get("scores") or {}).get("draft_score")
            if d is not None:
                by[r["strategy"]].append((float(d), primary_score(r)))
    rows = []
    for s in in_order(by, order):
        drafts, finals = (cell(mean_or_nan([p[i] for p in by[s]])) for i in (0, 1))
        rows.append([s, len(by[s]), total[s], drafts, finals, paired_cells(paired([f - d for d, f in by[s]]))])
    if not rows:
        return []
    return heading(
        "Draft and final answer",
        "The answer a strategy wrote before its last pass (RAT's chain-of-thought draft before it searched; "
        "Self-Ask's scaffold answer before its final reading pass; Search-o1's reasoning answer before its "
        "reading pass or its settled comparison, with `final_read` or `settle_comparison`) against its final "
        "answer on the same "
        "questions: primary score of each, and the final minus the draft "
        f"with a 95% paired bootstrap CI ({BOOTSTRAP} resamples). Records made before drafts had a short answer "
        "are not counted (*with a draft* of *questions*).",
    ) + table(
        "strategy | with a draft | questions | draft | final | final − draft [95% CI] | final better | worse | same",
        rows,
    )


def _mean(rs: Iterable[Mapping[str, Any]], key: str) -> float:
    """The mean of the scores' ``key`` over the records that have it."""
    return mean_or_nan([float(v) for r in rs if (v := (r.get("scores") or {}).get(key)) is not None])


def parts_section(records: Records, order: Sequence[str]) -> list[str]:
    """Questions whose answer has several parts (RGB): every part, the share of parts, and the
    share of parts with a supporting passage among those the strategy saw."""
    by = composed_by_strategy(r for r in records if "part_rate" in (r.get("scores") or {}))
    if not by:
        return []
    return heading(
        "Answer parts",
        "For answers of several parts (RGB): *all parts* is the primary score (the reply mentions every "
        "part), *part rate* the share of parts it mentions, *part recall* the share of parts with a "
        "supporting passage among all the passages the strategy's searches returned.",
    ) + table(
        "strategy | questions | all parts | part rate | part recall",
        (
            [s, len(by[s]), *(cell(_mean(by[s], k)) for k in ("parts", "part_rate", "part_recall"))]
            for s in in_order(by, order)
        ),
    )


def policy_section(records: Records, order: Sequence[str]) -> list[str]:
    """Conclusion accuracy by kind of policy question (:mod:`sleuth.eval.policy` scores each record)."""
    by = composed_by_strategy(r for r in records if "conclusion" in (r.get("scores") or {}))
    if not by:
        return []
    rows = []
    for s in in_order(by, order):
        rs = by[s]
        kinds = [[r for r in rs if r.get("kind") == k] for k in ("yes/no", "out of scope", "lookup")]
        rows.append(
            [s, len(rs), cell(_mean(rs, "conclusion"))]
            + [f"{cell(_mean(v, 'conclusion'))} ({len(v)})" if v else "–" for v in kinds]
            + [cell(_mean(rs, "terms")), int(sum((r.get("scores") or {}).get("contradiction") or 0 for r in rs))]
            + [cell(_mean(rs, "cite_precision")), cell(_mean(rs, "cited_recall_id"))]
            + [sum(1 for r in rs if (r.get("scores") or {}).get("scope_violation"))]
        )
    return heading(
        "Policy conclusions",
        "Conclusion accuracy (`sleuth.eval.policy`): a yes/no question counts with the right polarity, no "
        "contradiction and the deciding clause's terms; an out-of-scope question (its deciding clause is outside "
        "the asker's scope) counts when the answer says the accessible documents do not settle it and cites "
        "nothing restricted; any other question when it mentions its terms. Evidence precision and recall are "
        "the cited documents against the question's `evidence`. A scope violation is a cited passage outside "
        "the asker's scope, a restricted document seen, or a restricted fact stated (must be 0).",
    ) + table(
        "strategy | n | conclusion | yes/no (n) | out of scope (n) | lookup (n) | must-mention | contradictions "
        "| evidence precision | evidence recall | scope violations",
        rows,
    )
