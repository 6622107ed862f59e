"""The strategies ahead of the rest: a report section for runs whose strategies have finished
different numbers of questions.

A run's tables compare the questions *every* strategy has finished (:func:`sleuth.eval.summary.progress`).
When sittings run only some strategies (``sleuth eval --only``), those strategies get far ahead, and
the common set says nothing about how far they got.  This section shows them on the questions they
have all finished: their scores, their cost, the paired differences against the baseline when
it is among them, and their citations where the data has gold supporting passages.  A question
still in flight (a strategy or two ahead by one question) does not make a group: it takes
:data:`AHEAD` questions beyond the common set.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from sleuth.eval.store import in_order, is_composed
from sleuth.eval.summary import Progress, cell, citation_rows, citation_table, paired_differences, summarise

AHEAD = 5  # questions beyond the common set before a group of strategies gets its own section


def answered(records: Sequence[Mapping[str, Any]]) -> dict[str, set[str]] | None:
    """The question ids each strategy has answered; ``None`` in a ``--gap`` run (whose hops make
    their own set)."""
    out: dict[str, set[str]] = defaultdict(set)
    for r in records:
        if not is_composed(r):
            return None
        out[str(r["strategy"])].add(str(r["qid"]))
    return out


def leading_group(
    done: Mapping[str, set[str]], prog: Progress, order: Sequence[str]
) -> tuple[list[str], frozenset[str]]:
    """The strategies at least :data:`AHEAD` questions ahead of the common set and the questions they
    have all finished (``done``: :func:`answered`); ``([], frozenset())`` when fewer than two
    strategies are that far ahead or when they share no more questions than that."""
    floor = len(prog.complete) + AHEAD
    group = [s for s in in_order(done, order) if len(done[s]) >= floor]
    if len(group) < 2 or len(group) == len(prog.strategies):
        return [], frozenset()
    shared = frozenset(set.intersection(*(done[s] for s in group)))
    if len(shared) < floor:
        return [], frozenset()
    return group, shared


def leading_section(records: Sequence[Mapping[str, Any]], prog: Progress, order: Sequence[str]) -> list[str]:
    """The section's Markdown lines (none when no group is ahead; see :func:`leading_group`)."""
    done = answered(records)
    if done is None:
        return []
    group, shared = leading_group(done, prog, order)
    if not group:
        return []
    behind = {s: len(done.get(s, ())) for s in prog.strategies if s not in group}
    mine = [r for r in records if r["strategy"] in group and str(r["qid"]) in shared]
    rows = summarise(mine, order)
    baseline, diffs = paired_differences(mine, group)
    out = [
        "",
        f"## Ahead of the rest: {len(group)} strategies on {len(shared)} questions",
        "",
        f"The tables above compare the {len(prog.complete)} questions every strategy has finished; "
        + ", ".join(f"{s} has finished {n}" for s, n in behind.items())
        + f". These strategies have all finished {len(shared)}: their scores and cost on those questions"
        + (f", and each one's paired difference against {baseline} (95% paired bootstrap CI)." if diffs else "."),
        "",
        f"| strategy | n | score [95% CI] | EM | F1 | processed prompt tokens | seconds | difference against {baseline} "
        "[95% CI] | better | worse | same |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    by_name = {d["strategy"]: d for d in diffs}
    for r in rows:
        m, lo, hi = r["score"]
        d = by_name.get(r["strategy"])
        paired = (
            f"{d['diff'][0]:+.3f} [{d['diff'][1]:+.3f}, {d['diff'][2]:+.3f}] | {d['wins']} | {d['losses']} | {d['ties']}"
            if d
            else "– | – | – | –"
        )
        out.append(
            f"| {r['strategy']} | {r['n']} | {cell(m)} [{cell(lo)}, {cell(hi)}] | {cell(r['em'])} | {cell(r['f1'])} | "
            f"{cell(r['processed_prompt_tokens'], 1)} | {cell(r['seconds'], 2)} | {paired} |"
        )
    cites = citation_rows(mine, order)
    if cites:
        out += ["", f"Their citations on those {len(shared)} questions (read as *Citations* above):", ""]
        out += citation_table(cites)
    return out
