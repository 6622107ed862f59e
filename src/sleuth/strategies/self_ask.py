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

The prompt is append-only: every call extends the previous prompt, so the
server's prompt cache reuses everything already evaluated.

Small-model failure modes handled here: variant spellings of the scaffold
(see :func:`~sleuth.strategies.parsing.parse_self_ask`), the model answering
its own follow-up (its answer is dropped and the follow-up is searched), and
follow-ups that restate the question (token overlap >= ``restate_threshold``)
or repeat a previous follow-up (:func:`~sleuth.strategies.text.is_repeat`:
nothing new asked): a restated question is searched once; a repeat gets
the earlier answer plus a request for a different sub-question, and a second
repeat moves straight to the final answer.  Every path consumes a step, so
the loop always ends.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from sleuth.search.base import SearchError
from sleuth.strategies.base import FINISHED, STEP_LIMIT, RunState, Strategy
from sleuth.strategies.options import SelfAskOptions
from sleuth.strategies.parsing import parse_final_line, parse_self_ask
from sleuth.strategies.text import clean_short, format_passages, is_repeat, most_similar, sanitize, similarity

#: the scaffold's own words, per prompt language (the parser accepts both and their variants)
SCAFFOLD = {
    "en": {"intermediate": "Intermediate answer:", "final": "So the final answer is:", "unknown": "unknown"},
    "zh": {"intermediate": "中间答案：", "final": "所以最终答案是：", "unknown": "未知"},
}
#: generation stops where the search engine takes over (both languages: small models mix them)
STOPS = ["Intermediate answer:", "Intermediate Answer:", "中间答案：", "中间答案:", "\nQuestion:", "\n问题："]
#: a model-written intermediate answer stops at the end of its line
ANSWER_STOPS = ["\n", "Follow up", "So the final answer", "追问", "所以最终答案"]

_UNKNOWN = re.compile(
    r"^\W*(?:unknown|not\s+(?:found|mentioned|stated|given)|(?:the\s+)?documents?\s+(?:do(?:es)?\s+not|don't)"
    r"|no\s+(?:information|answer)|i\s+(?:do\s+not|don't)\s+know|未知|文档中没有|没有找到|无法回答|不知道)",
    re.I,
)


def _one_line(text: str, max_chars: int = 300) -> str:
    """First meaningful line of a model answer, made inert for the scaffold."""
    for ln in (text or "").splitlines():
        ln = re.sub(r"^\s*(?:answer|intermediate\s+answer|答案|中间答案)\s*[:：]\s*", "", ln.strip(), flags=re.I)
        if ln:
            return sanitize(ln, max_chars)
    return ""


@dataclass
class _Scaffold:
    """One Self-Ask run: the append-only prompt and the follow-ups asked so far."""

    st: RunState
    question: str
    prompt: str
    start: int  # where the model's part of the prompt begins
    words: dict[str, str]  # the scaffold's words in the run's language
    sep: str  # between "Intermediate answer:" and the answer
    restate_at: float
    repeat_at: float
    max_chars: int
    asked: list[tuple[str, str]] = field(default_factory=list)  # (follow-up, intermediate answer)
    repeats: int = 0
    steps: int = 0
    final: str | None = None
    finish: str = FINISHED


class SelfAsk(Strategy):
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
            repeat = self._repeat_of(run, follow_up)
            if repeat is None:
                self._answer_followup(run, follow_up)  # 3. answer F by search (or the model), go to 2
            elif not self._answer_repeat(run, follow_up, *repeat):
                break  # a second repeat: nothing new will be asked
        if run.final is None:
            self._final_answer(run)  # 5. "So the final answer is:" completed by the model
        self._conclude(run)

    # -- 1. the prompt -------------------------------------------------------------------
    def _start(self, question: str, st: RunState) -> _Scaffold:
        lang = st.result.lang
        words = SCAFFOLD.get(lang, SCAFFOLD["en"])
        sep = " " if lang == "en" else ""
        threshold = self.opts.restate_threshold
        repeat_at = self.opts.repeat_threshold
        max_chars = self.opts.max_prompt_chars
        prompt = self.prompt(st, "self_ask", question=question)
        return _Scaffold(st, question, prompt, len(prompt), words, sep, threshold, repeat_at, max_chars)

    def _room_left(self, run: _Scaffold) -> bool:
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
    def _next_followup(self, run: _Scaffold) -> str | None:
        """Complete the scaffold up to the next "Intermediate answer:"; the follow-up it asks.

        ``None`` when it asks none: then it either gave the final answer (``run.final``)
        or has no scaffold at all (a ``no_scaffold`` note; the final answer is forced).
        """
        st = run.st
        run.steps += 1
        c = self.generate(st, run.prompt, step=f"scaffold {run.steps}", stop=STOPS)
        parsed = parse_self_ask(c.text)
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
        run.prompt += parsed.consumed.rstrip() + "\n" + run.words["intermediate"]
        if parsed.self_answer:
            st.emit(
                "note",
                type="self_answered",
                follow_up=parsed.follow_up,
                dropped=parsed.self_answer[:300],
                message="the model answered its own follow-up; its answer was dropped and the follow-up searched",
            )
        return parsed.follow_up

    # -- 3. the intermediate answer ------------------------------------------------------
    def _answer_followup(self, run: _Scaffold, follow_up: str) -> None:
        """Answer a new follow-up by search, else by the model; append ``Intermediate answer: A``."""
        st = run.st
        flags = self._restatement(run, follow_up)
        st.emit("follow_up", question=follow_up, step=run.steps, **flags)
        answer, why = self._answer_by_search(st, follow_up, run.steps)
        if answer is None:
            answer = self._answer_by_model(run, follow_up, why)
        run.prompt += run.sep + answer + "\n"
        run.asked.append((follow_up, answer))
        if flags:
            st.emit("note", type="restated_question", message="follow-up restates the question; searched it once")

    def _answer_by_search(self, st: RunState, follow_up: str, step: int) -> tuple[str | None, str]:
        """The passages' answer (the claim its citations are grounded in), or ``None`` and why not."""
        if self.retriever is None:
            return None, "no retriever"
        try:
            passages = self.retrieve(st, follow_up, route="follow_up")
        except SearchError as e:
            st.emit("note", type="search_failed", message=str(e))
            return None, f"search failed: {e}"
        if not passages:
            return None, "search found nothing"
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
        if not answer or _UNKNOWN.match(answer):
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

    def _answer_by_model(self, run: _Scaffold, follow_up: str, why: str) -> str:
        """The model answers its own follow-up by continuing the scaffold (``source="model"``)."""
        st, step = run.st, run.steps
        c = self.generate(st, run.prompt, step=f"model answer {step}", stop=ANSWER_STOPS, max_tokens=48)
        answer = _one_line(c.text) or run.words["unknown"]
        st.emit("intermediate_answer", question=follow_up, answer=answer, source="model", fallback=why, step=step)
        return answer

    # -- guards: restatements and repeats ----------------------------------------------------
    @staticmethod
    def _restatement(run: _Scaffold, follow_up: str) -> dict[str, Any]:
        """Trace flags of a follow-up that restates the question (it is still searched, once)."""
        sim_q = similarity(follow_up, run.question)
        if sim_q >= run.restate_at:
            return {"restates_question": True, "similarity": round(sim_q, 3)}
        return {}

    @staticmethod
    def _repeat_of(run: _Scaffold, follow_up: str) -> tuple[str, float] | None:
        """The earlier follow-up this one repeats (nothing new asked) and their similarity."""
        sim_prev, prev = most_similar(follow_up, [f for f, _ in run.asked if is_repeat(follow_up, f, run.repeat_at)])
        return (prev, sim_prev) if prev else None

    def _answer_repeat(self, run: _Scaffold, follow_up: str, prev: str, sim_prev: float) -> bool:
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
    def _final_answer(self, run: _Scaffold) -> None:
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

    def _conclude(self, run: _Scaffold) -> None:
        st = run.st
        st.emit("note", type="scaffold", text=run.prompt[run.start :][-4000:])
        final = self._without_copied_notice(st, run.final)
        st.result.answer = final or ""
        st.result.short_answer = clean_short(final or "")
        st.result.finish_reason = run.finish

    def _without_copied_notice(self, st: RunState, final: str | None) -> str | None:
        """A model that copies the intermediate answer after a repeat also copies the notice: cut it."""
        notice = self.prompt(st, "self_ask_repeat", answer="").strip()[:12]
        if final and notice and notice in final:
            final = final[: final.index(notice)].strip() or final
        return final
