"""Self-Ask (Press et al., 2023, "Measuring and Narrowing the Compositionality Gap").

The algorithm, as in the paper's ``self-ask_plus_search_engine`` loop:

1. prompt = few-shot examples + ``Question: Q`` + ``Are follow up questions needed here:``
2. complete the prompt, stopping at ``Intermediate answer:``
3. if the completion asks ``Follow up: F``: answer F by search (the passages'
   answer, read out of the top ``extract_k`` passages by a short separate
   extraction call; all passages found become citations) or, when search
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
from typing import Any

from sleuth.search.base import Passage, SearchError
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
        lang = st.result.lang
        words = SCAFFOLD.get(lang, SCAFFOLD["en"])
        sep = " " if lang == "en" else ""
        threshold = self.opts.restate_threshold
        repeat_at = self.opts.repeat_threshold
        max_chars = self.opts.max_prompt_chars
        prompt = self.prompt(st, "self_ask", question=question)
        start_len = len(prompt)
        asked: list[tuple[str, str]] = []  # (follow-up, intermediate answer)
        repeats = 0
        final: str | None = None
        finish = FINISHED
        steps = 0
        while final is None:
            if steps >= self.max_steps:
                finish = STEP_LIMIT
                st.emit("note", type="step_limit", message=f"{steps} steps used; forcing the final answer")
                break
            if len(prompt) > max_chars:
                finish = STEP_LIMIT
                st.emit(
                    "note",
                    type="context_full",
                    message=f"prompt reached {len(prompt)} characters; forcing the final answer",
                )
                break
            steps += 1
            c = self.generate(st, prompt, step=f"scaffold {steps}", stop=STOPS)
            parsed = parse_self_ask(c.text)
            if parsed.follow_up is None:
                if parsed.final is not None:
                    prompt += parsed.consumed
                    final = parsed.final
                    break
                prompt += parsed.consumed
                st.emit(
                    "note",
                    type="no_scaffold",
                    message="completion has neither a follow-up nor a final answer; forcing the final answer",
                    completion=c.text[:500],
                )
                break
            fu = parsed.follow_up
            prompt += parsed.consumed.rstrip() + "\n" + words["intermediate"]
            if parsed.self_answer:
                st.emit(
                    "note",
                    type="self_answered",
                    follow_up=fu,
                    dropped=parsed.self_answer[:300],
                    message="the model answered its own follow-up; its answer was dropped and the follow-up searched",
                )
            sim_prev, prev = most_similar(fu, [f for f, _ in asked if is_repeat(fu, f, repeat_at)])
            if prev:
                repeats += 1
                prev_answer = dict(asked)[prev]
                st.emit("follow_up", question=fu, step=steps, repeat_of=prev, similarity=round(sim_prev, 3))
                if repeats == 1:
                    text = self.prompt(st, "self_ask_repeat", answer=prev_answer)
                    prompt += sep + text + "\n"
                    st.emit("intermediate_answer", question=fu, answer=prev_answer, source="repeat", step=steps)
                    continue
                prompt += sep + prev_answer + "\n"
                st.emit("note", type="repeat_guard", message="follow-up repeated again; moving to the final answer")
                break
            sim_q = similarity(fu, question)
            flags: dict[str, Any] = {}
            if sim_q >= threshold:
                flags = {"restates_question": True, "similarity": round(sim_q, 3)}
            st.emit("follow_up", question=fu, step=steps, **flags)
            answer = self._answer_follow_up(st, fu, prompt, steps)
            prompt += sep + answer + "\n"
            asked.append((fu, answer))
            if flags:
                st.emit("note", type="restated_question", message="follow-up restates the question; searched it once")
        if final is None:
            if not prompt.endswith("\n"):
                prompt += "\n"
            prompt += words["final"]
            c = self.generate(st, prompt, step="final answer", stop=["\n"], max_tokens=48)
            prompt += c.text
            final = parse_final_line(c.text)
            if not final and asked:
                final = clean_short(asked[-1][1])
                st.emit("note", type="empty_final", message="empty forced answer; used the last intermediate answer")
        st.emit("note", type="scaffold", text=prompt[start_len:][-4000:])
        # a model that copies the intermediate answer after a repeat also copies the notice
        notice = self.prompt(st, "self_ask_repeat", answer="").strip()[:12]
        if final and notice and notice in final:
            final = final[: final.index(notice)].strip() or final
        st.result.answer = final or ""
        st.result.short_answer = clean_short(final or "")
        st.result.finish_reason = finish

    def _answer_follow_up(self, st: RunState, follow_up: str, prompt: str, step: int) -> str:
        """Search + extraction; the model's own answer when search gives nothing."""
        words = SCAFFOLD.get(st.result.lang, SCAFFOLD["en"])
        passages: list[Passage] = []
        why = "no retriever"
        if self.retriever is not None:
            try:
                passages = self.retrieve(st, follow_up, route="follow_up")
                why = "search found nothing"
            except SearchError as e:
                why = f"search failed: {e}"
                st.emit("note", type="search_failed", message=str(e))
        if passages:
            # the concise answer is read from the top passages only (all of them are still cited)
            top = passages[: self.opts.extract_k]
            docs = format_passages(top, budget=self.context_chars(st))
            c = self.ask(
                st,
                self.prompt(st, "self_ask_extract", question=follow_up, documents=docs),
                step=f"extract {step}",
                max_tokens=self.opts.extract_max_tokens,
            )
            answer = _one_line(c.text)
            if answer and not _UNKNOWN.match(answer):
                st.cite(passages)
                st.emit(
                    "intermediate_answer",
                    question=follow_up,
                    answer=answer,
                    source="search",
                    passages=[p.id for p in passages],
                    step=step,
                )
                return answer
            why = "the passages do not answer it"
        c = self.generate(st, prompt, step=f"model answer {step}", stop=ANSWER_STOPS, max_tokens=48)
        answer = _one_line(c.text) or words["unknown"]
        st.emit("intermediate_answer", question=follow_up, answer=answer, source="model", fallback=why, step=step)
        return answer
