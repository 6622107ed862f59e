"""One Self-Ask run's state (:mod:`~sleuth.strategies.self_ask`): the append-only prompt, the
follow-ups asked and their answers, and what the final-answer steps
(:mod:`~sleuth.strategies.self_ask_final`) read of it."""

from __future__ import annotations

from dataclasses import dataclass, field

from sleuth.search.base import Passage
from sleuth.strategies.base import RunState
from sleuth.strategies.result import FINISHED
from sleuth.strategies.self_ask_questions import Comparison


@dataclass
class Scaffold:
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
    cmp: Comparison | None = None  # the options a comparison question names
    covered: set[str] = field(default_factory=set)  # options a follow-up has asked about
    asked: list[tuple[str, str]] = field(default_factory=list)  # (follow-up, intermediate answer)
    repeats: int = 0
    restated: int = 0  # follow-ups answered that restate the question
    nudged: bool = False  # asked once for one more follow-up instead of an undecomposed final answer
    multi: bool = False  # the question asks for several parts (answer_type's ``list``)
    parts_tried: bool = False  # the model was asked once for one question per part
    part_answers: list[str] = field(default_factory=list)  # the intermediate answers of those questions
    found: list[list[Passage]] = field(default_factory=list)  # each searched follow-up's passages, by rank
    pending: str = ""  # the completion's text up to the follow-up line, not yet in the prompt
    steps: int = 0
    final: str | None = None
    finish: str = FINISHED
