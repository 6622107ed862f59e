"""RAT on a replayed HotpotQA trace (docs/results/hotpotqa-open, question 5ac51c2855429924173fb5b5).

The committed run showed RAT losing what it found: step 1 retrieved "Henry M. Morris"
(the answer), later revisions shrank the notes to one sentence and brought back the draft's
"Hugh Ross", and the final pass, which saw only the notes, answered "John C. Whitcomb and
Hugh Ross".  The scripted model below replays those replies; the index holds the six
passages that run saw (HotpotQA's Wikipedia paragraphs, shortened).
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

QUESTION = (
    "The Genesis Flood is a book by John C. Whitcomb and what founder of the Creation Research Society "
    "and the Institute for Creation Research?"
)
DOCS = {
    "Henry M. Morris": "Henry Madison Morris (October 6, 1918 - February 25, 2006) was an American young Earth "
    "creationist. He was one of the founders of the Creation Research Society and the Institute for Creation "
    'Research. He is widely known for coauthoring "The Genesis Flood" with John C. Whitcomb.',
    "RATE project": "The RATE project was a research project conducted by the Creation Research Society and the "
    "Institute for Creation Research between 1997 and 2005 to assess radiometric dating.",
    "Creation Research Society": "The Creation Research Society (CRS) is a Christian research group that engages "
    "in creation science, founded in 1963.",
    "John C. Whitcomb": "John Clement Whitcomb, Jr. (born June 22, 1924) is an American theologian and young earth "
    'creationist, well known as the co-author with Henry M. Morris of "The Genesis Flood".',
    "Biblical Creation Society": "The Biblical Creation Society (BCS) is a United Kingdom-based creationary "
    "organisation founded in 1977 by Scottish minister Nigel M. de S. Cameron.",
    "The Genesis Flood": "The Genesis Flood: The Biblical Record and its Scientific Implications is a 1961 book by "
    "young earth creationists John C. Whitcomb and Henry M. Morris.",
}
FIRST_QUERY = "John C. Whitcomb, founder of the Creation Research Society and the Institute for Creation Research"
REPLIES = [
    # the draft (the model's memory is wrong: Hugh Ross), now ending in its own answer line
    "The Genesis Flood is written by John C. Whitcomb.\n\n"
    "The founder of the Creation Research Society and the Institute for Creation Research is Hugh Ross.\n"
    "So the answer is: Hugh Ross",
    FIRST_QUERY,  # query 1
    "The Genesis Flood is a book by John C. Whitcomb and Henry M. Morris [1].",  # revise 1: the prefix shrinks
    FIRST_QUERY,  # query 2 repeats query 1, as the run's queries 1 and 5 did
    "The Genesis Flood is written by John C. Whitcomb. Hugh Ross is the founder of the Creation Research "
    "Society and the Institute for Creation Research.",  # revise 2: the draft's error is back, [1] is gone
    "The Genesis Flood is by John C. Whitcomb and Henry M. Morris, one of the founders of the Creation Research "
    "Society and the Institute for Creation Research [1].\nShort answer: Henry M. Morris",
]


@pytest.fixture(scope="module")
def creation_index(tmp_path_factory: pytest.TempPathFactory):
    d = tmp_path_factory.mktemp("rat")
    rows = [{"id": title, "title": title, "text": text} for title, text in DOCS.items()]
    (d / "docs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return open_retriever(str(d / "docs.jsonl"), cache_dir=d / "idx")


def _run(index):
    llm = ScriptedLLM(REPLIES)
    return llm, get_strategy("rat", llm, index, k=3).run(QUESTION)


def test_the_final_pass_reads_every_passage_the_revisions_saw(creation_index) -> None:
    llm, r = _run(creation_index)
    steps = [e.data["step"] for e in r.trace.of("llm")]
    assert steps == ["draft", "query 1", "revise 1", "query 2", "revise 2", "final"]
    final_prompt = str(llm.calls[-1].payload)
    # the passage step 1 found and the revisions dropped is in front of the final pass, under its step-1 number
    step1 = r.trace.of("revision")[0].data["passages"]
    assert step1[0].startswith("Henry M. Morris")
    assert "[1] (Henry M. Morris)" in final_prompt
    for title in DOCS:
        assert f"({title})" in final_prompt
    assert r.short_answer == "Henry M. Morris"
    # its [1] mark is grounded: the answer cites the Morris passage
    assert [c.id.split("#")[0] for c in r.citations][:1] == ["Henry M. Morris"]


def test_a_repeated_query_brings_passages_no_step_has_shown(creation_index) -> None:
    _, r = _run(creation_index)
    first, second = (set(e.data["passages"]) for e in r.trace.of("revision"))
    assert len(first) == 3 and len(second) == 3 and not first & second


def test_the_draft_keeps_its_own_short_answer_and_is_scored(creation_index) -> None:
    _, r = _run(creation_index)
    (draft,) = r.trace.of("draft")
    assert draft.data["short_answer"] == "Hugh Ross"
    # the answer line is not a paragraph to revise
    assert draft.data["paragraphs"] == [
        "The Genesis Flood is written by John C. Whitcomb.",
        "The founder of the Creation Research Society and the Institute for Creation Research is Hugh Ross.",
    ]
    item = Item(id="5ac51c2855429924173fb5b5", question=QUESTION, answers=["Henry Madison Morris"])
    s = score(item, r.to_dict())
    assert s["draft_score"] == 0.0 and s["f1"] > 0.5


def test_a_draft_without_an_answer_line_gets_one_extraction_call(creation_index) -> None:
    replies = [REPLIES[0].rsplit("\n", 1)[0], "Hugh Ross", *REPLIES[1:]]
    llm = ScriptedLLM(replies)
    r = get_strategy("rat", llm, creation_index, k=3).run(QUESTION)
    assert [e.data["step"] for e in r.trace.of("llm")][:2] == ["draft", "short answer"]
    assert r.trace.of("draft")[0].data["short_answer"] == "Hugh Ross"
    assert "parse_fallback" in [e.data.get("type") for e in r.trace.of("note")]


def test_records_made_before_drafts_had_a_short_answer_have_no_draft_score() -> None:
    old = {"answer": "x", "short_answer": "x", "trace": [{"kind": "draft", "data": {"text": "notes"}}]}
    assert draft_reply(old) is None
    assert "draft_score" not in score(Item(id="q", question="q?", answers=["x"]), old)


def test_sources_number_each_passage_once() -> None:
    from sleuth.search.base import Passage

    a, b, c = (Passage(id=i, text=i) for i in "abc")
    s = Sources()
    assert s.add([a, b]) == [1, 2]
    assert s.prefer_new([a, c, b], 2) == [c, a]
    assert s.add([c, a]) == [3, 1]
    assert [p.id for p in s.passages] == ["a", "b", "c"]
    # the final pass: the cited ones first, then the earliest, shown in number order
    assert s.chosen([3], 2) == ([a, c], [1, 3])
    assert s.chosen([9, 2], 1) == ([b], [2])  # a number no passage has is ignored
    assert s.chosen([], 5) == ([a, b, c], [1, 2, 3])


def test_a_run_whose_searches_find_nothing_says_so_to_the_final_pass(tmp_path) -> None:
    """Every search of the run comes back empty (the scope hides the corpus): the revisions are
    skipped, and the final pass is told there are no documents rather than shown an empty list."""
    from sleuth.search.base import Filters

    (tmp_path / "docs.jsonl").write_text(json.dumps({"id": "x", "title": "X", "text": "x", "acl": "hr"}) + "\n")
    index = open_retriever(str(tmp_path / "docs.jsonl"), cache_dir=tmp_path / "idx")
    llm = ScriptedLLM([REPLIES[0], FIRST_QUERY, FIRST_QUERY, "Hugh Ross.\nShort answer: Hugh Ross"])
    r = get_strategy("rat", llm, index, k=3).run(QUESTION, filters=Filters.parse(["acl=finance"]))
    assert [e.data.get("reason") for e in r.trace.of("revision")] == ["no passages", "no passages"]
    assert "(no documents found)" in str(llm.calls[-1].payload)
    assert r.short_answer == "Hugh Ross" and not r.citations


def test_the_cli_shows_the_drafts_own_answer(creation_index) -> None:
    from rich.console import Console

    from sleuth.cli.ask import StepPrinter

    out = Console(record=True, width=200)
    get_strategy("rat", ScriptedLLM(REPLIES), creation_index, k=3).run(QUESTION, listeners=[StepPrinter(out)])
    assert "draft 2 paragraphs · its answer: Hugh Ross" in out.export_text()
