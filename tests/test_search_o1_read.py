"""Search-o1's final reading pass (option ``final_read``), on the scripted model and a real index.

The question is HotpotQA-train's "Which genus has more species in it, Othonna or Stangeria?"
(gold: Othonna).  The replies are written after a failure qwen2.5-1.5b showed on a comparison of
the reporting split (the hybrid re-make, search-o1, 2026-12-03): one search found both options'
passages, Reason-in-Documents condensed them with an unrelated fact (the Stangeriaceae family's
"two living genera"), and the reasoning concluded ``\\boxed{Stangeria}``: "the sole species" read
as more than about 120.  RAG, reading the passages themselves, answered right.  With ``final_read``
the reasoning's answer is the draft and the reading of the question's own search plus the
reasoning's passages answers.  The passages are shortened from the question's paragraphs (the
Othonna count is written for the test).
"""

from __future__ import annotations

import re

import pytest

from conftest import titled_index
from sleuth.llm.base import GenParams, Message
from sleuth.llm.scripted import ScriptedLLM
from sleuth.search.base import Retriever
from sleuth.strategies import Result, get_strategy
from sleuth.strategies.options import OptionsError

OTHONNA, STANGERIA = "Othonna", "Stangeria"
PASSAGES = {
    OTHONNA: "Othonna is a genus of African plants in the sunflower family, with about 120 species.",
    STANGERIA: "Stangeria eriopus is a cycad endemic to southern Africa. It is the sole species in the genus "
    "Stangeria, most closely related to the Australian genus Bowenia.",
    "Stangeriaceae": "Stangeriaceae is the smallest family of cycads. The family contains only two living genera, "
    "Stangeria and Bowenia.",
}
QUESTION = "Which genus has more species in it, Othonna or Stangeria?"
REASONING = [
    " To answer this question, I need to search for the number of species in both Othonna and "
    "Stangeria. <|begin_search_query|> number of species genus Othonna Stangeria ",
    "Based on the search results, Stangeria has more species. Therefore, the final answer is \\boxed{Stangeria}. ",
]
RID = (
    "[1] Othonna is a genus of African plants with about 120 species.\n"
    "[2] Stangeria eriopus is the sole species in the genus Stangeria.\n"
    "[3] The Stangeriaceae family contains only two living genera, Stangeria and Bowenia."
)
READ = (
    "Othonna has about 120 species [{othonna}]; Stangeria eriopus is the sole species of Stangeria [{stangeria}]. "
    "120 species are more than one.\nSo the answer is: Othonna"
)


def _marked(reply: str, documents: str) -> str:
    """The reply with each genus's mark set to the number the reading's documents give it."""
    number = {t: re.search(rf"\[(\d+)\] \({t}\)", documents) for t in (OTHONNA, STANGERIA)}
    return reply.format(othonna=number[OTHONNA].group(1), stangeria=number[STANGERIA].group(1))


@pytest.fixture(scope="module")
def retriever(tmp_path_factory: pytest.TempPathFactory) -> Retriever:
    return titled_index(tmp_path_factory, "genera", PASSAGES)


def _script(read_reply: str, reads: list[str]):
    """The recorded replies: reasoning turns by the results inserted so far, Reason-in-Documents,
    and the reading pass (``read_reply``; each reading prompt is appended to ``reads``)."""

    def script(payload: str | list[Message], params: GenParams) -> str:
        if isinstance(payload, list):
            content = str(payload[-1]["content"])
            if content.startswith("Answer the question using only the documents below"):  # the reading pass
                reads.append(content)
                return _marked(read_reply, content)
            return RID
        return REASONING[payload.rsplit("Reasoning:", 1)[-1].count("<|end_search_result|>")]

    return script


def _run(retriever: Retriever, read: bool | None = True, read_reply: str = READ) -> tuple[Result, list[str]]:
    reads: list[str] = []
    opts = {} if read is None else {"final_read": read}
    llm = ScriptedLLM(_script(read_reply, reads))
    strategy = get_strategy("search-o1", llm, retriever, k=2, max_steps=4, lang="en", **opts)
    return strategy.run(QUESTION), reads


def test_the_reading_answers_from_the_passages_and_keeps_the_reasonings_answer_as_draft(
    retriever: Retriever,
) -> None:
    r, reads = _run(retriever)
    routes = [e.data["route"] for e in r.trace.of("search")]
    assert routes == ["search_o1", "original"]  # the question's own search comes after the reasoning's
    assert len(reads) == 1
    shown = next(e.data["shown"] for e in r.trace.of("repair") if e.data["name"] == "final_read")
    own = [p["id"] for p in r.trace.of("search")[-1].data["passages"]]
    assert shown[: len(own)] == own and len(shown) == len(set(shown))
    assert {f"{OTHONNA}#0", f"{STANGERIA}#0"} <= set(shown)
    assert "about 120 species" in reads[0] and "the sole species in the genus" in reads[0]
    draft = r.trace.of("draft")[0].data
    assert draft["short_answer"] == STANGERIA and draft["stage"] == "reasoning"
    assert r.short_answer == OTHONNA and r.finish_reason == "finished"
    assert [c.doc_id for c in r.citations][:2] == [OTHONNA, STANGERIA]  # in the order the answer uses them


def test_a_reading_that_finds_no_answer_leaves_the_reasonings(retriever: Retriever) -> None:
    r, reads = _run(retriever, True, "The documents do not say.\nSo the answer is: The documents do not say")
    assert len(reads) == 1 and r.short_answer == STANGERIA
    assert "read_abstained" in [e.data.get("type") for e in r.trace.of("note")]


def test_off_by_default_is_the_papers_method(retriever: Retriever) -> None:
    for read in (None, False):
        r, reads = _run(retriever, read)
        assert reads == [] and r.trace.of("draft") == [] and r.searches == 1
        assert r.short_answer == STANGERIA


def test_the_batch_reads_too(retriever: Retriever) -> None:
    reads: list[str] = []
    llm = ScriptedLLM(_script(READ, reads))
    s = get_strategy("search-o1", llm, retriever, k=2, max_steps=4, lang="en", final_read=True)
    results = s.run_batch([QUESTION, QUESTION], concurrency=2)
    assert [r.short_answer for r in results] == [OTHONNA, OTHONNA] and len(reads) == 2


def test_a_reading_option_that_is_not_a_boolean_is_refused() -> None:
    with pytest.raises(OptionsError, match="final_read"):
        get_strategy("search-o1", ScriptedLLM(["x"]), None, final_read="always")
