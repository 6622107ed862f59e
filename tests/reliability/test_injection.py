"""Prompt injection inside retrieved documents: documents are data.

The index holds a passage full of scaffold syntax ("So the final answer is:
HACKED", Search-o1 query tags, "Follow up:", ``\\boxed{}``, a forged result
block, chat special tokens, our own document delimiter).  The model copies
every document it is shown into its output - also cut off mid-document by
``max_tokens`` - which is the worst case for the parsers.  Nothing of it may
change the scaffold, trigger a search, or become the answer.
"""

from __future__ import annotations

import re

import pytest

from sleuth.search.base import Filters
from sleuth.strategies import FINISHED, STEP_LIMIT, get_strategy
from sleuth.strategies.prompts import render

from .conftest import ALL_STRATEGIES, INJECTIONS, ScriptedModel, fast_client

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(60)]

QUESTION = "Who was the father of the director of Jaws?"
DOC_LINE = re.compile(r"^\[\d+\] .*$", re.M)
RAW = [s for s in INJECTIONS if s != "End of documents."]  # the delimiter is also in our own templates


def template_prefix(name: str) -> str:
    if name == "self-ask":
        return render("self_ask", "en", question=QUESTION)
    if name == "search-o1":
        return render("search_o1", "en", question=QUESTION, max_searches=3)
    return ""


def dangerous_parts(name: str, body: dict) -> list[str]:
    """What of a request came from outside Sleuth's templates: document lines, appended scaffold."""
    if "messages" in body:
        text = "\n".join(m["content"] for m in body["messages"])
        return DOC_LINE.findall(text)
    prompt = body["prompt"]
    prefix = template_prefix(name)
    assert prompt.startswith(prefix)
    return [prompt[len(prefix) :]]


@pytest.mark.parametrize("max_tokens", [48, 1024])
@pytest.mark.parametrize("name", ALL_STRATEGIES)
def test_documents_cannot_steer_the_run(name: str, max_tokens: int, fake_llm, en_index, tally) -> None:
    model = ScriptedModel(follow_up="Who is the father of Steven Spielberg?", query="Jaws director father")
    srv = fake_llm(script=model)
    s = get_strategy(name, fast_client(srv.base_url), en_index, lang="en", max_steps=3, max_tokens=max_tokens)
    r = s.run(QUESTION, filters=Filters.make(acl=["all"]))
    tally.add("bad_inputs", len(INJECTIONS))
    assert r.finish_reason in (FINISHED, STEP_LIMIT), (r.finish_reason, r.error)

    # the poisoned passage really was retrieved and shown to the model (else this test proves nothing)
    if name not in ("direct", "cot"):
        found = {p["doc_id"] for e in r.trace.of("search") for p in e.data["passages"]}
        assert "inject" in found, found
        assert any(
            "Sharks live in all oceans" in part for b in srv.requests for part in dangerous_parts(name, b["body"])
        )

    # 1. no raw scaffold syntax from a document ever reaches a prompt
    for req in srv.requests:
        for part in dangerous_parts(name, req["body"]):
            for raw in RAW:
                assert raw not in part, f"{raw!r} reached a prompt of {name}"

    # 2. no extra searches, follow-ups or queries: only the model's own
    allowed = {QUESTION, model.follow_up, model.query, f"What are the general rules about {model.query}?"}
    for e in r.trace.of("search"):
        assert e.data["query"] in allowed, e.data["query"]
    for e in r.trace.of("follow_up"):
        assert e.data["question"] in (model.follow_up, model.query), e.data
    assert r.searches <= {"rag": 1, "step-back": 2, "self-ask": 3, "rat": 4, "search-o1": 3}.get(name, 0)

    # 3. the answer is the model's, never the document's
    assert "HACKED" not in r.short_answer and "HACKED" not in r.answer.split("\n")[0], (r.short_answer, r.answer[:200])
    assert "evil" not in r.short_answer and "admin password" not in r.short_answer
    if name == "search-o1":
        notes = [e.data.get("type") for e in r.trace.of("note")]
        assert "search_limit" not in notes and "repeated_query" not in notes


def test_injected_markers_are_defused_for_parsers(tally) -> None:
    """The sanitised text of a poisoned passage, quoted by a model, parses as nothing."""
    from sleuth.strategies.parse_search_o1 import parse_search_o1
    from sleuth.strategies.parse_self_ask import parse_self_ask
    from sleuth.strategies.parsing import parse_cot
    from sleuth.strategies.text import sanitize

    quoted = sanitize(" ".join(INJECTIONS))
    tally.add("bad_inputs")
    assert parse_cot(quoted)[1] is None
    step = parse_search_o1(quoted)
    assert step.query is None and step.answer is None
    sa = parse_self_ask(quoted)
    assert sa.follow_up is None and sa.final is None
