"""Step-back's settled comparison (option ``settle_comparison``), on the scripted model and a real index.

The replies are qwen2.5-1.5b's on two HotpotQA comparisons of the hybrid re-make (step-back,
2026-12-03): its background states both sides right and its answer concludes wrong.

* "Which band was active the longest, Spirit of the West or Big Pig?": "Spirit of the West was
  active from 1983 to 2016, while Big Pig existed from 1985 to 1991" and then "Short answer:
  Big Pig" (gold: Spirit of the West).
* "Are Fabián Bielinsky and Nelson Pereira dos Santos both directors?": "Nelson Pereira dos
  Santos is a Brazilian film director, while Fabián Bielinsky is an Argentine film director"
  and then "Short answer: No" (gold: yes).

With ``settle_comparison`` one short call chooses the answer from the reply's background and
evidence alone; the reply is the draft.  The choice replies are written for the tests (the option
is measured on the tuning side, not on these questions).
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
    "Spirit of the West": "Spirit of the West were a Canadian folk rock band from Vancouver, active from 1983 to 2016.",
    "Big Pig": "Big Pig were an Australian funk, rock and pop band that existed from 1985 to 1991.",
    "Fabián Bielinsky": "Fabián Bielinsky (3 February 1959 – 28 June 2006) was an Argentine film director born in "
    "Buenos Aires.",
    "Nelson Pereira dos Santos": "Nelson Pereira dos Santos (born 22 October 1928) is a Brazilian film director.",
}
BANDS = "Which band was active the longest, Spirit of the West or Big Pig?"
BANDS_REPLY = (
    "Background: The documents provide information about the history and longevity of two bands: Spirit of the "
    "West and Big Pig. Spirit of the West was active from 1983 to 2016, while Big Pig existed from 1985 to 1991. "
    "The documents do not provide information about the longevity of Bamboo (band) or Type 346 Radar.\n"
    "Evidence: The documents do not provide information about the longevity of Bamboo (band) or Type 346 Radar.\n"
    "Answer: Big Pig was active the longest, from 1985 to 1991.\nShort answer: Big Pig"
)
DIRECTORS = "Are Fabián Bielinsky and Nelson Pereira dos Santos both directors?"
DIRECTORS_REPLY = (
    "Background: The documents provide information about Nelson Pereira dos Santos and Fabián Bielinsky, including "
    "their birth dates, nationality, and film careers. They mention that Nelson Pereira dos Santos is a Brazilian "
    "film director, while Fabián Bielinsky is an Argentine film director.\n"
    "Evidence: The documents do not provide information about Nelson Pereira dos Santos and Fabián Bielinsky's "
    "film careers. They only provide information about their birth dates and nationality.\n"
    "Answer: No, Fabián Bielinsky and Nelson Pereira dos Santos are not both directors.\nShort answer: No"
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
    llm = ScriptedLLM(_script("Which bands have been active the longest?", reply, choice, asked))
    return get_strategy("step-back", llm, retriever, k=2, lang="en", **opts).run(question), asked


def _notes(r: Result, kind: str) -> list[dict]:
    return [e.data for e in r.trace.of("note") if e.data.get("type") == kind]


def test_a_choice_is_read_from_the_replys_own_facts_and_the_reply_is_the_draft(retriever: Retriever) -> None:
    r, asked = _run(retriever, BANDS, BANDS_REPLY, "Spirit of the West", settle_comparison=True)
    assert r.short_answer == r.answer == "Spirit of the West"
    prompt, reversed_ = asked  # the options in either order
    assert "Options: Big Pig or Spirit of the West" in reversed_
    assert "Spirit of the West was active from 1983 to 2016, while Big Pig existed from 1985 to 1991" in prompt
    assert "Options: Spirit of the West or Big Pig" in prompt
    assert "Big Pig was active the longest" not in prompt  # the wrong conclusion is not shown
    (draft,) = r.trace.of("draft")
    assert draft.data["short_answer"] == "Big Pig" and draft.data["stage"] == "answer"
    assert draft.data["text"].startswith("Background: The documents provide information about the history")
    assert [c.id for c in r.citations]  # cited from the facts' passages
    assert _notes(r, "option_settled")[0]["chosen"] == "Spirit of the West"


def test_a_yes_no_comparison_settles_on_yes_or_no(retriever: Retriever) -> None:
    r, asked = _run(retriever, DIRECTORS, DIRECTORS_REPLY, "Yes", settle_comparison=True)
    assert r.short_answer == "Yes"
    assert "Options: yes or no" in asked[0]
    assert "Fabián Bielinsky is an Argentine film director" in asked[0]
    assert r.trace.of("draft")[0].data["short_answer"] == "No"


def test_a_choice_that_agrees_with_the_reply_leaves_it_whole(retriever: Retriever) -> None:
    r, asked = _run(retriever, DIRECTORS, DIRECTORS_REPLY, "No.", settle_comparison=True)
    assert len(asked) == 2 and r.short_answer == "No" and r.answer.startswith("Background:")
    assert r.trace.of("draft") == [] and _notes(r, "option_settled")[0]["chosen"] == "No"


def test_a_reply_naming_no_option_leaves_the_answer(retriever: Retriever) -> None:
    r, asked = _run(retriever, BANDS, BANDS_REPLY, "Both were active for a long time.", settle_comparison=True)
    assert len(asked) == 1 and r.short_answer == "Big Pig" and r.trace.of("draft") == []
    assert _notes(r, "option_settled")[0]["chosen"] is None


def test_a_choice_that_moves_with_the_order_of_the_options_leaves_the_answer(retriever: Retriever) -> None:
    r, asked = _run(retriever, BANDS, BANDS_REPLY, last_option, settle_comparison=True)
    assert len(asked) == 2 and r.short_answer == "Big Pig" and r.trace.of("draft") == []
    assert _notes(r, "option_settled")[0]["reply"] == "Big Pig | reversed: Spirit of the West"


def test_off_by_default_and_never_for_a_question_that_is_no_comparison(retriever: Retriever) -> None:
    for opts in ({}, {"settle_comparison": False}):
        r, asked = _run(retriever, BANDS, BANDS_REPLY, "Spirit of the West", **opts)
        assert asked == [] and r.short_answer == "Big Pig"
    reply = (
        "Background: Big Pig existed from 1985 to 1991 [1].\nAnswer: Big Pig was Australian.\nShort answer: Australia"
    )
    r, asked = _run(retriever, "Where was Big Pig from?", reply, "Big Pig", settle_comparison=True)
    assert asked == [] and r.short_answer == "Australia" and _notes(r, "option_settled") == []


def test_agreement_is_the_same_yes_or_no_or_the_one_option_named() -> None:
    yn = find_comparison(DIRECTORS)
    choice = find_comparison(BANDS)
    assert yn is not None and choice is not None
    assert agrees("No, they are not", "no", yn) and agrees("不是", "否", yn) and not agrees("Yes", "no", yn)
    assert agrees("Big Pig", "Big Pig", choice) and not agrees("Big Pig and Spirit of the West", "Big Pig", choice)
    assert not agrees("unknown", "Big Pig", choice)


def test_a_settle_option_that_is_not_a_boolean_is_refused() -> None:
    with pytest.raises(OptionsError, match="settle_comparison"):
        get_strategy("step-back", ScriptedLLM(["x"]), None, settle_comparison="sometimes")
