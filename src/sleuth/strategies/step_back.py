"""Step-back prompting with RAG (Zheng et al., 2024, "Take a Step Back").

1. Retrieve for the original question (``k_original`` passages, route
   ``original``) and decide the documents' form from them
   (:func:`~sleuth.strategies.step_back_form.document_form`): ``rules`` when
   at least half are rule-like (clause numbering, normative wording), else
   ``general``; the option ``documents`` overrides it.
2. Abstraction: ask for a step-back question that keeps the topic: for rules,
   the applicable principle, scope or exceptions (never presupposing an
   exception); otherwise, as in the paper's knowledge tasks, the background or
   whole history of the same subject: a time question asks for the timeline,
   so a time span the model kept is dropped (:mod:`~sleuth.strategies.time_span`).
   Unusable output falls back to a template of the same form.
3. Retrieve for the step-back question (``k_stepback``, route ``stepback``);
   both routes stay within the run's filters (``Strategy.retrieve``).
4. Merge and dedupe by (doc_id, chunk_id), keeping every route that found a
   passage in ``found_by`` and its source/version/section.
5. Rerank with reciprocal-rank fusion over four rankings of the pool: the
   two retrieval lists and the pool scored by token overlap with each of
   the two questions; the best passage of each route is always kept, so
   the general rule cannot be pushed out by literal matches.  The context is
   ``k_context`` passages: by default as many as RAG shows (``k_original``),
   both quotas for rules (:meth:`StepBackOptions.context_size`).
6. Reasoning, in the documents' form: background (what the documents say
   about the step-back question), evidence, answer; or for rules, the general
   rule, the specific clause (or that there is none), the conclusion.  Only an
   answer that says the documents do not answer it and cites nothing is an
   abstention; its short answer is then the one fixed sentence.  A yes/no
   question over rules is first decided from its deciding clause
   (:mod:`~sleuth.strategies.step_back_verdict`, option ``verdict``): the
   answer is the conclusion, then that clause quoted with its citation.
"""

from __future__ import annotations

import re
from dataclasses import replace

from sleuth.search.base import Passage
from sleuth.strategies.answer_type import YESNO, answer_type
from sleuth.strategies.answers import cut_inside, extract_short, note_cut
from sleuth.strategies.base import RunState, Strategy
from sleuth.strategies.options import StepBackOptions
from sleuth.strategies.parsing import parse_step_back
from sleuth.strategies.prompts import load
from sleuth.strategies.reading import UNKNOWN, read_passages
from sleuth.strategies.self_ask_questions import find_comparison
from sleuth.strategies.settle import agrees, choose_option
from sleuth.strategies.step_back_form import ABSTAIN, NO_FIELD, RULES, document_form, parse_step_back_answer
from sleuth.strategies.step_back_verdict import (
    answer_if_unsettled,
    deciding,
    parse_verdict,
    polarity,
    rank_clauses,
    referred,
    split_clauses,
)
from sleuth.strategies.text import cited_numbers, clean_short, content_tokens, format_passages, strip_citations
from sleuth.strategies.time_span import drop_time_span, has_time_span

#: the fields of a reply that state what the documents say (either form: background and evidence, or
#: general rule and specific clause)
_FACT_FIELDS = ("background", "evidence")
_CANNOT = re.compile(r"cannot be answered|can't be answered|无法回答|不能回答", re.I)


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


def _overlap(p: Passage, question: str) -> float:
    qt = content_tokens(question)
    if not qt:
        return 0.0
    return len(qt & _passage_tokens(p)) / len(qt)


def rrf_rerank(
    pool: list[Passage],
    routes: dict[str, list[Passage]],
    questions: list[str],
    rrf_k: int = 60,
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


class StepBack(Strategy):
    """Options: :class:`~sleuth.strategies.options.StepBackOptions` (``k_original`` /
    ``k_stepback`` per-route quotas, ``k_context`` passages shown to the model, ``rrf_k``)."""

    name = "step-back"
    needs_retriever = True
    Options = StepBackOptions
    opts: StepBackOptions

    def solve(self, question: str, st: RunState) -> None:
        abstract, context, form = self.evidence(question, st)
        self.reason(question, st, abstract, context, form)

    def evidence(self, question: str, st: RunState) -> tuple[str, list[Passage], str]:
        """Steps 1-5: the step-back question, the reranked context and the documents' form."""
        k_orig, k_back = self.opts.k_original, self.opts.k_stepback
        original = self.retrieve(st, question, k=k_orig, route="original")
        form, n_rule_like = document_form(original, self.opts.documents)
        k_ctx = self.opts.context_size(form == RULES)
        suffix = "_rules" if form == RULES else ""
        c = self.ask(
            st, self.prompt(st, f"step_back_question{suffix}", question=question), step="step back", max_tokens=64
        )
        abstract = parse_step_back(c.text, question)
        fallback = abstract is None
        timeless = form != RULES and has_time_span(question)  # a time question steps back to the whole history
        if abstract is None:
            base = drop_time_span(question) if timeless else question
            abstract = self.prompt(st, f"step_back_fallback{suffix}", question=base)
        elif timeless and has_time_span(abstract) and len(drop_time_span(abstract)) >= 8:
            abstract = drop_time_span(abstract)
        st.emit(
            "step_back",
            question=abstract,
            generated=c.text.strip()[:500],
            fallback=fallback,
            form=form,
            rule_like=f"{n_rule_like}/{len(original)}",
        )

        routes = {"original": original, "stepback": self.retrieve(st, abstract, k=k_back, route="stepback")}
        pool = merge_routes(routes)
        ranked = rrf_rerank(pool, routes, [question, abstract], self.opts.rrf_k)
        context = [p for p, _ in ranked[:k_ctx]]
        for route, ps in routes.items():  # the best of each route always stays
            if ps and not any(route in p.found_by for p in context):
                best = next(p for p, _ in ranked if route in p.found_by)
                context = [*context[: max(0, k_ctx - 1)], best] if context else [best]
        ctx_keys = {p.key for p in context}
        st.emit(
            "rerank",
            method="rrf(original, stepback, overlap(question), overlap(step-back question))",
            ranking=[
                {"id": p.id, "found_by": p.found_by, "score": round(s, 5), "in_context": p.key in ctx_keys}
                for p, s in ranked
            ],
        )
        if not context:
            st.emit("note", type="no_passages", message="neither route found a passage within the caller's scope")
        return abstract, context, form

    def reason(self, question: str, st: RunState, abstract: str, context: list[Passage], form: str) -> None:
        """Step 6: reason from the context in the documents' form."""
        yes_no = form == RULES and context and self.opts.verdict and answer_type(question).kind == YESNO
        if yes_no and self._verdict(question, st, context):
            return
        gate = form == RULES and context and self.opts.verdict
        if gate and answer_if_unsettled(self, question, st, context, self.opts.verdict_clauses):
            return
        suffix = "_rules" if form == RULES else ""
        docs = format_passages(context, budget=self.context_chars(st)) if context else "(no documents found)"
        template = f"step_back_answer{suffix}"
        ac = self.ask(
            st,
            self.prompt(st, template, question=question, step_back=abstract, documents=docs),
            step="answer",
            max_tokens=self.max_tokens,
        )
        parsed = parse_step_back_answer(ac.text, load(template, st.result.lang).template, question)
        answer = parsed.answer
        st.result.answer = answer.strip()
        if parsed.abstained and context and form != RULES and self._read_again(question, st, context, answer):
            return
        if parsed.abstained:
            st.emit("note", type="abstained", message="the answer says the documents do not answer the question")
            st.result.short_answer = self.prompt(st, "step_back_abstain")
        else:
            st.result.short_answer = parsed.short if parsed.short is not None else clean_short(answer)
            if ac.finish_reason == "length" and parsed.short and cut_inside(ac.text, parsed.short):
                # the reply reached max_tokens inside its short answer ("Answer: Avram Noam Ch")
                note_cut(st, parsed.short)
                st.result.short_answer = extract_short(self, st, question, answer) or parsed.short
        if parsed.abstained or (_CANNOT.search(answer) and not cited_numbers(answer)):
            st.result.citations = []  # an abstention ("cannot be answered") cites nothing
        elif self.opts.settle_comparison and self._settled(question, st, context, parsed.fields):
            return
        else:
            st.cite(context, claim=answer, query=question, marks=cited_numbers(answer))  # grounded in finish

    def _verdict(self, question: str, st: RunState, context: list[Passage]) -> bool:
        """A yes/no question over rules, decided from the clause that decides it (see
        :mod:`~sleuth.strategies.step_back_verdict`); ``False`` (the rule-and-clause form answers)
        when the reply concludes neither yes nor no."""
        every = split_clauses(context)
        shown = rank_clauses(question, every, self.opts.verdict_clauses)
        listing = "\n".join(f"[{i}] ({c.passage.title}) {c.text}" for i, c in enumerate(shown, 1))
        c = self.ask(
            st, self.prompt(st, "step_back_verdict", question=question, clauses=listing), step="verdict", max_tokens=120
        )
        basis, conclusion = parse_verdict(c.text)
        said = polarity(conclusion)
        chosen = deciding(basis, shown) if shown else None
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

    def _settled(self, question: str, st: RunState, context: list[Passage], fields: dict[str, str]) -> bool:
        """Option ``settle_comparison``: a comparison's answer ("Are A and B both …?", "…, A or
        B?") is chosen once more, in one short call, from the facts the reply itself stated (its
        background and evidence, or general rule and specific clause) with the options
        (:func:`~sleuth.strategies.settle.choose_option`).  The small model states both sides
        right and then concludes wrong ("Social Code was formed in 1999, while Wavves was formed in
        2008" and then "Wavves" for which was formed first).  ``False`` (the reply's answer
        stands) for a question that is no comparison, a reply that states no fact, or a choice
        that names no option; when the choice differs from the reply's short answer, the reply
        is the ``draft`` and its citations are the ones the facts cite."""
        cmp = find_comparison(question)
        facts = [v for k in _FACT_FIELDS if (v := fields.get(k, "").strip()) and not NO_FIELD.match(v)]
        if cmp is None or not (cmp.yes_no or cmp.choice) or not facts:
            return False
        choice = choose_option(self, st, question, facts, cmp, both_orders=True)
        written = st.result.short_answer
        st.emit("note", type="option_settled", answer=written[:300], chosen=choice.chosen, reply=choice.reply[:200])
        if choice.chosen is None or agrees(written, choice.chosen, cmp):
            return False
        st.emit("draft", text=st.result.answer, short_answer=written, stage="answer")
        said = "\n".join(facts)
        st.result.answer = st.result.short_answer = choice.chosen
        st.cite(context, claim=said, query=question, marks=cited_numbers(said))
        return True

    def _read_again(self, question: str, st: RunState, context: list[Passage], written: str) -> bool:
        """A general-documents answer that says the documents do not answer, with passages in the
        context, is checked by a second reader: RAG's prompt over the same context (step ``read``).
        Its answer stands when it finds one (``abstention_reread``); ``False`` (the abstention
        stands) when it does not.  Rules keep their abstention: there "insufficient evidence" is
        the answer the form asks for when the clause is missing."""
        body, read = read_passages(self, st, question, context)
        found = bool(read) and not UNKNOWN.match(read) and not ABSTAIN.search(read)
        st.emit(
            "note",
            type="abstention_reread",
            message="the answer said the documents do not answer; read again with RAG's prompt",
            written=written[:300],
            read=read[:300],
            used=found,
        )
        if not found:
            return False
        st.result.answer = (body or read).strip()
        st.result.short_answer = read
        st.cite(context, claim=body or read, query=question, marks=cited_numbers(body))
        return True
