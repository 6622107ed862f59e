"""Step-back's repairs (:mod:`sleuth.strategies.repairs`): ``rerank`` (the context chosen from both
routes by reciprocal-rank fusion), ``abstention_reread`` (an abstention over general documents read
again, RAG's way) and ``verdict`` (a yes/no question over rules decided from its
deciding clause, :mod:`~sleuth.strategies.step_back_verdict`).  ``rule_form`` is
:func:`~sleuth.strategies.step_back_form.document_form`."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING

from sleuth.lang import ABSTAIN, NOTHING, polarity
from sleuth.search.base import Passage
from sleuth.strategies.base import RunState, Strategy
from sleuth.strategies.repairs import fired
from sleuth.strategies.repairs.reading import read_passages
from sleuth.strategies.step_back_verdict import deciding, listing, parse_verdict, rank_clauses, referred, split_clauses
from sleuth.strategies.text import cited_numbers, content_tokens, strip_citations

if TYPE_CHECKING:
    from sleuth.strategies.options import StepBackOptions


def merge_routes(routes: dict[str, list[Passage]]) -> list[Passage]:
    """Union of the routes' passages, deduped by key, ``found_by`` merged (copies; inputs untouched)."""
    merged: dict[tuple[str, str], Passage] = {}
    for route, passages in routes.items():
        for p in passages:
            routes_of_p = list(dict.fromkeys([*p.found_by, route]))
            if p.key in merged:
                q = merged[p.key]
                q.found_by = list(dict.fromkeys([*q.found_by, *routes_of_p]))
                q.score = max(q.score, p.score)
            else:
                merged[p.key] = replace(p, found_by=routes_of_p, metadata=dict(p.metadata))
    return list(merged.values())


def _passage_tokens(p: Passage) -> set[str]:
    return content_tokens(f"{p.title} {p.section} {p.text}")


def rrf_rerank(
    pool: list[Passage], routes: dict[str, list[Passage]], questions: list[str], rrf_k: int = 60
) -> list[tuple[Passage, float]]:
    """Reciprocal-rank fusion of the route rankings and per-question overlap rankings."""
    rankings: list[list[tuple[str, str]]] = [[p.key for p in ps] for ps in routes.values()]
    pool_tokens = [_passage_tokens(p) for p in pool]  # once per passage, not once per question
    for q in questions:
        qt = content_tokens(q)
        overlaps = [len(qt & pt) / len(qt) if qt else 0.0 for pt in pool_tokens]
        order = sorted(range(len(pool)), key=lambda i: -overlaps[i])  # stable, like sorting the pool
        rankings.append([pool[i].key for i in order])
    score: dict[tuple[str, str], float] = {p.key: 0.0 for p in pool}
    for ranking in rankings:
        for rank, key in enumerate(ranking, 1):
            if key in score:
                score[key] += 1.0 / (rrf_k + rank)
    return sorted(((p, score[p.key]) for p in pool), key=lambda t: -t[1])


def rerank(
    st: RunState, opts: StepBackOptions, routes: dict[str, list[Passage]], questions: list[str], rules: bool
) -> list[Passage]:
    """Repair ``rerank``: the pool ranked by :func:`rrf_rerank`, the first ``k_context`` shown (as many
    as RAG shows; both quotas for rules), the best passage of each route always kept."""
    k_ctx = opts.context_size(rules)
    ranked = rrf_rerank(merge_routes(routes), routes, questions, opts.rrf_k)
    context = [p for p, _ in ranked[:k_ctx]]
    for route, ps in routes.items():  # the best of each route always stays
        if ps and not any(route in p.found_by for p in context):
            best = next(p for p, _ in ranked if route in p.found_by)
            context = [*context[: max(0, k_ctx - 1)], best] if context else [best]
    ctx_keys = {p.key for p in context}
    fired(
        st,
        "rerank",
        method="rrf(original, stepback, overlap(question), overlap(step-back question))",
        ranking=[
            {"id": p.id, "found_by": p.found_by, "score": round(s, 5), "in_context": p.key in ctx_keys}
            for p, s in ranked
        ],
    )
    return context


def verdict(strategy: Strategy, st: RunState, question: str, context: list[Passage], abstract: str = "") -> bool:
    """Repair ``verdict``: a yes/no question over rules, decided from the clause that decides it (see
    :mod:`~sleuth.strategies.step_back_verdict`); ``False`` (the rule-and-clause form answers)
    when the reply concludes neither yes nor no."""
    every = split_clauses(context)
    shown = rank_clauses(question, every, strategy.opts.verdict_clauses, also=abstract)
    prompt = strategy.prompt(st, "step_back_verdict", question=question, clauses=listing(shown))
    c = strategy.ask(st, prompt, step="verdict", max_tokens=120)
    basis, conclusion = parse_verdict(c.text)
    said = polarity(conclusion)
    chosen = deciding(basis, shown) if shown else None
    fired(st, "verdict")
    st.emit(
        "verdict",
        clauses=[f"{x.passage.id} {x.number}".strip() for x in shown],
        basis=basis[:300],
        conclusion=conclusion[:300],
        polarity={True: "yes", False: "no", None: ""}[said],
        deciding=f"{chosen.passage.id} {chosen.number}".strip() if chosen else "",
    )
    if said is None or chosen is None:
        st.emit("note", type="verdict_undecided", message="the verdict said neither yes nor no; the form answers")
        return False
    zh = st.result.lang == "zh"
    short = ("是" if said else "不是") if zh else ("Yes" if said else "No")
    # its [n] number the clauses listed, not the context: the answer cites the quoted clauses instead
    first = strip_citations(re.split(r"(?<=[。！？.!?])\s*|\n", conclusion.strip(), maxsplit=1)[0])
    if polarity(first) is None or len(first) > 200:
        first = short
    if not re.search(r"[。！？.!?]$", first):
        first += "。" if zh else "."
    number = {p.key: i for i, p in enumerate(context, 1)}
    quoted = [chosen, *referred(chosen, every)]  # "按第二条一般规定执行": 第二条 is quoted too
    lines = [f"{q.text} [{number[q.passage.key]}]" for q in quoted]
    answer = "\n".join([first, f"{'依据' if zh else 'Basis'}{'：' if zh else ': '}{lines[0]}", *lines[1:]])
    st.result.answer, st.result.short_answer = answer, short
    st.cite(context, claim=answer, query=question, marks=sorted({number[q.passage.key] for q in quoted}))
    return True


def reread(strategy: Strategy, st: RunState, question: str, context: list[Passage], written: str) -> bool:
    """Repair ``abstention_reread``: an answer over general documents that says they do not answer, with
    passages in the context, is read once more with RAG's prompt over the same context (step ``read``);
    the reading's answer stands when it finds one (``True``), else the abstention does.  Rules keep
    their abstention: there "insufficient evidence" is what the form asks for when the clause is missing."""
    body, read = read_passages(strategy, st, question, context)
    found = bool(read) and not NOTHING.match(read) and not ABSTAIN.search(read)
    fired(st, "abstention_reread", written=written[:300], read=read[:300], used=found)
    if not found:
        return False
    st.result.answer, st.result.short_answer = (body or read).strip(), read
    st.cite(context, claim=body or read, query=question, marks=cited_numbers(body))
    return True
