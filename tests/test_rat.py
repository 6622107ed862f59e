"""RAT on HotpotQA-train 5a75b7bd5542992d0ec05fec, replayed on the scripted model.

The paper's steps: a draft from memory ("The Big Shot", another 1942 Bogart film; gold Casablanca),
then per paragraph one query, a search and a revision of the growing prefix; the last revision is
the answer.  The index holds six of the question's HotpotQA paragraphs, shortened.
"""

from __future__ import annotations

import json

import pytest

from sleuth.eval.items import Item
from sleuth.eval.metrics import draft_reply, score
from sleuth.llm.scripted import ScriptedLLM
from sleuth.search import open_retriever
from sleuth.strategies import get_strategy
from sleuth.strategies.rat import Sources

QUESTION = "Harold Brent Wallis as producer and Humphrey Bogart as actor collaborated to make what 1942 film?"
DOCS = {
    "Hal B. Wallis": "Harold Brent Wallis (October 19, 1898 – October 5, 1986) was an American film producer. He is best "
    'remembered for producing "Casablanca" (1942) and "True Grit" (1969), along with many other major films '
    "featuring such film stars as Humphrey Bogart.",
    "Humphrey Bogart": "Humphrey DeForest Bogart (December 25, 1899 – January 14, 1957) was an American screen and "
    'stage actor whose performances in 1940s films noir such as "The Maltese Falcon", "Casablanca", and "The Big '
    'Sleep" earned him status as a cultural icon.',
    "The Big Shot": "The Big Shot (1942) is an American film noir crime drama film starring Humphrey Bogart as a "
    "crime boss and Irene Manning as the woman he falls in love with.",
    "Play it again, Sam": '"Play it again, Sam" is a misquotation of Rick Blaine\'s (played by Humphrey Bogart) '
    'exclamation to Sam from the 1942 film "Casablanca".',
    "Dark Victory": "Dark Victory is a 1939 American drama film directed by Edmund Goulding, starring Bette Davis and "
    "featuring George Brent, Humphrey Bogart and Ronald Reagan.",
    "Racket Busters": "Racket Busters is a 1938 film about crime in the trucking industry starring Humphrey Bogart "
    "and George Brent.",
}
FIRST_QUERY = "Harold Brent Wallis, producer of the 1942 film with Humphrey Bogart as actor"
REPLIES = [
    # the draft (the model's memory is wrong: The Big Shot), ending in its own answer line
    "Harold Brent Wallis was an American film producer.\n\n"
    "The 1942 film he made with Humphrey Bogart as actor is The Big Shot.\n"
    "So the answer is: The Big Shot",
    FIRST_QUERY,  # query 1
    "Harold Brent Wallis produced Casablanca (1942) [1].",  # revise 1: the prefix shrinks
    "Humphrey Bogart 1942 film",  # query 2
    "Harold Brent Wallis produced Casablanca (1942) [1]. The 1942 film he made with Humphrey Bogart as actor is "
    "Casablanca [1].\nSo the answer is: Casablanca",  # revise 2
]
#: the paper's prompt sequence: draft, then per paragraph a query and a revision
PAPER_STEPS = ["draft", "query 1", "revise 1", "query 2", "revise 2"]


@pytest.fixture(scope="module")
def film_index(tmp_path_factory: pytest.TempPathFactory):
    d = tmp_path_factory.mktemp("rat")
    rows = [{"id": title, "title": title, "text": text} for title, text in DOCS.items()]
    (d / "docs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return open_retriever(str(d / "docs.jsonl"), cache_dir=d / "idx")


def _run(index):
    llm = ScriptedLLM(REPLIES)
    return llm, get_strategy("rat", llm, index, k=3).run(QUESTION)


@pytest.mark.parametrize("mode", ["default", "paper"])
def test_the_last_revision_is_the_answer(film_index, mode: str) -> None:
    llm = ScriptedLLM(REPLIES)
    r = get_strategy("rat", llm, film_index, k=3, mode=mode).run(QUESTION)
    assert [e.data["step"] for e in r.trace.of("llm")] == PAPER_STEPS and len(llm.calls) == len(REPLIES)
    assert r.answer == REPLIES[-1] and r.short_answer == "Casablanca"
    revs = r.trace.of("revision")
    assert [len(e.data["passages"]) for e in revs] == [3, 3] and revs[0].data["passages"][0].startswith("Hal B.")
    assert "--- before" in revs[0].data["diff"]


def test_a_revision_without_an_answer_line_gets_the_extraction_call_only_with_the_repair(film_index) -> None:
    replies = [*REPLIES[:-1], "Harold Brent Wallis produced Casablanca (1942) [1].", "Casablanca"]
    llm = ScriptedLLM(replies)
    r = get_strategy("rat", llm, film_index, k=3).run(QUESTION)
    assert [e.data["step"] for e in r.trace.of("llm")] == [*PAPER_STEPS, "short answer"]
    assert r.short_answer == "Casablanca" and [e.data["name"] for e in r.trace.of("repair")] == [
        "extract_short",
        "grounding",
    ]
    paper = get_strategy("rat", ScriptedLLM(replies), film_index, k=3, extract_short=False).run(QUESTION)
    assert [e.data["step"] for e in paper.trace.of("llm")] == PAPER_STEPS
    assert [e.data["name"] for e in paper.trace.of("repair")] == ["grounding"]
    assert paper.short_answer == "Harold Brent Wallis produced Casablanca (1942)"  # the last line, as written


def test_the_draft_keeps_its_own_short_answer_and_is_scored(film_index) -> None:
    _, r = _run(film_index)
    (draft,) = r.trace.of("draft")
    assert draft.data["short_answer"] == "The Big Shot"
    # the answer line is not a paragraph to revise
    assert draft.data["paragraphs"] == [
        "Harold Brent Wallis was an American film producer.",
        "The 1942 film he made with Humphrey Bogart as actor is The Big Shot.",
    ]
    item = Item(id="5a75b7bd5542992d0ec05fec", question=QUESTION, answers=["Casablanca"])
    s = score(item, r.to_dict())
    assert s["draft_score"] == 0.0 and s["f1"] == 1.0


def test_a_draft_without_an_answer_line_gets_one_extraction_call(film_index) -> None:
    replies = [REPLIES[0].rsplit("\n", 1)[0], "The Big Shot", *REPLIES[1:]]
    llm = ScriptedLLM(replies)
    r = get_strategy("rat", llm, film_index, k=3).run(QUESTION)
    assert [e.data["step"] for e in r.trace.of("llm")][:2] == ["draft", "short answer"]
    assert r.trace.of("draft")[0].data["short_answer"] == "The Big Shot"
    assert "extract_short" in [e.data["name"] for e in r.trace.of("repair")]


def test_records_made_before_drafts_had_a_short_answer_have_no_draft_score() -> None:
    old = {"answer": "x", "short_answer": "x", "trace": [{"kind": "draft", "data": {"text": "notes"}}]}
    assert draft_reply(old) is None
    assert "draft_score" not in score(Item(id="q", question="q?", answers=["x"]), old)


def test_sources_number_each_passage_once() -> None:
    from sleuth.search.base import Passage

    a, b, c = (Passage(id=i, text=i) for i in "abc")
    s = Sources()
    assert s.add([a, b]) == [1, 2] and s.add([c, a]) == [3, 1]
    assert list(s) == ["a", "b", "c"] and [p.text for p in s.values()] == ["a", "b", "c"]


def test_a_run_whose_searches_find_nothing_keeps_the_draft(tmp_path) -> None:
    """Every search of the run comes back empty (the scope hides the corpus): the revisions are
    skipped and the draft's paragraphs are the answer (its short answer read by ``extract_short``)."""
    from sleuth.search.base import Filters

    (tmp_path / "docs.jsonl").write_text(json.dumps({"id": "x", "title": "X", "text": "x", "acl": "hr"}) + "\n")
    index = open_retriever(str(tmp_path / "docs.jsonl"), cache_dir=tmp_path / "idx")
    llm = ScriptedLLM([REPLIES[0], FIRST_QUERY, FIRST_QUERY, "The Big Shot"])
    r = get_strategy("rat", llm, index, k=3).run(QUESTION, filters=Filters.parse(["acl=finance"]))
    assert [e.data.get("reason") for e in r.trace.of("revision")] == ["no passages", "no passages"]
    assert r.short_answer == "The Big Shot" and not r.citations and len(llm.calls) == 4


def test_the_cli_shows_the_drafts_own_answer(film_index) -> None:
    from rich.console import Console

    from sleuth.cli.ask import StepPrinter

    out = Console(record=True, width=200)
    get_strategy("rat", ScriptedLLM(REPLIES), film_index, k=3).run(QUESTION, listeners=[StepPrinter(out)])
    assert "draft 2 paragraphs · its answer: The Big Shot" in out.export_text()
