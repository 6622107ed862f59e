"""Conversations in ``sleuth eval``: a question asked as a follow-up, answered three ways.

A conversation item (a ``messages`` record: the last user message is the question, the turns before
it its history) runs as three tasks per strategy: ``rewrite`` (``<qid>``, the main task: the history
is sent, so the strategy first rewrites the question to stand alone, :mod:`sleuth.strategies.conversation`),
``last`` (``<qid>::last``: the last message alone, the baseline) and, when the item has one,
``standalone`` (``<qid>::standalone``: the question with the reference resolved, the upper bound).
The main tables score the ``rewrite`` records; :func:`conversation_section` compares the three.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from sleuth.eval.items import Item
from sleuth.eval.store import in_order, primary_score

REWRITE, LAST, STANDALONE = "rewrite", "last", "standalone"
MODES = (REWRITE, LAST, STANDALONE)
MODE_SEP = "::"
#: the means of each mode's scores shown beside its primary score
_MEANS = ("f1", "llm_calls", "prompt_tokens", "completion_tokens", "seconds")


def is_conversation(item: Item) -> bool:
    return bool(item.history)


def mode_units(item: Item) -> list[tuple[Item, dict[str, Any]]]:
    """The baseline tasks of a conversation item (``last``, and ``standalone`` when it has one);
    the item itself is the ``rewrite`` task."""
    units = [(LAST, item.question)] + ([(STANDALONE, item.standalone)] if item.standalone else [])
    return [
        (
            replace(item, id=f"{item.id}{MODE_SEP}{mode}", question=q, history=[]),
            {"kind": "turn", "mode": mode, "parent": item.id},
        )
        for mode, q in units
    ]


def _rewrite_cost(rec: Mapping[str, Any]) -> tuple[int, int]:
    """(calls, prompt + completion tokens) of the record's rewrite step."""
    trace = [ev.get("data") or {} for ev in (rec.get("result") or {}).get("trace") or [] if ev.get("kind") == "llm"]
    usages = [d.get("usage") or {} for d in trace if d.get("step") == "rewrite"]
    return len(usages), sum(int(u.get("prompt_tokens") or 0) + int(u.get("completion_tokens") or 0) for u in usages)


def conversation_rows(records: Sequence[Mapping[str, Any]], order: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Per strategy, over the conversations with a record in every mode the data has: each mode's primary
    score (bootstrap CI) and means, the rewrite paired against each other mode (``vs_<mode>``), the
    rewrite step's own calls and tokens, and the rewrite's share of the standalone score."""
    from sleuth.eval.summary import bootstrap_ci, mean_or_nan, paired, score_mean

    by: dict[str, dict[str, dict[str, Mapping[str, Any]]]] = defaultdict(lambda: defaultdict(dict))
    for r in records:
        task = r.get("task") or {}
        if task.get("mode") in MODES:
            by[r["strategy"]][str(task.get("parent") or r["qid"])][str(task["mode"])] = r
    rows = []
    for s in in_order(by, order):
        modes = [m for m in MODES if any(m in c for c in by[s].values())]
        convs = [c for _, c in sorted(by[s].items()) if all(m in c for m in modes)]
        if REWRITE not in modes or len(modes) < 2 or not convs:
            continue
        row: dict[str, Any] = {"strategy": s, "n": len(convs)}
        for m in modes:
            rs = [c[m] for c in convs]
            row[m] = {k: score_mean(rs, k, 0.0) for k in _MEANS} | {"score": bootstrap_ci(list(map(primary_score, rs)))}
            if m != REWRITE:
                row[f"vs_{m}"] = paired([primary_score(c[REWRITE]) - primary_score(c[m]) for c in convs])
        rewrites = [_rewrite_cost(c[REWRITE]) for c in convs]
        row["rewrite_calls"], row["rewrite_tokens"] = (mean_or_nan([x[i] for x in rewrites]) for i in (0, 1))
        if STANDALONE in modes:
            top = row[STANDALONE]["score"][0]
            row["share"] = row[REWRITE]["score"][0] / top if top else None
        rows.append(row)
    return rows


def conversation_section(records: Sequence[Mapping[str, Any]], order: Sequence[str] = ()) -> list[str]:
    """The report's "Follow-up questions" section (empty when the run has no conversations)."""
    from sleuth.eval.summary import BOOTSTRAP, COSTS, cell, ci_cell, diff_cell, section, table

    rows = conversation_rows(records, order)
    if not rows:
        return []

    def modes(r: Mapping[str, Any], show: Any) -> list[str]:
        return [show(r[m]) if m in r else "–" for m in MODES]

    def diff(r: Mapping[str, Any], m: str) -> str:
        d = r.get(f"vs_{m}")
        return "–" if d is None else f"{diff_cell(d)} ({d['wins']}/{d['losses']})"

    def row(r: Mapping[str, Any]) -> list[Any]:
        scores, f1 = modes(r, lambda x: ci_cell(x["score"])), " / ".join(modes(r, lambda x: cell(x["f1"])))
        return [r["strategy"], r["n"], scores, cell(r.get("share"), 2), diff(r, LAST), diff(r, STANDALONE), f1]

    def cost(r: Mapping[str, Any], m: str) -> list[Any]:
        rewrite = [cell(r["rewrite_calls"], 2), cell(r["rewrite_tokens"], 1)] if m == REWRITE else [0, 0]
        return [r["strategy"], m, [cell(r[m][k], COSTS[k]) for k in _MEANS[1:]], rewrite]

    out = section(
        "Follow-up questions",
        "Each conversation's last question answered three ways: **rewrite** (the history sent; the question is "
        "first rewritten to stand alone, one extra LLM call), **last** (the last message alone, the history "
        "dropped) and **standalone** (the question written with the reference resolved: the upper bound). "
        f"Primary score per mode (mean with 95% bootstrap CI, {BOOTSTRAP} resamples) on the conversations "
        "every mode finished; the differences are paired (rewrite minus the other mode, per conversation).",
        "strategy | conversations | rewrite [95% CI] | last | standalone | rewrite / standalone "
        "| rewrite − last [95% CI] (better/worse) | rewrite − standalone [95% CI] (better/worse) "
        "| F1: rewrite / last / standalone",
        map(row, rows),
    )
    return [
        *out,
        "",
        "Cost per conversation turn (means): the rewrite mode's figures include its rewrite call, "
        "shown apart in the last two columns.",
        "",
        *table(
            "strategy | mode | LLM calls | prompt tokens | completion tokens | seconds | of which rewrite calls "
            "| rewrite tokens",
            (cost(r, m) for r in rows for m in MODES if m in r),
        ),
    ]
