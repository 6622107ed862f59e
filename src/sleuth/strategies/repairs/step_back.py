"""Step-back's repairs (:mod:`sleuth.strategies.repairs`; docs/strategies.md, "Step-back", has the measurements):
``rerank`` (the context chosen from both routes by reciprocal-rank fusion), ``abstention_reread`` (an abstention over
general documents read again, RAG's way) and, over rules (``rule_form``, :mod:`~sleuth.strategies.repairs.clauses`),
``verdict`` and its answerability check.

A yes/no question whose documents are rules is decided in a small step, since the 1.5B model fills the rule-and-clause
form and then concludes against it ("专门条款：无 / 结论：是"): one short call over the best ``verdict_clauses`` clauses
names the deciding clause and answers 是 or 不是 (``step_back_verdict``); Sleuth writes the conclusion with the clause
quoted and cited.  Any other question over rules is first asked whether the clauses settle it (``step_back_answerable``,
:func:`settles`); when they do not, the answer is the fixed ``step_back_abstain``, citing nothing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from sleuth.lang import ABSTAIN, NOTHING, polarity, unquoted
from sleuth.search.base import Passage
from sleuth.strategies.base import RunState, Strategy
from sleuth.strategies.parsing import NO_FIELD, StepBackAnswer
from sleuth.strategies.repairs import fired
from sleuth.strategies.repairs.clauses import NUM, Clause, deciding, grams, rank_clauses, referred, split_clauses
from sleuth.strategies.repairs.reading import read_passages
from sleuth.strategies.text import cited_numbers, clean_short, content_tokens, strip_citations

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


def rrf_rerank(
    pool: list[Passage], routes: dict[str, list[Passage]], questions: list[str], rrf_k: int = 60
) -> list[tuple[Passage, float]]:
    """Reciprocal-rank fusion of the route rankings and per-question overlap rankings."""
    rankings: list[list[tuple[str, str]]] = [[p.key for p in ps] for ps in routes.values()]
    pool_tokens = [content_tokens(f"{p.title} {p.section} {p.text}") for p in pool]  # once each, not per question
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


_LABEL = re.compile(r"(?:^|\n)[ \t>*#-]*\**(依据|根据|basis|conclusion|结论|答案|answer)\**[ \t]*[:：][ \t]*", re.I)


def parse_verdict(text: str) -> tuple[str, str]:
    """(basis, conclusion) from the reply's labelled lines; a reply without a conclusion label is all conclusion."""
    marks = list(_LABEL.finditer(text or ""))
    fields: dict[str, str] = {}
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        key = "basis" if m.group(1).lower() in ("依据", "根据", "basis") else "conclusion"
        fields[key] = text[m.end() : end].strip()
    if "conclusion" not in fields and not marks:
        fields["conclusion"] = (text or "").strip()
    return fields.get("basis", ""), fields.get("conclusion", "")


def _ask(strategy: Strategy, st: RunState, step: str, question: str, shown: Sequence[Clause]) -> tuple[str, str]:
    """One short call over the ``shown`` clauses ("[1] (title) 第十五条 …", one a line): (basis, conclusion)."""
    listing = "\n".join(f"[{i}] ({c.passage.title}) {c.text}" for i, c in enumerate(shown, 1))
    prompt = strategy.prompt(st, f"step_back_{step}", question=question, clauses=listing)
    return parse_verdict(strategy.ask(st, prompt, step=step, max_tokens=120).text)


def verdict(strategy: Strategy, st: RunState, question: str, context: list[Passage], abstract: str = "") -> bool:
    """Repair ``verdict``: a yes/no question over rules, decided from the clause that decides it; ``False`` (the
    rule-and-clause form answers) when the reply concludes neither yes nor no."""
    every = split_clauses(context)
    shown = rank_clauses(question, every, strategy.opts.verdict_clauses, also=abstract)
    basis, conclusion = _ask(strategy, st, "verdict", question, shown)
    said = polarity(conclusion)
    chosen = deciding(basis, shown) if shown else None
    fired(st, "verdict")
    st.emit(
        "verdict",
        clauses=[x.name for x in shown],
        basis=basis[:300],
        conclusion=conclusion[:300],
        polarity={True: "yes", False: "no", None: ""}[said],
        deciding=chosen.name if chosen else "",
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


#: a reply that says the clauses have no rule on what is asked ("无", "现有材料没有规定", "not stated")
_UNSETTLED = re.compile(
    r"^(?:无\W*$|无相关|没有(?:相关)?(?:规定|写明|提到|说明|涉及)|现有(?:可查阅的)?材料|无法|不能确定|未(?:规定|写明|提及)|不清楚|"
    r"none\b|not (?:stated|specified|settled|covered)|no (?:clause|rule)|cannot|unknown)",
    re.I,
)
#: a clause's or a listing's own number ("第十五条", "第2条", "[2]", "Article 7"): no value of the answer
_REF = re.compile(rf"第{NUM}条|\[\d+\]|(?:Article|Section|§)\s*[\d.]+", re.I)
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def settles(conclusion: str, question: str, shown: Sequence[Clause]) -> tuple[bool, str]:
    """Whether the reply's ``conclusion`` settles the question from the ``shown`` clauses, and why not: ``said``,
    ``invented`` (a number the clauses and question lack), ``restated`` or ``unsupported`` (less than half of its new
    character bigrams and numbers are in the clauses); docs/strategies.md has the tuning figures."""
    said = unquoted(conclusion)
    if not said or _UNSETTLED.match(said):
        return False, "said"
    said = _REF.sub(" ", said)
    clauses = " ".join(_REF.sub(" ", c.text) for c in shown)
    known = set(_NUMBER.findall(clauses)) | set(_NUMBER.findall(question))
    if any(n not in known for n in _NUMBER.findall(said)):
        return False, "invented"
    new = {g for g in grams(said) - grams(question) if len(g) > 1 or g.isdigit()}  # "天" alone says nothing
    if not new:
        return False, "restated"
    if 2 * len(new & grams(clauses)) < len(new):
        return False, "unsupported"
    return True, ""


def answerable(strategy: Strategy, st: RunState, question: str, context: list[Passage], abstract: str) -> str | None:
    """The ``verdict`` repair's check for any other question over rules: are the best clauses of ``context`` enough
    (step ``answerable``, :func:`settles`)?  When they are not, the answer is ``step_back_abstain``, citing nothing,
    and ``None`` is returned; when they are, the reply's conclusion.  A question with a yes/no sentence
    ("…需要提前申请吗？要提前几天？") is not asked (``""``): its reply would read as a restatement."""
    if st.q.asks_yes_no:
        return ""
    shown = rank_clauses(question, split_clauses(context), strategy.opts.verdict_clauses, also=abstract)
    if not shown:
        return ""
    basis, conclusion = _ask(strategy, st, "answerable", question, shown)
    ok, why = settles(conclusion, question, shown)
    st.emit(
        "answerable",
        clauses=[x.name for x in shown],
        basis=basis[:300],
        conclusion=conclusion[:300],
        settled=ok,
        why=why,
    )
    if ok:
        return conclusion
    st.emit("note", type="abstained", message="the accessible clauses do not state what the question asks")
    st.result.answer = st.result.short_answer = strategy.prompt(st, "step_back_abstain")
    st.result.citations = []
    fired(st, "verdict", settled=False)  # the accessible clauses do not settle it
    return None


def _says_nothing(parsed: StepBackAnswer) -> bool:
    """Whether every field of the form is empty, "无" or only citation marks ("一般规定：无 / 专门条款：[1]")."""
    values = [strip_citations(v).strip(" \t\n。.：:") for v in parsed.fields.values()]
    return not any(v and not NO_FIELD.match(v) for v in values)


def settled_stands(st: RunState, parsed: StepBackAnswer, settled: str) -> StepBackAnswer:
    """Repair ``verdict`` over a question the clauses settle: a form that says nothing (:func:`_says_nothing`) gives
    way to the answerability reply's conclusion (``settled``)."""
    if not _says_nothing(parsed):
        return parsed
    fired(st, "verdict", form=parsed.answer[:300], used=settled[:300])
    return replace(parsed, answer=settled, short=clean_short(settled), abstained=False)


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
