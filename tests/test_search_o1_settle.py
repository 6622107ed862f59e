"""Search-o1's settled comparison (option ``settle_comparison``), on the scripted model and a real index.

The replies are qwen2.5-1.5b's on the HotpotQA question "Are Fabián Bielinsky and Nelson Pereira
dos Santos both directors?" (the hybrid re-make, search-o1, 2026-12-03): two searches, one per
director; Reason-in-Documents wrote "Fabián Bielinsky is an Argentine film director" and "Nelson
Pereira dos Santos is a Brazilian film director"; the reasoning then concluded "Since Fabián
Bielinsky is not a director ... \\boxed{No}" (gold: yes).  With ``settle_comparison`` one short
call chooses the answer from those search results alone; the reasoning's answer is the draft.
The choice replies are written for the tests (the option is measured on the tuning side, not
on these questions).
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
    "Fabián Bielinsky": "Fabián Bielinsky (3 February 1959 – 28 June 2006) was an Argentine film director born in "
    "Buenos Aires.",
    "Nelson Pereira dos Santos": "Nelson Pereira dos Santos (born 22 October 1928) is a Brazilian film director.",
    "Olivier Assayas": "Olivier Assayas (born 25 January 1955) is a French film director, screenwriter and critic.",
}
QUESTION = "Are Fabián Bielinsky and Nelson Pereira dos Santos both directors?"
REASONING = [
    " First, I need to find out if Fabián Bielinsky is a director. <|begin_search_query|> Fabián Bielinsky director ",
    "Next, I need to find out if Nelson Pereira dos Santos is a director. <|begin_search_query|> Nelson Pereira "
    "dos Santos director ",
    "Since Fabián Bielinsky is not a director and Nelson Pereira dos Santos is a director, the answer is no, "
    "Fabián Bielinsky and Nelson Pereira dos Santos are not both directors.\nFinal answer: \\boxed{No} ",
]
RID = {
    "Fabián Bielinsky director": "[1] Fabián Bielinsky is an Argentine film director born in Buenos Aires.",
    "Nelson Pereira dos Santos director": "[1] Nelson Pereira dos Santos is a Brazilian film director.",
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
    assert "Fabián Bielinsky director: Fabián Bielinsky is an Argentine film director" in asked[0]
    assert "Nelson Pereira dos Santos is a Brazilian film director" in asked[0]
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
    question = "Who was born first, Fabián Bielinsky or Nelson Pereira dos Santos?"
    reasoning = [*REASONING[:2], "Fabián Bielinsky was born in 1959, so he was born first. \\boxed{Fabián Bielinsky} "]
    llm = ScriptedLLM(_script("Nelson Pereira dos Santos (born 1928)", asked, reasoning))
    r = get_strategy("search-o1", llm, retriever, k=2, lang="en", settle_comparison=True).run(question)
    assert "Options: Fabián Bielinsky or Nelson Pereira dos Santos" in asked[0]
    assert r.short_answer == "Nelson Pereira dos Santos"


def test_a_question_that_compares_nothing_makes_no_extra_call(retriever: Retriever) -> None:
    asked: list[str] = []
    reasoning = [REASONING[0], "He was born in Buenos Aires. \\boxed{Buenos Aires} "]
    llm = ScriptedLLM(_script("Yes", asked, reasoning))
    r = get_strategy("search-o1", llm, retriever, k=2, lang="en", settle_comparison=True).run(
        "Where was Fabián Bielinsky born?"
    )
    assert asked == [] and r.short_answer == "Buenos Aires" and _notes(r, "option_settled") == []


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
