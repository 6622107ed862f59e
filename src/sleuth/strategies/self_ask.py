"""Self-Ask (Press et al., 2023, "Measuring and Narrowing the Compositionality Gap").

The paper's ``self-ask_plus_search_engine`` loop, append-only (each call extends the last prompt,
so a server's prompt cache reuses it):

1. prompt = few-shot examples + ``Question: Q`` + ``Are follow up questions needed here:``
2. complete the prompt, stopping at ``Intermediate answer:``
3. a completion that asks ``Follow up: F``: answer F by search (a short extraction call reads the
   answer out of the top ``extract_k`` passages, the search engine's answer box of the paper; the
   passages that hold it become citations) or, when search finds nothing, by the model itself
   (``source="model"``); append ``Intermediate answer: A`` and go to 2
4. a completion that says ``So the final answer is: X``: done
5. at the step limit (or a full prompt, or no scaffold at all) append ``So the final answer is:``
   and let the model complete that line.

Repairs (:mod:`sleuth.strategies.repairs`, off with ``mode=paper``): ``repeat_guard`` in step 3,
``final_read`` after step 5, and the finishing ones of every strategy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from sleuth.lang import NOTHING
from sleuth.search.base import Passage, SearchError
from sleuth.strategies.base import RunState, Strategy
from sleuth.strategies.options import SelfAskOptions
from sleuth.strategies.parse_self_ask import ANSWER_STOPS, SCAFFOLD, STOPS, parse_final_line, parse_self_ask
from sleuth.strategies.repairs import fired, repeat_of
from sleuth.strategies.repairs.reading import final_read
from sleuth.strategies.result import FINISHED, STEP_LIMIT
from sleuth.strategies.text import format_passages, sanitize


def _one_line(text: str) -> str:
    """First meaningful line of a model answer, made inert for the scaffold."""
    for ln in (text or "").splitlines():
        ln = re.sub(r"^\s*(?:answer|intermediate\s+answer|答案|中间答案)\s*[:：]\s*", "", ln.strip(), flags=re.I)
        if ln:
            return sanitize(ln, 300)
    return ""


@dataclass
class Scaffold:
    """One run: the append-only prompt, the follow-ups asked and their answers."""

    prompt: str
    words: dict[str, str]
    asked: list[tuple[str, str]] = field(default_factory=list)  # (follow-up, intermediate answer)
    found: list[list[Passage]] = field(default_factory=list)  # each searched follow-up's passages, by rank
    repeats: int = 0
    final: str | None = None
    finish: str = FINISHED


class SelfAsk(Strategy):
    """Self-Ask with search, completion mode.  Options: :class:`~sleuth.strategies.options.SelfAskOptions`;
    ``max_steps`` bounds the scaffold completions (follow-ups)."""

    name = "self-ask"
    needs_retriever = True  # also works without one: the model then answers its own follow-ups
    Options = SelfAskOptions
    opts: SelfAskOptions

    def solve(self, question: str, st: RunState) -> None:
        words = SCAFFOLD.get(st.result.lang, SCAFFOLD["en"])
        run = Scaffold(self.prompt(st, "self_ask", question=question), words)  # 1.
        start = len(run.prompt)
        for step in range(1, self.max_steps + 1):
            if len(run.prompt) > self.opts.max_prompt_chars:
                st.emit("note", type="context_full", message=f"prompt reached {len(run.prompt)} characters")
                run.finish = STEP_LIMIT
                break
            c = self.generate(st, run.prompt, step=f"scaffold {step}", stop=STOPS)  # 2.
            parsed = parse_self_ask(c.text)
            if parsed.follow_up is None:  # 4. the final answer (or no scaffold: 5.)
                run.prompt += parsed.consumed
                run.final = parsed.final
                if parsed.final is None:
                    st.emit("note", type="no_scaffold", completion=c.text[:500], message="forcing the final answer")
                break
            run.prompt += parsed.consumed.rstrip() + "\n" + words["intermediate"]
            follow_up = parsed.follow_up
            prev = repeat_of(follow_up, [f for f, _ in run.asked]) if self.opts.repeat_guard else None
            if prev is not None:  # repair: a repeat is not searched again
                if not self._repeated(st, run, follow_up, prev, step):
                    break
                continue
            answer, why = self._search_answer(st, run, follow_up, step)
            answer = answer or self._model_answer(st, run, follow_up, step, why)
            run.prompt += (" " if st.result.lang == "en" else "") + answer + "\n"  # 3. and on to 2.
            run.asked.append((follow_up, answer))
        else:
            st.emit("note", type="step_limit", message=f"{self.max_steps} steps used; forcing the final answer")
            run.finish = STEP_LIMIT
        if run.final is None:  # 5.
            run.prompt += ("" if run.prompt.endswith("\n") else "\n") + words["final"]
            c = self.generate(st, run.prompt, step="final answer", stop=["\n"], max_tokens=48)
            run.prompt += c.text
            run.final = parse_final_line(c.text)
        st.emit("note", type="scaffold", text=run.prompt[start:][-4000:])
        found_by = "the follow-ups'"  # repair final_read: read once more
        answer, short = final_read(self, st, run.found, run.final or "", stage="scaffold", found_by=found_by)
        st.result.answer, st.result.short_answer, st.result.finish_reason = answer, short, run.finish

    def _search_answer(self, st: RunState, run: Scaffold, follow_up: str, step: int) -> tuple[str | None, str]:
        """3. The passages' answer (the claim its citations rest on), or ``None`` and why not."""
        st.emit("follow_up", question=follow_up, step=step)
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
        docs = format_passages(passages[: self.opts.extract_k], budget=self.context_chars(st))
        prompt = self.prompt(st, "self_ask_extract", question=follow_up, documents=docs)
        answer = _one_line(self.ask(st, prompt, step=f"extract {step}", max_tokens=self.opts.extract_max_tokens).text)
        if not answer or NOTHING.match(answer):
            return None, "the passages do not answer it"
        st.cite(passages, claim=answer, query=follow_up)
        ids = [p.id for p in passages]
        st.emit("intermediate_answer", question=follow_up, answer=answer, source="search", passages=ids, step=step)
        return answer, ""

    def _model_answer(self, st: RunState, run: Scaffold, follow_up: str, step: int, why: str) -> str:
        """3. The model answers its own follow-up by continuing the scaffold (``source="model"``)."""
        c = self.generate(st, run.prompt, step=f"model answer {step}", stop=ANSWER_STOPS, max_tokens=48)
        answer = _one_line(c.text) or run.words["unknown"]
        st.emit("intermediate_answer", question=follow_up, answer=answer, source="model", fallback=why, step=step)
        return answer

    def _repeated(self, st: RunState, run: Scaffold, follow_up: str, prev: str, step: int) -> bool:
        """Repair ``repeat_guard``: a follow-up that repeats ``prev`` gets its earlier answer and, the
        first time, a request for a different follow-up; a second repeat ends the follow-ups (``False``)."""
        run.repeats += 1
        answer = dict(run.asked)[prev]
        fired(st, "repeat_guard", follow_up=follow_up, repeat_of=prev, step=step, repeats=run.repeats)
        text = self.prompt(st, "self_ask_repeat", answer=answer) if run.repeats == 1 else answer
        run.prompt += (" " if st.result.lang == "en" else "") + text + "\n"
        return run.repeats == 1
