"""Self-Ask (Press et al., 2023, "Measuring and Narrowing the Compositionality Gap").

The algorithm, as in the paper's ``self-ask_plus_search_engine`` loop:

1. prompt = few-shot examples + ``Question: Q`` + ``Are follow up questions needed here:``
2. complete the prompt, stopping at ``Intermediate answer:``
3. if the completion asks ``Follow up: F``: answer F by search (the passages'
   answer, read out of the top ``extract_k`` passages by a short separate
   extraction call; the passages that hold the answer become citations) or, when search
   finds nothing / there is no retriever, by the model itself (marked
   ``source="model"`` in the trace); append
   ``Intermediate answer: A`` and go to 2
4. if it says ``So the final answer is: X``: done
5. at the step limit (or when the model stops making progress) append
   ``So the final answer is:`` and let the model complete that one line.
6. (Sleuth's addition, option ``final_read``; ``false`` is the paper's method) search the
   question itself and answer once more from those passages and the follow-ups'
   (:meth:`~sleuth.strategies.self_ask_final.FinalAnswer._read_final`); the scaffold's
   answer is kept as the run's draft.

The prompt is append-only: every call extends the previous prompt, so the
server's prompt cache reuses everything already evaluated.

Small-model failure modes handled here: variant spellings of the scaffold
(see :func:`~sleuth.strategies.parsing.parse_self_ask`), the model answering
its own follow-up (its answer is dropped and the follow-up is searched), and
follow-ups that restate the question (token overlap >= ``restate_threshold``)
or repeat a previous follow-up (:func:`~sleuth.strategies.self_ask_questions.asks_nothing_new`:
the same kind of fact and no new word): a restated question is searched once; a repeat gets
the earlier answer plus a request for a different sub-question, and a second
repeat moves straight to the final answer.  Every path consumes a step, so
the loop always ends.

Comparisons (:mod:`~sleuth.strategies.self_ask_questions`): a follow-up that skips the
decomposition is replaced by one follow-up per option, and the final answer is an option
(or yes/no).  A question of several parts ("…分别是…") whose first follow-up restates it gets
one follow-up per part instead (the model lists them), and its final answer names every part found.  A final answer after follow-ups that all restated the question gets, once,
one more follow-up first.  docs/strategies.md has the traces behind each guard.
"""

from __future__ import annotations

import re
from typing import Any

from sleuth.search.base import SearchError
from sleuth.strategies.answer_type import LIST, answer_type
from sleuth.strategies.base import RunState
from sleuth.strategies.options import SelfAskOptions
from sleuth.strategies.parse_self_ask import ANSWER_STOPS, SCAFFOLD, STOPS
from sleuth.strategies.parsing import SelfAskStep, parse_final_line, parse_self_ask
from sleuth.strategies.reading import UNKNOWN
from sleuth.strategies.result import STEP_LIMIT
from sleuth.strategies.self_ask_final import FinalAnswer
from sleuth.strategies.self_ask_questions import (
    asks_nothing_new,
    find_comparison,
    first_question,
    named,
    names,
    off_attribute,
    parse_parts,
)
from sleuth.strategies.self_ask_scaffold import Scaffold
from sleuth.strategies.text import clean_short, format_passages, most_similar, sanitize, similarity


def _one_line(text: str, max_chars: int = 300) -> str:
    """First meaningful line of a model answer, made inert for the scaffold."""
    for ln in (text or "").splitlines():
        ln = re.sub(r"^\s*(?:answer|intermediate\s+answer|答案|中间答案)\s*[:：]\s*", "", ln.strip(), flags=re.I)
        if ln:
            return sanitize(ln, max_chars)
    return ""


class SelfAsk(FinalAnswer):
    """Self-Ask with search, completion mode, append-only prompt.

    Options: :class:`~sleuth.strategies.options.SelfAskOptions` (``restate_threshold``,
    ``repeat_threshold``, ``extract_k``, ``extract_max_tokens``, ``max_prompt_chars``).
    ``max_steps`` bounds the number of scaffold completions (follow-ups).
    """

    name = "self-ask"
    needs_retriever = True  # also works without one: the model then answers its own follow-ups
    Options = SelfAskOptions
    opts: SelfAskOptions

    def solve(self, question: str, st: RunState) -> None:
        run = self._start(question, st)  # 1. few-shot examples + the question
        while self._room_left(run):
            follow_up = self._next_followup(run)  # 2. complete up to "Intermediate answer:"
            if follow_up is None:  # 4. "So the final answer is: X" (or no scaffold at all)
                break
            if run.cmp and off_attribute(follow_up, run.cmp, len(run.asked)):
                if not self._ask_per_option(run, follow_up):  # 3'. one follow-up per option instead
                    break  # every option has been asked about: on to the final answer
                continue
            if self._restates_parts(run, follow_up) and self._ask_per_part(run, follow_up):
                continue  # 3''. one follow-up per part asked instead
            self._open_followup(run)
            repeat = self._repeat_of(run, follow_up)
            if repeat is None:
                self._answer_followup(run, follow_up)  # 3. answer F by search (or the model), go to 2
            elif not self._answer_repeat(run, follow_up, *repeat):
                break  # a second repeat: nothing new will be asked
        if run.final is None:
            self._final_answer(run)  # 5. "So the final answer is:" completed by the model
        self._conclude(run)

    # -- 1. the prompt -------------------------------------------------------------------
    def _start(self, question: str, st: RunState) -> Scaffold:
        lang = st.result.lang
        words = SCAFFOLD.get(lang, SCAFFOLD["en"])
        sep = " " if lang == "en" else ""
        threshold = self.opts.restate_threshold
        repeat_at = self.opts.repeat_threshold
        max_chars = self.opts.max_prompt_chars
        prompt = self.prompt(st, "self_ask", question=question)
        run = Scaffold(st, question, prompt, len(prompt), words, sep, threshold, repeat_at, max_chars)
        run.cmp = find_comparison(question)
        run.multi = run.cmp is None and answer_type(question).detail == LIST
        if run.cmp:
            st.emit(
                "note", type="comparison", options=list(run.cmp.options), choice=run.cmp.choice, yes_no=run.cmp.yes_no
            )
        return run

    def _room_left(self, run: Scaffold) -> bool:
        """Steps and prompt space are left; otherwise the final answer is forced (``step_limit``)."""
        if run.steps >= self.max_steps:
            run.finish = STEP_LIMIT
            run.st.emit("note", type="step_limit", message=f"{run.steps} steps used; forcing the final answer")
            return False
        if len(run.prompt) > run.max_chars:
            run.finish = STEP_LIMIT
            run.st.emit(
                "note",
                type="context_full",
                message=f"prompt reached {len(run.prompt)} characters; forcing the final answer",
            )
            return False
        return True

    # -- 2. the next follow-up (or the final answer) ----------------------------------------
    def _next_followup(self, run: Scaffold) -> str | None:
        """Complete the scaffold up to the next "Intermediate answer:"; the follow-up it asks.

        ``None`` when it asks none: then it either gave the final answer (``run.final``)
        or has no scaffold at all (a ``no_scaffold`` note; the final answer is forced).
        The follow-up line is not yet in the prompt: :meth:`_open_followup` appends it.
        """
        st = run.st
        run.steps += 1
        c = self.generate(st, run.prompt, step=f"scaffold {run.steps}", stop=STOPS)
        parsed = parse_self_ask(c.text)
        if parsed.final is not None and parsed.follow_up is None and self._undecomposed(run):
            parsed = self._decompose_more(run, parsed.final) or parsed
        if parsed.follow_up is None:
            run.prompt += parsed.consumed
            if parsed.final is not None:
                run.final = parsed.final
            else:
                st.emit(
                    "note",
                    type="no_scaffold",
                    message="completion has neither a follow-up nor a final answer; forcing the final answer",
                    completion=c.text[:500],
                )
            return None
        run.pending = parsed.consumed
        if parsed.self_answer:
            st.emit(
                "note",
                type="self_answered",
                follow_up=parsed.follow_up,
                dropped=parsed.self_answer[:300],
                message="the model answered its own follow-up; its answer was dropped and the follow-up searched",
            )
        return parsed.follow_up

    def _undecomposed(self, run: Scaffold) -> bool:
        """The model gives its final answer, but every follow-up so far restated the question:
        nothing was decomposed (the run so far is one search for the whole question)."""
        done = run.nudged or run.cmp is not None or run.multi or run.steps >= self.max_steps
        return not done and bool(run.asked) and run.restated == len(run.asked)

    def _decompose_more(self, run: Scaffold, final: str) -> SelfAskStep | None:
        """Once per run, instead of a final answer that decomposed nothing, ask the model for
        one more follow-up (the scaffold continued at ``Follow up:``, built on the answer it
        has); ``None`` when it gives none (its final answer then stands)."""
        st = run.st
        run.nudged = True
        label = run.words["follow"]
        c = self.generate(st, run.prompt + label, step=f"scaffold {run.steps} follow up", stop=STOPS)
        parsed = parse_self_ask(label + c.text)
        found = parsed.follow_up is not None
        st.emit(
            "note",
            type="decompose" if found else "decompose_declined",
            dropped_final=final[:300] if found else None,
            message="every follow-up restated the question; asked for one more follow-up before the final answer",
        )
        return parsed if found else None

    @staticmethod
    def _open_followup(run: Scaffold) -> None:
        """Append the model's follow-up line and ``Intermediate answer:`` to the scaffold."""
        run.prompt += run.pending.rstrip() + "\n" + run.words["intermediate"]
        run.pending = ""

    # -- 3. the intermediate answer ------------------------------------------------------
    def _answer_followup(self, run: Scaffold, follow_up: str, **extra: Any) -> None:
        """Answer a new follow-up by search, else by the model; append ``Intermediate answer: A``."""
        st = run.st
        flags = self._restatement(run, follow_up)
        st.emit("follow_up", question=follow_up, step=run.steps, **flags, **extra)
        run.restated += bool(flags)
        if run.cmp:
            run.covered.update(named(follow_up, run.cmp.options))
        answer, why = self._answer_by_search(run, follow_up)
        if answer is None:
            answer = self._answer_by_model(run, follow_up, why)
        run.prompt += run.sep + answer + "\n"
        run.asked.append((follow_up, answer))
        if flags:
            st.emit("note", type="restated_question", message="follow-up restates the question; searched it once")

    def _answer_by_search(self, run: Scaffold, follow_up: str) -> tuple[str | None, str]:
        """The passages' answer (the claim its citations are grounded in), or ``None`` and why not."""
        st, step = run.st, run.steps
        if self.retriever is None:
            return None, "no retriever"
        try:
            passages = self.retrieve(st, follow_up, route="follow_up")
        except SearchError as e:
            st.emit("note", type="search_failed", message=str(e))
            return None, f"search failed: {e}"
        if not passages:
            return None, "search found nothing"
        run.found.append(passages)
        # the concise answer is read from the top passages only
        top = passages[: self.opts.extract_k]
        docs = format_passages(top, budget=self.context_chars(st))
        c = self.ask(
            st,
            self.prompt(st, "self_ask_extract", question=follow_up, documents=docs),
            step=f"extract {step}",
            max_tokens=self.opts.extract_max_tokens,
        )
        answer = _one_line(c.text)
        if not answer or UNKNOWN.match(answer):
            return None, "the passages do not answer it"
        st.cite(passages, claim=answer, query=follow_up)
        st.emit(
            "intermediate_answer",
            question=follow_up,
            answer=answer,
            source="search",
            passages=[p.id for p in passages],
            step=step,
        )
        return answer, ""

    def _answer_by_model(self, run: Scaffold, follow_up: str, why: str) -> str:
        """The model answers its own follow-up by continuing the scaffold (``source="model"``)."""
        st, step = run.st, run.steps
        c = self.generate(st, run.prompt, step=f"model answer {step}", stop=ANSWER_STOPS, max_tokens=48)
        answer = _one_line(c.text) or run.words["unknown"]
        st.emit("intermediate_answer", question=follow_up, answer=answer, source="model", fallback=why, step=step)
        return answer

    # -- 3'. comparisons: one follow-up per option ----------------------------------------
    def _ask_per_option(self, run: Scaffold, follow_up: str) -> bool:
        """A follow-up that skips a comparison's decomposition (it restates the comparison, or
        asks about no option, or only who an option is) is replaced in the scaffold by one
        follow-up per option not yet asked about, each asking the compared attribute
        (``self_ask_option.txt``), and each answered as usual.  ``False`` when every option
        has been asked about already: the final answer is due."""
        st, cmp = run.st, run.cmp
        assert cmp is not None
        todo = [o for o in cmp.options if o not in run.covered]
        flags = self._restatement(run, follow_up)
        st.emit("follow_up", question=follow_up, step=run.steps, off_attribute=True, replaced_by=todo, **flags)
        self._drop_pending_followup(run)
        if not todo:
            st.emit("note", type="options_covered", message="every option was asked about; forcing the final answer")
            return False
        st.emit("note", type="per_option", options=todo, message="follow-up skips the comparison; asking each option")
        for option, question in zip(todo, self._option_questions(run, todo), strict=True):
            run.prompt += run.words["follow"] + run.sep + question + "\n" + run.words["intermediate"]
            self._answer_followup(run, question, per_option=option)
        return True

    @staticmethod
    def _drop_pending_followup(run: Scaffold) -> None:
        """Keep the completion's text before its follow-up line; the follow-up itself is replaced."""
        prefix = run.pending.rsplit("\n", 1)[0] if "\n" in run.pending.strip("\n") else ""
        run.prompt += prefix.rstrip() + ("\n" if prefix.strip() else "")
        run.pending = ""

    # -- 3''. questions asking several parts: one follow-up per part ----------------------------
    def _restates_parts(self, run: Scaffold, follow_up: str) -> bool:
        """The first restatement of a question that asks several parts."""
        return run.multi and not run.parts_tried and bool(self._restatement(run, follow_up))

    def _ask_per_part(self, run: Scaffold, follow_up: str) -> bool:
        """A first follow-up that restates a question asking several parts ("2022年和2023年春节档
        票房冠军分别是哪部电影？") is replaced, once, by one follow-up per part, which the model lists
        (``self_ask_parts.txt``); each is answered as usual.  ``False`` (the restatement is asked
        as it is) when the model lists fewer than two parts."""
        st = run.st
        run.parts_tried = True
        c = self.ask(
            st, self.prompt(st, "self_ask_parts", question=run.question), step=f"parts {run.steps}", max_tokens=160
        )
        parts = parse_parts(c.text, run.question)
        if not parts:
            st.emit("note", type="parts_declined", completion=c.text[:300], message="no parts listed; asked as it is")
            return False
        flags = self._restatement(run, follow_up)
        st.emit("follow_up", question=follow_up, step=run.steps, replaced_by=parts, **flags)
        st.emit("note", type="per_part", parts=parts, message="follow-up restates a question of several parts")
        self._drop_pending_followup(run)
        for i, question in enumerate(parts, 1):
            run.prompt += run.words["follow"] + run.sep + question + "\n" + run.words["intermediate"]
            self._answer_followup(run, question, per_part=i)
            run.part_answers.append(run.asked[-1][1])
        return True

    def _option_questions(self, run: Scaffold, todo: list[str]) -> list[str]:
        """For each option, the model's follow-up asking the compared attribute of it alone;
        the prompt grows by one ``About <option>:`` line per option (prefix-cache friendly)."""
        st, w, cmp = run.st, run.words, run.cmp
        assert cmp is not None
        prompt = self.prompt(st, "self_ask_option", question=run.question, option=todo[0])
        out: list[str] = []
        for i, option in enumerate(todo):
            if i:
                prompt += "\n" + w["about"] + option + w["colon"]
            c = self.generate(st, prompt, step=f"option {run.steps}.{i + 1}", stop=["\n"], max_tokens=48)
            question = first_question(_one_line(c.text, 300)).strip("\"'“”「」 ")
            if not question or not names(question, option, cmp.options) or len(named(question, cmp.options)) > 1:
                st.emit("note", type="option_fallback", option=option, completion=c.text[:200])
                question = f"{option}: {run.question}" if not question else f"{option}: {question}"
            prompt += run.sep + question
            out.append(question)
        return out

    # -- guards: restatements and repeats ----------------------------------------------------
    @staticmethod
    def _restatement(run: Scaffold, follow_up: str) -> dict[str, Any]:
        """Trace flags of a follow-up that restates the question (it is still searched, once)."""
        sim_q = similarity(follow_up, run.question)
        if sim_q >= run.restate_at:
            return {"restates_question": True, "similarity": round(sim_q, 3)}
        return {}

    @staticmethod
    def _repeat_of(run: Scaffold, follow_up: str) -> tuple[str, float] | None:
        """The earlier follow-up this one repeats (nothing new asked) and their similarity."""
        earlier = [f for f, _ in run.asked if asks_nothing_new(follow_up, f, run.repeat_at)]
        sim_prev, prev = most_similar(follow_up, earlier)
        if earlier and not prev:  # same words in another order: similarity 1 is found; 0 only for empty sets
            prev, sim_prev = earlier[0], 1.0
        return (prev, sim_prev) if prev else None

    def _answer_repeat(self, run: Scaffold, follow_up: str, prev: str, sim_prev: float) -> bool:
        """A repeat is not searched again.  The first gets the earlier answer and a request
        for a different follow-up; a second ends the follow-ups (``False``)."""
        st = run.st
        run.repeats += 1
        prev_answer = dict(run.asked)[prev]
        st.emit("follow_up", question=follow_up, step=run.steps, repeat_of=prev, similarity=round(sim_prev, 3))
        if run.repeats == 1:
            text = self.prompt(st, "self_ask_repeat", answer=prev_answer)
            run.prompt += run.sep + text + "\n"
            st.emit("intermediate_answer", question=follow_up, answer=prev_answer, source="repeat", step=run.steps)
            return True
        run.prompt += run.sep + prev_answer + "\n"
        st.emit("note", type="repeat_guard", message="follow-up repeated again; moving to the final answer")
        return False

    # -- 5. the forced final answer, and the result --------------------------------------------
    def _final_answer(self, run: Scaffold) -> None:
        """Append "So the final answer is:" and let the model complete that one line."""
        if not run.prompt.endswith("\n"):
            run.prompt += "\n"
        run.prompt += run.words["final"]
        c = self.generate(run.st, run.prompt, step="final answer", stop=["\n"], max_tokens=48)
        run.prompt += c.text
        run.final = parse_final_line(c.text)
        if not run.final and run.asked:
            run.final = clean_short(run.asked[-1][1])
            run.st.emit("note", type="empty_final", message="empty forced answer; used the last intermediate answer")

    def _conclude(self, run: Scaffold) -> None:
        st = run.st
        st.emit("note", type="scaffold", text=run.prompt[run.start :][-4000:])
        final, short = self._shaped(run, self._without_copied_notice(st, run.final) or "")
        if self.opts.final_read and self.retriever is not None:
            final, short = self._read_final(run, final, short)  # 6. Sleuth's final reading pass
        st.result.answer = final
        st.result.short_answer = short
        st.result.finish_reason = run.finish
