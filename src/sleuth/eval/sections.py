"""The sections of ``report.md`` after its header (:mod:`sleuth.eval.report` writes the header and the plots):
scores, cost, paired differences, citations, the strategies ahead of the rest, draft against final answer,
answer parts (RGB), policy conclusions (policy_zh), score by question kind, the compositionality gap, where
the answers go wrong and the failures. Each section is empty when the records have nothing for it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from sleuth.eval.conversations import conversation_section
from sleuth.eval.gap import compositionality_gap
from sleuth.eval.metrics import PRIMARY
from sleuth.eval.store import in_order, is_composed, primary_score
from sleuth.eval.summary import (
    BOOTSTRAP,
    COSTS,
    SCORES,
    Progress,
    Records,
    cell,
    ci_cell,
    citation_rows,
    heading,
    mean_or_nan,
    paired,
    paired_cells,
    paired_differences,
    per_strategy,
    score_mean,
    section,
    summarise,
    table,
)
from sleuth.strategies.registry import split_spec

AHEAD = 5  # questions beyond the common set before a group of strategies gets its own section


def _score_table(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    return table(
        "strategy | n | score [95% CI] | EM | F1 | cover-EM | acc | mention | recall (title) | recall (id) | failed",
        ([r["strategy"], r["n"], ci_cell(r["score"]), [cell(r[k]) for k in SCORES], r["failed"]] for r in rows),
    )


def _cost_table(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    return table(
        "strategy | LLM calls | searches | prompt tokens | processed prompt tokens | completion tokens | seconds "
        "| cost (USD) | calls served from cache",
        (
            [r["strategy"], [cell(r[k], nd) for k, nd in COSTS.items()], cell(r["cost_usd"], 5), r["cached_llm_calls"]]
            for r in rows
        ),
    )


def _paired_table(baseline: str, rows: Sequence[Mapping[str, Any]]) -> list[str]:
    return table(
        f"strategy | questions | difference [95% CI] | better than {baseline} | worse | same "
        f"| processed prompt tokens × {baseline} | seconds × {baseline}",
        ([r["strategy"], r["n"], paired_cells(r), _times(r["tokens_ratio"]), _times(r["seconds_ratio"])] for r in rows),
    )


CITATIONS = "strategy | questions | citing | precision | recall | recall when citing"


def _citation_cells(r: Mapping[str, Any]) -> list[Any]:
    return [r["strategy"], r["n"], r["citing"], [cell(r[k]) for k in ("precision", "recall", "recall_citing")]]


def _error(rec: Mapping[str, Any]) -> str:
    return str(rec.get("error") or "").replace("|", "\\|").replace("\n", " ")[:160]


def _gap_cells(g: Any) -> tuple[int, int, str]:
    return g.subs_all_right, g.composed_wrong, cell(g.gap)


def _times(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}×"


def _kind_table(records: Records, order: Sequence[str]) -> list[str]:
    """Primary score per question kind (bridge/comparison, n-hop, subject) when the data has kinds."""
    by = dict(per_strategy(records, order, lambda r: r.get("kind")))
    kinds = sorted({r["kind"] for rs in by.values() for r in rs})
    if len(kinds) < 2:
        return []

    def mean(s: str, k: str) -> str:
        scores = [primary_score(r) for r in by.get(s, ()) if r["kind"] == k]
        return f"{cell(mean_or_nan(scores))} ({len(scores)})" if scores else "–"

    return heading("Score by question kind") + table(
        ["strategy", *(f"{k} (n)" for k in kinds)], ([s, [mean(s, k) for k in kinds]] for s in order)
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
            for s, rs in per_strategy(records, order, lambda r: "part_rate" in (r.get("scores") or {}))
        ),
    )


def policy_section(records: Records, order: Sequence[str]) -> list[str]:
    """What decided the policy questions' conclusions (:mod:`sleuth.eval.policy` scores each record)."""
    rows = []
    for s, rs in per_strategy(records, order, lambda r: "conclusion" in (r.get("scores") or {})):
        flags = [sum(bool((r.get("scores") or {}).get(k)) for r in rs) for k in ("contradiction", "scope_violation")]
        rows.append([s, len(rs), cell(score_mean(rs, "conclusion")), cell(score_mean(rs, "terms")), flags])
    return section(
        "Policy conclusions",
        "Conclusion accuracy (`sleuth.eval.policy`, the primary score): a yes/no question counts with the right "
        "polarity, no contradiction and the deciding clause's terms; an out-of-scope question (its deciding clause "
        "is outside the asker's scope) counts when the answer says the accessible documents do not settle it and "
        "cites nothing restricted; any other question when it mentions its terms (*must-mention*). A scope "
        "violation is a cited passage outside the asker's scope, a restricted document seen, or a restricted fact "
        "stated (must be 0). The conclusion by kind of question is under *Score by question kind*, the cited "
        "documents against the question's `evidence` under *Citations*.",
        "strategy | n | conclusion | must-mention | contradictions | scope violations",
        rows,
    )


def _variant_rows(records: Records, order: Sequence[str]) -> list[dict[str, Any]]:
    """Each variant (``self-ask[mode=paper]``) paired against its own strategy, where the run holds both."""
    pairs = [(v, base) for v in order if "[" in v and (base := split_spec(v)[0]) in order]
    return [row for v, base in pairs for row in paired_differences(records, [base, v], base)[1]]


def _paired_section(records: Records, order: Sequence[str]) -> list[str]:
    baseline, rows = paired_differences(records, order)
    if not rows:
        return []
    vs = _variant_rows(records, order)
    note = f"Each variant against its own strategy (the same columns, that strategy in place of {baseline}):"
    variants = ["", note, "", *_paired_table("its strategy", vs)] if vs else []
    return (
        heading(
            f"Paired differences against {baseline}",
            f"Primary score minus {baseline}'s on the same questions: mean with a 95% paired bootstrap CI "
            f"({BOOTSTRAP} resamples), the questions each side won, and what the strategy spent on those "
            f"questions as a multiple of {baseline}'s (processed prompt tokens and seconds: what a gain cost). "
            "An interval that excludes 0 is a difference this sample supports; one that includes 0 is not."
            + (
                " **Fewer than 20 paired questions: the percentile bootstrap understates the uncertainty "
                "at this size; read these rows as description, not evidence.**"
                if min(r["n"] for r in rows) < 20
                else ""
            ),
        )
        + _paired_table(baseline, rows)
        + variants
    )


def _citation_section(records: Records, order: Sequence[str]) -> list[str]:
    """Citation precision and recall against the gold supporting passages (only when the data has them)."""
    return section(
        "Citations",
        "The documents each answer cites against the question's gold supporting passages, by id "
        "(HotpotQA's `supporting_facts` titles, MuSiQue's `is_supporting` paragraphs, policy_zh's `evidence`, "
        "StrategyQA's `facts`); two chunks of one document are one citation. Precision: the cited documents "
        "that are gold, of those cited; an answer that cites nothing has none, so the mean is over the answers "
        "that cite (*citing*). Recall: the gold passages cited, of all gold; citing nothing recalls 0 "
        "(*recall*), *recall when citing* leaves those out.",
        CITATIONS,
        map(_citation_cells, citation_rows(records, order)),
    )


def _leading_section(records: Records, prog: Progress, order: Sequence[str]) -> list[str]:
    """The strategies at least :data:`AHEAD` questions ahead of the common set (``sleuth eval --only``
    sittings; two or more, not all): the score, cost, paired and citation tables on the questions they
    have all finished."""
    if not all(map(is_composed, records)):
        return []  # a --gap run or conversations: their hops and modes make their own set
    done = {s: {str(r["qid"]) for r in rs} for s, rs in per_strategy(records, order)}
    floor = len(prog.complete) + AHEAD
    group = [s for s, qids in done.items() if len(qids) >= floor]
    if len(group) < 2 or len(group) == len(prog.strategies):
        return []
    shared = set.intersection(*(done[s] for s in group))
    if len(shared) < floor:
        return []
    behind = ", ".join(f"{s} has finished {len(done.get(s, ()))}" for s in prog.strategies if s not in group)
    mine = [r for r in records if r["strategy"] in group and str(r["qid"]) in shared]
    rows, (baseline, diffs), cites = summarise(mine, order), paired_differences(mine, group), citation_rows(mine, order)
    out = heading(
        f"Ahead of the rest: {len(group)} strategies on {len(shared)} questions",
        f"The tables above compare the {len(prog.complete)} questions every strategy has finished; {behind}. "
        f"These strategies have all finished {len(shared)}: their scores and cost on those questions"
        + (f", and each one's paired difference against {baseline} (95% paired bootstrap CI)." if diffs else "."),
    )
    out += [*_score_table(rows), "", "Their cost per question:", "", *_cost_table(rows)]
    if diffs:
        out += ["", f"Their paired differences against {baseline}:", "", *_paired_table(baseline, diffs)]
    if cites:
        out += ["", f"Their citations on those {len(shared)} questions (read as *Citations* above):", ""]
        out += table(CITATIONS, map(_citation_cells, cites))
    return out


def body(every: Records, records: Records, prog: Progress, order: Sequence[str]) -> list[str]:
    """Every section after the header, over the ``records`` of complete questions (``every``: all of them)."""
    rows = summarise(records, order)
    names = [r["strategy"] for r in rows]
    left_out = len(every) - len(records)
    lines = heading("Scores")
    if left_out:
        lines += [
            f"The tables compare the {len(prog.complete)} questions that every strategy has finished; "
            f"{left_out} record{'s' if left_out != 1 else ''} of questions still in progress "
            f"{'are' if left_out != 1 else 'is'} left out until their question is complete "
            "(they are in `results.jsonl`).",
            "",
        ]
    if not rows:
        lines.append("No results yet.")
    else:
        prim = PRIMARY.get(rows[0]["primary"], rows[0]["primary"])
        lines += [
            f"Primary score: **{prim}** (mean with 95% percentile-bootstrap CI, {BOOTSTRAP} resamples). "
            "Failed questions count as wrong.",
            "",
        ]
        lines += _score_table(rows)
        lines += parts_section(records, names)
        lines += policy_section(records, names)
        lines += _citation_section(records, names)
        lines += heading("Cost per question") + _cost_table(rows)
        cached = sum(r["cached_llm_calls"] for r in rows)
        if cached:
            lines += [
                "",
                f"{cached} LLM calls were served from Sleuth's response cache: their seconds are the cache's, not the "
                "model's, and their prompt tokens were not processed, so they are no timings.",
            ]
        reasons = ([r["strategy"], ", ".join(f"{k}: {v}" for k, v in r["reasons"].items())] for r in rows)
        lines += section("Finish reasons", "", ["strategy", "reasons"], reasons)
    lines += _paired_section(records, names)
    lines += conversation_section(records, names)
    lines += _leading_section(every, prog, order)
    lines += draft_section(records, names)
    lines += _kind_table(records, names)
    gaps = {m: compositionality_gap(records, m) for m in ("em", "cover_em")}
    lines += section(
        "Compositionality gap",
        "Among composed questions whose every sub-question (decomposition hops, earlier answers substituted) "
        "the strategy answered correctly, the share whose composed question it got wrong (Press et al.).",
        "strategy | correct by | questions | composed right | sub-questions right | all sub-questions right "
        "| of those, composed wrong | gap",
        (
            [s, m, g.questions, g.composed_right_overall, f"{g.hops_right}/{g.hops}", _gap_cells(g)]
            for s in in_order({s for g in gaps.values() for s in g}, order)
            for m, per in gaps.items()
            if (g := per.get(s)) is not None
        ),
    )
    lines += diagnosis_section(records, names)
    failures = sorted((r for r in every if r.get("status") == "failed"), key=lambda r: (r["strategy"], str(r["qid"])))
    lines += section(
        "Failures (first 20)",
        "",
        ["strategy", "question id", "reason", "error"],
        ([r["strategy"], r["qid"], r.get("reason", ""), _error(r)] for r in failures[:20]),
    )
    return lines
