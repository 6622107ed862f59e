"""Conversations in ``sleuth eval``: a question asked as a follow-up, answered three ways.

A conversation item (a ``messages`` record: the last user message is the question, the turns
before it its history) is run as three tasks per strategy:

* ``rewrite`` (the record ``<qid>``, a main task): the history is sent, so the strategy first
  rewrites the question to stand alone (:mod:`sleuth.strategies.conversation`), as every
  surface does;
* ``last`` (``<qid>::last``): the last message alone, the history dropped, as Sleuth did before
  it read conversations (the baseline);
* ``standalone`` (``<qid>::standalone``): the item's ``standalone`` question, written with the
  reference resolved (the upper bound), when the item has one.

The main tables score the ``rewrite`` records; :func:`conversation_section` compares the three
on the conversations where all ran: each mode's mean primary score and F1, the rewrite's share
of the standalone score, paired bootstrap differences, and the cost of each mode (the rewrite's
own call counted apart).
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
    units: list[tuple[Item, dict[str, Any]]] = [
        (
            replace(item, id=f"{item.id}{MODE_SEP}{LAST}", history=[]),
            {"kind": "turn", "mode": LAST, "parent": item.id},
        )
    ]
    if item.standalone:
        units.append(
            (
                replace(item, id=f"{item.id}{MODE_SEP}{STANDALONE}", question=item.standalone, history=[]),
                {"kind": "turn", "mode": STANDALONE, "parent": item.id},
            )
        )
    return units


def mode_of(rec: Mapping[str, Any]) -> str | None:
    """A record's conversation mode (None: not a conversation task)."""
    task = rec.get("task") or {}
    mode = task.get("mode")
    return str(mode) if mode in MODES else None


def _rewrite_cost(rec: Mapping[str, Any]) -> tuple[int, int, int]:
    """(calls, prompt tokens, completion tokens) of the record's rewrite step."""
    calls = pt = ct = 0
    for ev in (rec.get("result") or {}).get("trace") or []:
        data = ev.get("data") or {}
        if ev.get("kind") == "llm" and data.get("step") == "rewrite":
            usage = data.get("usage") or {}
            calls += 1
            pt += int(usage.get("prompt_tokens") or 0)
            ct += int(usage.get("completion_tokens") or 0)
    return calls, pt, ct


def conversation_rows(records: Sequence[Mapping[str, Any]], order: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Per strategy, over the conversations with a record in every mode the data has."""
    from sleuth.eval.summary import bootstrap_ci, mean_or_nan, paired

    by: dict[str, dict[str, dict[str, Mapping[str, Any]]]] = defaultdict(lambda: defaultdict(dict))
    for r in records:
        mode = mode_of(r)
        if mode is None:
            continue
        qid = str((r.get("task") or {}).get("parent") or r["qid"])
        by[r["strategy"]][qid][mode] = r
    rows = []
    for s in in_order(by, order):
        convs = by[s]
        modes = [m for m in MODES if any(m in c for c in convs.values())]
        if REWRITE not in modes or len(modes) < 2:
            continue
        qids = sorted(q for q, c in convs.items() if all(m in c for m in modes))
        if not qids:
            continue
        row: dict[str, Any] = {"strategy": s, "n": len(qids), "modes": modes}
        for m in modes:
            rs = [convs[q][m] for q in qids]
            sc = [r.get("scores") or {} for r in rs]
            row[m] = {k: mean_or_nan([float(x.get(k) or 0.0) for x in sc]) for k in _MEANS}
            row[m]["score"] = bootstrap_ci([primary_score(r) for r in rs])
        rw = [_rewrite_cost(convs[q][REWRITE]) for q in qids]
        row["rewrite_calls"] = mean_or_nan([c for c, _, _ in rw])
        row["rewrite_tokens"] = mean_or_nan([p + c for _, p, c in rw])
        for m in modes:
            if m == REWRITE:
                continue
            row[f"vs_{m}"] = paired([primary_score(convs[q][REWRITE]) - primary_score(convs[q][m]) for q in qids])
        if STANDALONE in modes:
            top = row[STANDALONE]["score"][0]
            row["share"] = row[REWRITE]["score"][0] / top if top else None
        rows.append(row)
    return rows


def conversation_section(records: Sequence[Mapping[str, Any]], order: Sequence[str] = ()) -> list[str]:
    """The report's "Follow-up questions" section (empty when the run has no conversations)."""
    from sleuth.eval.summary import BOOTSTRAP, cell, ci_cell, heading, table

    rows = conversation_rows(records, order)
    if not rows:
        return []

    def scores(r: Mapping[str, Any], key: str, show: Any) -> list[str]:
        return [show(r[m][key]) if m in r else "–" for m in MODES]

    def diff(r: Mapping[str, Any], m: str) -> str:
        d = r.get(f"vs_{m}")
        return "–" if d is None else "{:+.3f} [{:+.3f}, {:+.3f}]".format(*d["diff"]) + f" ({d['wins']}/{d['losses']})"

    def row(r: Mapping[str, Any]) -> list[Any]:
        share, f1 = cell(r.get("share"), 2), " / ".join(scores(r, "f1", cell))
        return [r["strategy"], r["n"], scores(r, "score", ci_cell), share, diff(r, LAST), diff(r, STANDALONE), f1]

    def cost(r: Mapping[str, Any], m: str) -> list[Any]:
        means = [cell(r[m][k], nd) for k, nd in (("llm_calls", 2), ("prompt_tokens", 1), ("completion_tokens", 1))]
        rewrite = [cell(r["rewrite_calls"], 2), cell(r["rewrite_tokens"], 1)] if m == REWRITE else [0, 0]
        return [r["strategy"], m, means, cell(r[m]["seconds"], 2), rewrite]

    out = heading(
        "Follow-up questions",
        "Each conversation's last question answered three ways: **rewrite** (the history sent; the question is "
        "first rewritten to stand alone, one extra LLM call), **last** (the last message alone, the history "
        "dropped) and **standalone** (the question written with the reference resolved: the upper bound). "
        f"Primary score per mode (mean with 95% bootstrap CI, {BOOTSTRAP} resamples) on the conversations "
        "every mode finished; the differences are paired (rewrite minus the other mode, per conversation).",
    ) + table(
        "strategy | conversations | rewrite [95% CI] | last | standalone | rewrite / standalone "
        "| rewrite − last [95% CI] (better/worse) | rewrite − standalone [95% CI] (better/worse) "
        "| F1: rewrite / last / standalone",
        map(row, rows),
    )
    out += [
        "",
        "Cost per conversation turn (means): the rewrite mode's figures include its rewrite call, "
        "shown apart in the last two columns.",
        "",
    ]
    return out + table(
        "strategy | mode | LLM calls | prompt tokens | completion tokens | seconds | of which rewrite calls "
        "| rewrite tokens",
        (cost(r, m) for r in rows for m in MODES if m in r),
    )
