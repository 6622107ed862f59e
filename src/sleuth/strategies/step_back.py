"""Step-back prompting with RAG (Zheng et al., 2024, "Take a Step Back").

1. Retrieve for the original question (``k_original`` passages, route ``original``).
2. Abstraction: ask for a step-back question (the principle or background behind the question);
   unusable output falls back to a template of the same form.
3. Retrieve for the step-back question (``k_stepback``, route ``stepback``); both routes stay
   within the run's filters (``Strategy.retrieve``).
4. Merge and dedupe by (doc_id, chunk_id), keeping every route that found a passage in ``found_by``.
5. Reasoning: answer from both routes' passages, applying the principle (background, evidence, answer).
   An answer that says the documents do not answer it and cites nothing is an abstention; its short
   answer is then the one fixed sentence (``step_back_abstain``).

Repairs (:mod:`sleuth.strategies.repairs`, off with ``mode=paper``): ``rule_form`` (documents that
are rules get the rule-and-clause prompts, steps 2 and 5), ``rerank`` (step 4: the context is the
pool reranked), ``verdict`` and ``abstention_reread`` (step 5), all in :mod:`sleuth.strategies.repairs.step_back`,
and the finishing ones of every strategy.  The option ``documents`` sets the form.
"""

from __future__ import annotations

from sleuth.lang import CANNOT
from sleuth.search.base import Passage
from sleuth.strategies.base import RunState, Strategy
from sleuth.strategies.options import StepBackOptions
from sleuth.strategies.parsing import parse_step_back, parse_step_back_answer
from sleuth.strategies.prompts import load
from sleuth.strategies.repairs import fired
from sleuth.strategies.repairs.clauses import RULES, document_form
from sleuth.strategies.repairs.step_back import answerable, merge_routes, rerank, reread, settled_stands, verdict
from sleuth.strategies.text import cited_numbers, clean_short, format_passages


class StepBack(Strategy):
    """Options: :class:`~sleuth.strategies.options.StepBackOptions` (``k_original`` / ``k_stepback``
    per-route quotas, ``k_context`` passages shown to the model, ``rrf_k``, ``documents``)."""

    name = "step-back"
    needs_retriever = True
    Options = StepBackOptions
    opts: StepBackOptions

    def solve(self, question: str, st: RunState) -> None:
        abstract, context, form = self.evidence(question, st)
        self.reason(question, st, abstract, context, form)

    def rule_prompts(self, form: str) -> bool:
        """Whether steps 2 and 5 use the rule-and-clause prompts (repair ``rule_form``, or ``documents=rules``)."""
        return form == RULES and (self.opts.rule_form or self.opts.documents == RULES)

    def evidence(self, question: str, st: RunState) -> tuple[str, list[Passage], str]:
        """Steps 1-4: the step-back question, the context and the documents' form."""
        original = self.retrieve(st, question, k=self.opts.k_original, route="original")  # 1.
        form, n_rule_like = document_form(original, self.opts.documents)  # the repairs over rules read it
        rule_prompts = self.rule_prompts(form)
        if rule_prompts and self.opts.documents == "auto":
            fired(st, "rule_form", rule_like=f"{n_rule_like}/{len(original)}")
        suffix = "_rules" if rule_prompts else ""
        prompt = self.prompt(st, f"step_back_question{suffix}", question=question)
        c = self.ask(st, prompt, step="step back", max_tokens=64)  # 2.
        abstract = parse_step_back(c.text, question)
        fallback = abstract is None
        if abstract is None:
            abstract = self.prompt(st, f"step_back_fallback{suffix}", question=question)
        st.emit(
            "step_back",
            question=abstract,
            generated=c.text.strip()[:500],
            fallback=fallback,
            form=form,
            rule_like=f"{n_rule_like}/{len(original)}",
        )
        routes = {
            "original": original,
            "stepback": self.retrieve(st, abstract, k=self.opts.k_stepback, route="stepback"),
        }
        if self.opts.rerank:  # repair: the pool reranked, the first k_context shown
            context = rerank(st, self.opts, routes, [question, abstract], form == RULES)
        else:  # 4. both routes, deduplicated
            context = merge_routes(routes)
        if not context:
            st.emit("note", type="no_passages", message="neither route found a passage within the caller's scope")
        return abstract, context, form

    def reason(self, question: str, st: RunState, abstract: str, context: list[Passage], form: str) -> None:
        """Step 5: reason from the context in the documents' form."""
        over_rules = form == RULES and context and self.opts.verdict  # the verdict repair's ground
        if over_rules and st.q.yes_no and verdict(self, st, question, context, abstract):
            return  # repair: decided from the deciding clause
        settled = answerable(self, st, question, context, abstract) if over_rules else ""  # the reply's conclusion
        if settled is None:
            return  # repair: the accessible clauses do not settle the question; the answer declines
        template = "step_back_answer_rules" if self.rule_prompts(form) else "step_back_answer"
        docs = format_passages(context, budget=self.context_chars(st)) if context else "(no documents found)"
        prompt = self.prompt(st, template, question=question, step_back=abstract, documents=docs)
        ac = self.ask(st, prompt, step="answer", max_tokens=self.max_tokens)
        parsed = parse_step_back_answer(ac.text, load(template, st.result.lang).template, question)
        if settled:  # repair: when the form says nothing, the answerability reply stands
            parsed = settled_stands(st, parsed, settled)
        st.result.answer = (answer := parsed.answer).strip()
        reread_on = parsed.abstained and context and form != RULES and self.opts.abstention_reread
        if reread_on and reread(self, st, question, context, answer):  # repair: read again, RAG's way
            return
        if parsed.abstained:
            st.emit("note", type="abstained", message="the answer says the documents do not answer the question")
            st.result.short_answer = self.prompt(st, "step_back_abstain")
        else:
            st.result.short_answer = parsed.short if parsed.short is not None else clean_short(answer)
        if parsed.abstained or (CANNOT.search(answer) and not cited_numbers(answer)):
            st.result.citations = []  # an abstention ("cannot be answered") cites nothing
        else:
            st.cite(context, claim=answer, query=question, marks=cited_numbers(answer))  # grounded in finish
