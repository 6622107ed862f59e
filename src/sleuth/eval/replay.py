"""A record's own model replies, served again to the running code: ``sleuth eval verify DIR --replay``.

The code fingerprint (:mod:`sleuth.eval.fingerprint`) runs a short probe, so a change that only
shows on a reply the probe never writes (a reply cut at ``max_tokens`` inside its answer line, a
refusal worded with an adverb) keeps every record "current" although the running code would
answer some of them differently. Running the records again on the model finds them, at the
model's price. A replay finds them for free: :class:`ReplayLLM` hands the running strategy the
completions the record holds, in the order they were made, while search runs on the run's real
index. If the code now asks what it asked then, the replay walks the record's path and ends where
the code now ends; the step-by-step comparison of :mod:`sleuth.eval.verify` then shows whether the
answer, the short answer or the steps changed. If it asks something else (a prompt of another
length, one call more), the record's replies no longer answer it and the replay says where it
parted: that record needs the model (``sleuth eval ... --redo ID``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sleuth.llm.base import Completion, GenParams, LLMError, Message, OnDelta, Usage


class ReplayExhausted(LLMError):
    """The running code asks for more model calls than the record holds."""

    reason = "llm_replay_exhausted"


class ReplayLLM:
    """The LLM protocol over a record's ``llm`` trace events: each call returns the next recorded
    completion (text, finish reason, usage), whatever it is asked.

    ``parted`` names the first call whose prompt differs in length from the recorded one
    (``prompt_chars``): from there on the replies answer another prompt, so nothing after it says
    what the model would do now. A call past the recorded ones raises :class:`ReplayExhausted`.
    """

    def __init__(self, calls: Sequence[Mapping[str, Any]], model: str = "replay") -> None:
        self._calls = list(calls)
        self._next = 0
        self.model = model
        self.parted = ""

    @classmethod
    def of_record(cls, record: Mapping[str, Any]) -> ReplayLLM:
        """The replay of ``record``'s model calls (its result's ``llm`` events, in order)."""
        result = record.get("result") or {}
        calls = [ev.get("data") or {} for ev in result.get("trace") or [] if ev.get("kind") == "llm"]
        return cls(calls, model=str(result.get("model") or "replay"))

    @property
    def used(self) -> int:
        """How many recorded replies were served."""
        return self._next

    def _serve(self, prompt_chars: int) -> Completion:
        if self._next >= len(self._calls):
            raise ReplayExhausted(f"the running code makes more model calls than the record's {len(self._calls)}")
        d = self._calls[self._next]
        self._next += 1
        then = d.get("prompt_chars")
        if not self.parted and then is not None and int(then) != prompt_chars:
            self.parted = (
                f"LLM call {self._next} ({d.get('step') or 'unnamed'}): the prompt is {prompt_chars} characters "
                f"now, {then} then"
            )
        u = d.get("usage") or {}
        usage = Usage(
            int(u.get("prompt_tokens") or 0),
            int(u.get("completion_tokens") or 0),
            int(u.get("cached_prompt_tokens") or 0),
            int(u.get("processed_prompt_tokens") or 0),
        )
        return Completion(
            text=str(d.get("completion") or ""),
            finish_reason=str(d.get("finish_reason") or "stop"),
            usage=usage,
            model=self.model,
        )

    def complete(self, prompt: str, params: GenParams | None = None, *, on_delta: OnDelta | None = None) -> Completion:
        c = self._serve(len(prompt))
        if on_delta is not None and c.text:
            on_delta(c.text)
        return c

    def chat(
        self, messages: Sequence[Message], params: GenParams | None = None, *, on_delta: OnDelta | None = None
    ) -> Completion:
        c = self._serve(sum(len(m["content"]) for m in messages))
        if on_delta is not None and c.text:
            on_delta(c.text)
        return c


def parting(llm: ReplayLLM, fresh: Mapping[str, Any]) -> str:
    """Where the replay stopped telling what the model would do ("" when it never did): a prompt
    that changed, or a call past the record's. (Code that now stops earlier is still replayed
    faithfully: the comparison of the steps shows it.)"""
    if llm.parted:
        return llm.parted
    if fresh.get("reason") == ReplayExhausted.reason:
        return f"LLM call {llm.used + 1}: the running code makes more model calls than the record's {llm.used}"
    return ""
