"""Search-o1's settled comparison (option ``settle_comparison``), on the scripted model and a real index.

The question is HotpotQA-train's "Were Daniel Mann and Todd Solondz both directors?" (gold: yes).
The replies are written after a failure qwen2.5-1.5b showed on a yes/no comparison of that kind
(the hybrid re-make, search-o1, 2026-12-03): two searches, one per director; Reason-in-Documents
states that each is a film director ("Daniel Mann was an American film and television director",
"Todd Solondz is an American independent film screenwriter and director"); the reasoning then
concludes "Since Daniel Mann is not a director ... \\boxed{No}".  With ``settle_comparison`` one
short call chooses the answer from those search results alone; the reasoning's answer is the
draft.  The choice replies are written for the tests too.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from conftest import last_option, titled_index
from sleuth.llm.base import GenParams, Message
from sleuth.llm.scripted import ScriptedLLM
from sleuth.search.base import Retriever
from sleuth.strategies import Result, get_strategy
from sleuth.strategies.options import OptionsError

PASSAGES = {
    "Daniel Mann": "Daniel Mann (August 8, 1912 – November 21, 1991) was an American film and television director "
    "born in Brooklyn.",
    "Todd Solondz": "Todd Solondz (born October 15, 1959) is an American independent film screenwriter and director.",
    "Peter Duffell": "Peter Duffell (10 July 1922 – 12 December 2017) was an English film and television director.",
}
QUESTION = "Were Daniel Mann and Todd Solondz both directors?"
REASONING = [
    " First, I need to find out if Daniel Mann is a director. <|begin_search_query|> Daniel Mann director ",
    "Next, I need to find out if Todd Solondz is a director. <|begin_search_query|> Todd Solondz director ",
    "Since Daniel Mann is not a director and Todd Solondz is a director, the answer is no, "
    "Daniel Mann and Todd Solondz were not both directors.\nFinal answer: \\boxed{No} ",
]
RID = {
    "Daniel Mann director": "[1] Daniel Mann was an American film and television director born in Brooklyn.",
    "Todd Solondz director": "[1] Todd Solondz is an American independent film screenwriter and director.",
}


@pytest.fixture(scope="module")
def retriever(tmp_path_factory: pytest.TempPathFactory) -> Retriever:
    return titled_index(tmp_path_factory, "directors", PASSAGES)


def _script(
    choice: str | Callable[[str], str], asked: list[str], reasoning: list[str] = REASONING
) -> Callable[..., str]:
    """Reasoning turns by the results inserted so far; Reason-in-Documents by its query; the
    choice call answers ``choice`` (each choice prompt is appended to ``asked``)."""

    def script(payload: str | list[Message], params: GenParams) -> str:
        if isinstance(payload, list):
            content = str(payload[-1]["content"])
            if content.startswith("Answer the question with exactly one of the options, using only the facts found"):
                asked.append(content)
                return choice(content) if callable(choice) else choice
            query = content.split("Search query:", 1)[1].splitlines()[0].strip()
            return RID[query]
        return reasoning[payload.rsplit("Reasoning:", 1)[-1].count("<|end_search_result|>")]

    return script


def _run(retriever: Retriever, choice: str | Callable[[str], str] = "Yes", **opts: object) -> tuple[Result, list[str]]:
    asked: list[str] = []
    strategy = get_strategy("search-o1", ScriptedLLM(_script(choice, asked)), retriever, k=2, lang="en", **opts)
    return strategy.run(QUESTION), asked


def _notes(r: Result, kind: str) -> list[dict]:
    return [e.data for e in r.trace.of("note") if e.data.get("type") == kind]


def test_the_choice_reads_the_search_results_and_keeps_the_reasonings_answer_as_draft(
    retriever: Retriever,
) -> None:
    r, asked = _run(retriever, settle_comparison=True)
    assert len(asked) == 2  # the options in either order
    assert "Options: no or yes" in asked[1] and asked[1].replace("no or yes", "yes or no") == asked[0]
    assert "Daniel Mann director: Daniel Mann was an American film and television director" in asked[0]
    assert "Todd Solondz is an American independent film screenwriter and director" in asked[0]
    assert "Options: yes or no" in asked[0] and QUESTION in asked[0]
    assert r.short_answer == "Yes" and r.answer == "Yes" and r.finish_reason == "finished"
    draft = r.trace.of("draft")[0].data
    assert draft["short_answer"] == "No" and draft["stage"] == "reasoning"
    assert _notes(r, "option_settled")[0]["chosen"] == "Yes"
    assert r.searches == 2 and r.citations  # the answer rests on the results it was chosen from


def test_off_by_default_is_the_papers_method(retriever: Retriever) -> None:
    for opts in ({}, {"settle_comparison": False}):
        r, asked = _run(retriever, **opts)
        assert asked == [] and r.trace.of("draft") == [] and r.short_answer == "No"


def test_a_reply_that_names_no_option_leaves_the_reasonings_answer(retriever: Retriever) -> None:
    r, asked = _run(retriever, "It depends on the definition.", settle_comparison=True)
    assert len(asked) == 1 and r.short_answer == "No" and r.trace.of("draft") == []
    assert _notes(r, "option_settled")[0]["chosen"] is None


def test_a_choice_question_settles_on_one_of_its_own_options(retriever: Retriever) -> None:
    asked: list[str] = []
    question = "Who was born first, Daniel Mann or Todd Solondz?"
    reasoning = [*REASONING[:2], "Todd Solondz was born in 1959, so he was born first. \\boxed{Todd Solondz} "]
    llm = ScriptedLLM(_script("Daniel Mann (born 1912)", asked, reasoning))
    r = get_strategy("search-o1", llm, retriever, k=2, lang="en", settle_comparison=True).run(question)
    assert "Options: Daniel Mann or Todd Solondz" in asked[0]
    assert r.short_answer == "Daniel Mann"


def test_a_question_that_compares_nothing_makes_no_extra_call(retriever: Retriever) -> None:
    asked: list[str] = []
    reasoning = [REASONING[0], "He was born in Brooklyn. \\boxed{Brooklyn} "]
    llm = ScriptedLLM(_script("Yes", asked, reasoning))
    r = get_strategy("search-o1", llm, retriever, k=2, lang="en", settle_comparison=True).run(
        "Where was Daniel Mann born?"
    )
    assert asked == [] and r.short_answer == "Brooklyn" and _notes(r, "option_settled") == []


def test_the_batch_settles_too(retriever: Retriever) -> None:
    asked: list[str] = []
    s = get_strategy("search-o1", ScriptedLLM(_script("Yes", asked)), retriever, k=2, lang="en", settle_comparison=True)
    results = s.run_batch([QUESTION, QUESTION], concurrency=2)
    assert [r.short_answer for r in results] == ["Yes", "Yes"] and len(asked) == 4


def test_a_choice_that_moves_with_the_order_of_the_options_settles_nothing(retriever: Retriever) -> None:
    r, asked = _run(retriever, last_option, settle_comparison=True)
    assert len(asked) == 2 and r.short_answer == "No" and r.trace.of("draft") == []
    note = _notes(r, "option_settled")[0]
    assert note["chosen"] is None and note["reply"] == "no | reversed: yes"


def test_a_settle_option_that_is_not_a_boolean_is_refused() -> None:
    with pytest.raises(OptionsError, match="settle_comparison"):
        get_strategy("search-o1", ScriptedLLM(["x"]), None, settle_comparison="sometimes")
