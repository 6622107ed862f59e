"""Step-back's settled comparison (option ``settle_comparison``), on the scripted model and a real index.

The questions are two HotpotQA-train comparisons; the replies are written after the failure
qwen2.5-1.5b showed on comparisons of the hybrid re-make (step-back, 2026-12-03): its background
states both sides right and its answer concludes wrong.

* "Which band was formed first, Wavves or Social Code?": "Social Code was formed in 1999 in
  St. Albert, while Wavves was formed in 2008 in San Diego" and then "Short answer: Wavves"
  (gold: Social Code).
* "Were Daniel Mann and Todd Solondz both directors?": "Todd Solondz is an American film
  screenwriter and director, while Daniel Mann was an American film and television director"
  and then "Short answer: No" (gold: yes).

With ``settle_comparison`` one short call chooses the answer from the reply's background and
evidence alone; the reply is the draft.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from conftest import titled_index
from sleuth.llm.base import GenParams, Message
from sleuth.llm.scripted import ScriptedLLM
from sleuth.search.base import Retriever
from sleuth.strategies import Result, get_strategy
from sleuth.strategies.options import OptionsError
from sleuth.strategies.self_ask_questions import find_comparison
from sleuth.strategies.settle import agrees
from test_search_o1_settle import last_option

PASSAGES = {
    "Social Code": "Social Code (formerly known as Fifth Season) was a Canadian alternative rock group formed in 1999 "
    "in St. Albert.",
    "Wavves": "Wavves is an American rock band based in San Diego, California, formed in 2008 by Nathan Williams.",
    "Daniel Mann": "Daniel Mann (August 8, 1912 – November 21, 1991) was an American film and television director.",
    "Todd Solondz": "Todd Solondz (born October 15, 1959) is an American independent film screenwriter and director.",
}
BANDS = "Which band was formed first, Wavves or Social Code?"
BANDS_REPLY = (
    "Background: The documents provide information about the history of two bands: Social Code and Wavves. "
    "Social Code was formed in 1999 in St. Albert, while Wavves was formed in 2008 in San Diego. "
    "The documents do not provide information about the formation of Deerhunter or Nine Lashes.\n"
    "Evidence: The documents do not provide information about the formation of Deerhunter or Nine Lashes.\n"
    "Answer: Wavves was formed first, in 2008.\nShort answer: Wavves"
)
DIRECTORS = "Were Daniel Mann and Todd Solondz both directors?"
DIRECTORS_REPLY = (
    "Background: The documents provide information about Todd Solondz and Daniel Mann, including "
    "their birth dates, nationality, and film careers. They mention that Todd Solondz is an American film "
    "screenwriter and director, while Daniel Mann was an American film and television director.\n"
    "Evidence: The documents do not provide information about Todd Solondz and Daniel Mann's "
    "film careers. They only provide information about their birth dates and nationality.\n"
    "Answer: No, Daniel Mann and Todd Solondz were not both directors.\nShort answer: No"
)
CHOOSE = "Answer the question with exactly one of the options, using only the facts found"


@pytest.fixture(scope="module")
def retriever(tmp_path_factory: pytest.TempPathFactory) -> Retriever:
    return titled_index(tmp_path_factory, "comparisons", PASSAGES)


def _script(step_back: str, reply: str, choice: str | Callable[[str], str], asked: list[str]) -> Callable[..., str]:
    """The step-back question, the recorded reply, and ``choice`` for the choice call (each choice
    prompt is appended to ``asked``)."""

    def script(payload: str | list[Message], params: GenParams) -> str:
        content = str(payload[-1]["content"]) if isinstance(payload, list) else payload
        if content.startswith(CHOOSE):
            asked.append(content)
            return choice(content) if callable(choice) else choice
        return reply if content.startswith("Answer the question from the documents below") else step_back

    return script


def _run(retriever: Retriever, question: str, reply: str, choice: str, **opts: object) -> tuple[Result, list[str]]:
    asked: list[str] = []
    llm = ScriptedLLM(_script("Which bands were formed first?", reply, choice, asked))
    return get_strategy("step-back", llm, retriever, k=2, lang="en", **opts).run(question), asked


def _notes(r: Result, kind: str) -> list[dict]:
    return [e.data for e in r.trace.of("note") if e.data.get("type") == kind]


def test_a_choice_is_read_from_the_replys_own_facts_and_the_reply_is_the_draft(retriever: Retriever) -> None:
    r, asked = _run(retriever, BANDS, BANDS_REPLY, "Social Code", settle_comparison=True)
    assert r.short_answer == r.answer == "Social Code"
    prompt, reversed_ = asked  # the options in either order
    assert "Options: Social Code or Wavves" in reversed_
    assert "Social Code was formed in 1999 in St. Albert, while Wavves was formed in 2008 in San Diego" in prompt
    assert "Options: Wavves or Social Code" in prompt
    assert "Wavves was formed first" not in prompt  # the wrong conclusion is not shown
    (draft,) = r.trace.of("draft")
    assert draft.data["short_answer"] == "Wavves" and draft.data["stage"] == "answer"
    assert draft.data["text"].startswith("Background: The documents provide information about the history")
    assert [c.id for c in r.citations]  # cited from the facts' passages
    assert _notes(r, "option_settled")[0]["chosen"] == "Social Code"


def test_a_yes_no_comparison_settles_on_yes_or_no(retriever: Retriever) -> None:
    r, asked = _run(retriever, DIRECTORS, DIRECTORS_REPLY, "Yes", settle_comparison=True)
    assert r.short_answer == "Yes"
    assert "Options: yes or no" in asked[0]
    assert "Daniel Mann was an American film and television director" in asked[0]
    assert r.trace.of("draft")[0].data["short_answer"] == "No"


def test_a_choice_that_agrees_with_the_reply_leaves_it_whole(retriever: Retriever) -> None:
    r, asked = _run(retriever, DIRECTORS, DIRECTORS_REPLY, "No.", settle_comparison=True)
    assert len(asked) == 2 and r.short_answer == "No" and r.answer.startswith("Background:")
    assert r.trace.of("draft") == [] and _notes(r, "option_settled")[0]["chosen"] == "No"


def test_a_reply_naming_no_option_leaves_the_answer(retriever: Retriever) -> None:
    r, asked = _run(retriever, BANDS, BANDS_REPLY, "Both were formed a long time ago.", settle_comparison=True)
    assert len(asked) == 1 and r.short_answer == "Wavves" and r.trace.of("draft") == []
    assert _notes(r, "option_settled")[0]["chosen"] is None


def test_a_choice_that_moves_with_the_order_of_the_options_leaves_the_answer(retriever: Retriever) -> None:
    r, asked = _run(retriever, BANDS, BANDS_REPLY, last_option, settle_comparison=True)
    assert len(asked) == 2 and r.short_answer == "Wavves" and r.trace.of("draft") == []
    assert _notes(r, "option_settled")[0]["reply"] == "Social Code | reversed: Wavves"


def test_off_by_default_and_never_for_a_question_that_is_no_comparison(retriever: Retriever) -> None:
    for opts in ({}, {"settle_comparison": False}):
        r, asked = _run(retriever, BANDS, BANDS_REPLY, "Social Code", **opts)
        assert asked == [] and r.short_answer == "Wavves"
    reply = "Background: Wavves was formed in 2008 [1].\nAnswer: Wavves is from San Diego.\nShort answer: San Diego"
    r, asked = _run(retriever, "Where is Wavves from?", reply, "Wavves", settle_comparison=True)
    assert asked == [] and r.short_answer == "San Diego" and _notes(r, "option_settled") == []


def test_agreement_is_the_same_yes_or_no_or_the_one_option_named() -> None:
    yn = find_comparison(DIRECTORS)
    choice = find_comparison(BANDS)
    assert yn is not None and choice is not None
    assert agrees("No, they are not", "no", yn) and agrees("不是", "否", yn) and not agrees("Yes", "no", yn)
    assert agrees("Wavves", "Wavves", choice) and not agrees("Wavves and Social Code", "Wavves", choice)
    assert not agrees("unknown", "Wavves", choice)


def test_a_settle_option_that_is_not_a_boolean_is_refused() -> None:
    with pytest.raises(OptionsError, match="settle_comparison"):
        get_strategy("step-back", ScriptedLLM(["x"]), None, settle_comparison="sometimes")
