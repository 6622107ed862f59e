"""Search-o1's final reading pass (option ``final_read``), on the scripted model and a real index.

The replies are qwen2.5-1.5b's on the HotpotQA question "Who had the best singles ranking,
Roberta Vinci or Jorge Lozano?" (the hybrid re-make, search-o1, 2026-12-03): one search found
both players' passages, Reason-in-Documents condensed them with three unrelated facts (Flavia
Pennetta's "World No. 1 in doubles" among them), and the reasoning concluded
``\\boxed{Jorge Lozano}``: World No. 51 read as better than No. 7.  RAG, reading the passages
themselves, answered Roberta Vinci.  With ``final_read`` the reasoning's answer is the draft and
the reading of the question's own search plus the reasoning's passages answers.  The passages
are the question's paragraphs, cut to their first sentences.
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

VINCI, LOZANO = "Roberta Vinci", "Jorge Lozano"
PASSAGES = {
    VINCI: "Roberta Vinci (born 18 February 1983) is an Italian tennis player. Up until 6 April 2015, she held "
    "the position of World No. 1 in doubles, while reaching a career-high of World No. 7 in singles in May 2016.",
    LOZANO: "Jorge Lozano (born 17 May 1963 in San Luis Potosí) is a retired professional tennis player from "
    "Mexico. He reached his highest doubles ranking of World No. 4 in August 1988. His highest singles "
    "ranking was World No. 51, achieved the following month.",
    "Flavia Pennetta": "Flavia Pennetta is an Italian former tennis player. She became the first Italian woman "
    "to reach World No. 1 in doubles, on 28 February 2011.",
}
QUESTION = "Who had the best singles ranking, Roberta Vinci or Jorge Lozano?"
REASONING = [
    " To answer this question, I need to search for the best singles ranking for both Roberta Vinci and "
    "Jorge Lozano. <|begin_search_query|> best singles ranking Roberta Vinci Jorge Lozano ",
    "Based on the search results, Jorge Lozano had the best singles ranking. Therefore, the final answer is "
    "\\boxed{Jorge Lozano}. ",
]
RID = (
    "[1] Roberta Vinci's best singles ranking was World No. 7 in May 2016.\n"
    "[2] Jorge Lozano's best singles ranking was World No. 51, achieved the following month.\n"
    "[3] Flavia Pennetta's best singles ranking was World No. 1 in doubles on 28 February 2011."
)
READ = (
    "Roberta Vinci reached World No. 7 in singles [{vinci}]; Jorge Lozano's best was World No. 51 [{lozano}]. "
    "A lower number is a better ranking.\nSo the answer is: Roberta Vinci"
)


def _marked(reply: str, documents: str) -> str:
    """The reply with each player's mark set to the number the reading's documents give them."""
    number = {t: re.search(rf"\[(\d+)\] \({t}", documents) for t in (VINCI, LOZANO)}
    return reply.format(vinci=number[VINCI].group(1), lozano=number[LOZANO].group(1))


@pytest.fixture(scope="module")
def retriever(tmp_path_factory: pytest.TempPathFactory) -> Retriever:
    return titled_index(tmp_path_factory, "tennis", PASSAGES)


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
    shown = next(e.data["shown"] for e in r.trace.of("note") if e.data.get("type") == "final_read")
    own = [p["id"] for p in r.trace.of("search")[-1].data["passages"]]
    assert shown[: len(own)] == own and len(shown) == len(set(shown))
    assert {f"{VINCI}#0", f"{LOZANO}#0"} <= set(shown)
    assert "World No. 7 in singles" in reads[0] and "World No. 51" in reads[0]
    draft = r.trace.of("draft")[0].data
    assert draft["short_answer"] == LOZANO and draft["stage"] == "reasoning"
    assert r.short_answer == VINCI and r.finish_reason == "finished"
    assert [c.doc_id for c in r.citations][:2] == [VINCI, LOZANO]  # in the order the answer uses them


def test_a_reading_that_finds_no_answer_leaves_the_reasonings(retriever: Retriever) -> None:
    r, reads = _run(retriever, True, "The documents do not say.\nSo the answer is: The documents do not say")
    assert len(reads) == 1 and r.short_answer == LOZANO
    assert "read_abstained" in [e.data.get("type") for e in r.trace.of("note")]


def test_off_by_default_is_the_papers_method(retriever: Retriever) -> None:
    for read in (None, False):
        r, reads = _run(retriever, read)
        assert reads == [] and r.trace.of("draft") == [] and r.searches == 1
        assert r.short_answer == LOZANO


def test_the_batch_reads_too(retriever: Retriever) -> None:
    reads: list[str] = []
    llm = ScriptedLLM(_script(READ, reads))
    s = get_strategy("search-o1", llm, retriever, k=2, max_steps=4, lang="en", final_read=True)
    results = s.run_batch([QUESTION, QUESTION], concurrency=2)
    assert [r.short_answer for r in results] == [VINCI, VINCI] and len(reads) == 2


def test_a_reading_option_that_is_not_a_boolean_is_refused() -> None:
    with pytest.raises(OptionsError, match="final_read"):
        get_strategy("search-o1", ScriptedLLM(["x"]), None, final_read="always")
