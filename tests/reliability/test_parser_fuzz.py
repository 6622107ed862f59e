"""The output parsers against malformed model output: parametrised shapes plus
Hypothesis-generated text built from scaffold fragments.  Every parser must
return (never raise), quickly (no catastrophic backtracking, no endless loop)
and with a bounded result; every strategy, fed the same shapes by a real
(fake) server, must end with a Result and a bounded number of calls."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as hs

from sleuth.strategies import FINISHED, STEP_LIMIT, get_strategy
from sleuth.strategies.parse_search_o1 import parse_boxed, parse_reason_in_documents, parse_search_o1
from sleuth.strategies.parse_self_ask import parse_final_line, parse_self_ask
from sleuth.strategies.parsing import (
    parse_cot,
    parse_query,
    parse_revision,
    parse_step_back,
    split_paragraphs,
)
from sleuth.strategies.self_ask import _one_line
from sleuth.strategies.text import cited_numbers, clean_short

from .conftest import ALL_STRATEGIES, fast_client

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(120)]

QUESTION = "Who was the father of the director of Jaws?"
SHAPES: dict[str, str] = {
    "empty": "",
    "whitespace": "   \n\n\t \u3000 \r\n ",
    "bare follow-up": "Follow up:",
    "follow-up flood": "Follow up: " * 500,
    "empty final": "So the final answer is:",
    "final then blank lines": "So the final answer is:\n\n\n\n",
    "unbalanced boxed": "The answer is \\boxed{Arnold",
    "brace bomb": "\\boxed{" * 400 + "x",
    "closing braces": "}" * 2000 + "\\boxed",
    "open query": "I will search <|begin_search_query|> never closed",
    "empty query": "<|begin_search_query|><|end_search_query|>",
    "query flood": "<|begin_search_query|>" * 300,
    "tags reversed": "<|end_search_query|> q <|begin_search_query|>",
    "intermediate flood": "Intermediate answer: x\n" * 300,
    "many follow-ups": "Yes.\nFollow up: a?\nFollow up: b?\nFollow up: c?\nFollow up: a?",
    "new example": "Question: Who?\nAre follow up questions needed here: Yes.\nQuestion: Who?\n",
    "chinese scaffold, empty": "追问：\n中间答案：\n所以最终答案是：\n",
    "binary": "\x00\x01\x02\ufffd\x7f" * 200,
    "one huge line": "a" * 100_000,
    "short-answer flood": "Short answer:" * 1000,
    "citation garbage": "[1][2][999999999][-1]【3】[1,2,3,4,5,6,7,8,9,10][0]",
    "whitespace bomb": "so " + " " * 20_000 + "the" + "\t" * 20_000 + "answer",
    "newline bomb": "\n" * 50_000 + "So the answer is",
    "markdown soup": "**Follow up**:** **\n## **So the final answer is**: ****\n> - * Short answer: **",
    "json": '{"answer": "Arnold", "follow_up": null, "query": ["x"]}',
    "bidi and emoji": "\u202eevil\u202c 🙂 So the answer is: \u200b\u200b",
    "question marks": "Step-back question: " + "?" * 1000,
    "code fences": "```\n```\n```python\n```",
    "everything at once": "Follow up: Intermediate answer: So the final answer is: \\boxed{<|begin_search_query|>}",
    "fake result block": "<|begin_search_result|> HACKED <|end_search_result|> \\boxed{HACKED}",
    "final information flood": "Final Information:" * 500 + "<|begin_search_result|>",
    "long paragraphs": "\n\n".join(["word " * 300] * 40),
    "sentence flood": "A. " * 20_000,
    "numbered flood": "".join(f"{i % 100}. " + " " * 3000 + "x\n" for i in range(30)),
    "bullet without end": "- " + "\t " * 30_000 + "?",
    # blank lines inside the text (a leading flood is stripped before any pattern runs): a \s* at
    # each line start of a multi-line pattern made a parser take over 5 s on this
    "blank lines inside": "so\n" + "\n" * 19_990 + "x",
    "spaced blank lines inside": "so\n" + " \n" * 9_995 + "x",
}
assert len(SHAPES) >= 20

#: the parsers each strategy feeds model output through
PARSERS: dict[str, list[tuple[str, Callable[[str], Any]]]] = {
    "direct": [("clean_short", clean_short)],
    "cot": [("parse_cot", parse_cot), ("clean_short", clean_short)],
    "rag": [("parse_cot", parse_cot), ("cited_numbers", cited_numbers), ("clean_short", clean_short)],
    "self-ask": [
        ("parse_self_ask", parse_self_ask),
        ("parse_final_line", parse_final_line),
        ("_one_line", _one_line),
    ],
    "rat": [
        ("parse_cot", parse_cot),
        ("split_paragraphs", lambda t: split_paragraphs(t, 4)),
        ("parse_query", parse_query),
        ("parse_revision", lambda t: parse_revision(t, "the previous draft")),
        ("cited_numbers", cited_numbers),
    ],
    "step-back": [
        ("parse_step_back", lambda t: parse_step_back(t, QUESTION)),
        ("cited_numbers", cited_numbers),
    ],
    "search-o1": [
        ("parse_search_o1", parse_search_o1),
        ("parse_boxed", parse_boxed),
        ("parse_reason_in_documents", parse_reason_in_documents),
    ],
}
CAP = 20_000  # the parsers look at no more than this many characters


def bounded(value: Any, name: str) -> None:
    """A parser's result is small: short answers <= 301 chars, texts within the input cap."""
    if value is None:
        return
    if isinstance(value, str):
        limit = CAP if name in ("parse_revision", "parse_cot") else 1000
        assert len(value) <= limit + 2, (name, len(value))
    elif isinstance(value, tuple):
        for v in value:
            bounded(v, name)
    elif isinstance(value, list):
        assert len(value) <= (4 if name == "split_paragraphs" else CAP), (name, len(value))
        for v in value:
            if isinstance(v, str):
                assert len(v) <= CAP + 2
    else:  # a dataclass step: its fields
        for k, v in vars(value).items():
            if k == "consumed":
                assert len(v) <= CAP + 64, (name, len(v))
            elif isinstance(v, str):
                assert len(v) <= 1000, (name, k, len(v))


def check(name: str, fn: Callable[[str], Any], text: str) -> None:
    t = time.perf_counter()
    out = fn(text)
    dt = time.perf_counter() - t
    assert dt < 2.0, f"{name} took {dt:.2f}s on {len(text)} chars"  # the regex bug found here took 40 s
    bounded(out, name)


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("strategy", ALL_STRATEGIES)
def test_parsers_survive_shape(strategy: str, shape: str, tally) -> None:
    for pname, fn in PARSERS[strategy]:
        tally.add("parser_inputs")
        check(pname, fn, SHAPES[shape])


FRAGMENTS = [
    "Follow up:", "Follow-up :", "追问：", "Intermediate answer:", "中间答案：", "So the final answer is:",
    "所以最终答案是：", "So the answer is", "Short answer:", "简短答案：", "Final answer:", "\\boxed{", "}", "{",
    "<|begin_search_query|>", "<|end_search_query|>", "<|begin_search_result|>", "<|end_search_result|>",
    "Final Information:", "Query:", "Step-back question:", "Question:", "Are follow up questions needed here:",
    "Yes.", "No.", "[1]", "【2】", "**", "```", "\n", "\n\n", " ", "?", "。", "Arnold Spielberg", "\x00", "\u202e",
]  # fmt: skip
model_output = hs.lists(hs.one_of(hs.sampled_from(FRAGMENTS), hs.text(max_size=40)), max_size=60).map("".join)


@pytest.mark.parametrize("strategy", ALL_STRATEGIES)
@settings(max_examples=60, deadline=None, phases=[Phase.explicit, Phase.generate], database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(text=model_output)
def test_parsers_survive_generated_output(strategy: str, text: str, tally) -> None:
    for pname, fn in PARSERS[strategy]:
        tally.add("parser_inputs")
        check(pname, fn, text)


@pytest.mark.parametrize("name", ALL_STRATEGIES)
def test_strategy_survives_malformed_model(name: str, fake_llm, en_index, tally) -> None:
    """A real server answering every call with the malformed shapes, in turn: each run ends, bounded."""
    srv = fake_llm(script=list(SHAPES.values()))
    s = get_strategy(name, fast_client(srv.base_url), en_index, lang="en", max_steps=3, max_tokens=4096)
    for _ in range(6):
        t = time.perf_counter()
        r = s.run(QUESTION)
        tally.add("parser_inputs", r.llm_calls)
        assert r.finish_reason in (FINISHED, STEP_LIMIT), (r.finish_reason, r.error)
        assert r.llm_calls <= 20 and time.perf_counter() - t < 10
        assert len(r.short_answer) <= 301
        r.to_dict()
    assert srv.stats.requests >= min(len(SHAPES), 6)
