"""Self-Ask (Press et al.): the paper's loop and its repairs, on the scripted model and a real index.

The questions are HotpotQA-train's (a tuning split); the replies are written in the shape of
qwen2.5-1.5b's recorded ones, and the passages are shortened from the questions' HotpotQA paragraphs.
"""

from __future__ import annotations

import json
from itertools import pairwise

import pytest

from sleuth.llm.base import GenParams, Message
from sleuth.llm.scripted import ScriptedLLM
from sleuth.search import open_retriever
from sleuth.search.base import Filters, Retriever
from sleuth.strategies import Result, get_strategy

SCOPE = Filters.parse(["acl=all"])
PASSAGES = {
    "Yanka Dyagileva": 'Yana "Yanka" Stanislavovna Dyagileva (4 September 1966 – 9 May 1991) was a Russian poet and '
    "singer-songwriter.",
    "Alexander Bashlachev": "Alexander Nickolaevich Bashlachev (May 27, 1960 – February 17, 1988) was a Soviet poet, "
    "singer-songwriter and guitarist, one of the most influential performers in Russian rock music.",
    "Yegor Letov": 'Igor Fyodorovich "Yegor" Letov (10 September 1964 – 19 February 2008) was a Russian poet and '
    "musician who performed with Yanka Dyagileva.",
    "Stangeria": "Stangeria eriopus is a cycad endemic to southern Africa. It is the sole species in the genus "
    "Stangeria, most closely related to the Australian genus Bowenia.",
    "Senecio": "Senecio is a genus of flowering plants in the daisy family and one of the largest genera of "
    "flowering plants, with more than 1,000 species.",
    "Stephen R. Donaldson": "Stephen Reeder Donaldson (born May 13, 1947) is an American fantasy, science fiction and "
    "mystery novelist.",
    "Michael Moorcock": "Michael John Moorcock (born 18 December 1939) is an English writer, primarily of science "
    "fiction and fantasy.",
    "Baure, Nigeria": "Baure is a Local Government Area in Katsina State, Nigeria, sharing a border with the "
    "Republic of Niger. Its headquarters are in the town of Baure in the northwest of the area at .",
    "South Africa": "The name ``South Africa ''is derived from the country's geographic location at the southern "
    "tip of Africa.",
    "Nigeria": 'The name "" was taken from the Niger River running through the country. This name was coined in the '
    "late 19th century by British journalist Flora Shaw.",
    "扬卡·季亚吉列娃": "扬卡·季亚吉列娃（1966年9月4日－1991年5月9日）是俄罗斯诗人、创作歌手。",
    "亚历山大·巴什拉乔夫": "亚历山大·巴什拉乔夫（1960年5月27日－1988年2月17日）是苏联诗人、创作歌手和吉他手。",
}


@pytest.fixture(scope="module")
def retriever(tmp_path_factory: pytest.TempPathFactory) -> Retriever:
    return _titled_index(tmp_path_factory, "corpus", PASSAGES)


def _titled_index(tmp_path_factory: pytest.TempPathFactory, name: str, docs: dict[str, str]) -> Retriever:
    """A real index of {title: text} passages, each id its title, all under ``acl=all``."""
    path = tmp_path_factory.mktemp(name) / "docs.jsonl"
    rows = [{"id": t, "title": t, "text": x, "acl": "all"} for t, x in docs.items()]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return open_retriever(str(path), cache_dir=tmp_path_factory.mktemp(f"{name}-idx"))


def _model_part(prompt: str) -> str:
    return prompt.rsplit("Are follow up questions needed here:", 1)[-1]


QUESTION = "Who was born first, Yanka Dyagileva or Alexander Bashlachev?"
FOLLOW_UPS = [
    " Yes.\nFollow up: When was Yanka Dyagileva born?\n",
    "Follow up: When was Alexander Bashlachev born?\n",
    "So the final answer is: Alexander Bashlachev\n",
]


def _script(follow_ups: list[str], prompts: list[str]):
    def script(payload: str | list[Message], params: GenParams) -> str:
        if isinstance(payload, list):  # the extraction call (and the final reading's, a chat call)
            asked = str(payload[-1]["content"])
            if "So the answer is" in asked or ("Documents" in asked and "Yanka" in asked and "Bashlachev" in asked):
                return "Alexander Bashlachev was born first [2].\nSo the answer is: Alexander Bashlachev"
            return "4 September 1966" if "Yanka" in asked.rsplit("Question:", 1)[-1] else "May 27, 1960"
        prompts.append(payload)
        return follow_ups[min(_model_part(payload).count("Intermediate answer:"), len(follow_ups) - 1)]

    return script


def _run(retriever: Retriever, follow_ups: list[str], **opts) -> tuple[Result, list[str]]:
    prompts: list[str] = []
    s = get_strategy("self-ask", ScriptedLLM(_script(follow_ups, prompts)), retriever, k=3, lang="en", **opts)
    return s.run(QUESTION, filters=SCOPE), prompts


def test_the_paper_mode_runs_the_published_loop(retriever: Retriever) -> None:
    """``mode=paper``: scaffold, follow-up answered by search (the extraction call), scaffold, ...,
    the final answer line; append-only prompts; no repair, no search of the question itself."""
    r, prompts = _run(retriever, FOLLOW_UPS, mode="paper")
    assert [e.data["step"] for e in r.trace.of("llm")] == [
        "scaffold 1",
        "extract 1",
        "scaffold 2",
        "extract 2",
        "scaffold 3",
    ]
    assert all(later.startswith(earlier) for earlier, later in pairwise(prompts))
    assert prompts[1].endswith("Follow up: When was Yanka Dyagileva born?\nIntermediate answer: 4 September 1966\n")
    assert [e.data["route"] for e in r.trace.of("search")] == ["follow_up", "follow_up"]
    assert not r.trace.of("repair") and r.trace.of("start")[0].data["repairs"] == []
    assert r.answer == "Alexander Bashlachev" and r.finish_reason == "finished"


def test_the_default_mode_adds_the_final_reading_and_switching_it_off_removes_exactly_its_steps(
    retriever: Retriever,
) -> None:
    r, _ = _run(retriever, FOLLOW_UPS)
    steps = [e.data["step"] for e in r.trace.of("llm")]
    assert steps == ["scaffold 1", "extract 1", "scaffold 2", "extract 2", "scaffold 3", "read"]
    assert [e.data["route"] for e in r.trace.of("search")] == ["follow_up", "follow_up", "original"]
    assert [e.data["name"] for e in r.trace.of("repair")] == ["final_read", "grounding"]
    assert r.short_answer == "Alexander Bashlachev" and r.trace.of("draft")[0].data["stage"] == "scaffold"
    off, _ = _run(retriever, FOLLOW_UPS, final_read=False)
    assert [e.data["step"] for e in off.trace.of("llm")] == steps[:-1]
    assert [e.data["name"] for e in off.trace.of("repair")] == ["grounding"]


REPEATS = [
    " Yes.\nFollow up: When was Yanka Dyagileva born?\n",
    "Follow up: When was Yanka Dyagileva born?\n",
    "Follow up: When was Yanka Dyagileva born?\n",
    "So the final answer is: Yanka Dyagileva\n",
]


def test_the_repeat_guard_answers_a_repeat_without_a_search_and_a_second_ends_the_follow_ups(
    retriever: Retriever,
) -> None:
    r, prompts = _run(retriever, REPEATS, final_read=False)
    assert [e.data["step"] for e in r.trace.of("llm")] == [
        "scaffold 1",
        "extract 1",
        "scaffold 2",
        "scaffold 3",
        "final answer",
    ]
    assert r.searches == 1
    fired = [e.data for e in r.trace.of("repair") if e.data["name"] == "repeat_guard"]
    assert [f["repeats"] for f in fired] == [1, 2] and fired[0]["repeat_of"] == "When was Yanka Dyagileva born?"
    assert "4 September 1966 (This follow up was already asked." in prompts[2]
    # off (as the paper): each repeat is searched and read again, and the model goes on
    off, _ = _run(retriever, REPEATS, final_read=False, repeat_guard=False)
    steps = [e.data["step"] for e in off.trace.of("llm")]
    assert steps == ["scaffold 1", "extract 1", "scaffold 2", "extract 2", "scaffold 3", "extract 3", "scaffold 4"]
    assert off.searches == 3 and off.answer == "Yanka Dyagileva"
    assert "repeat_guard" not in [e.data["name"] for e in off.trace.of("repair")]


def test_a_new_hop_on_the_same_entity_is_not_a_repeat(retriever: Retriever) -> None:
    """ "Where is X from?" after "Who is X?" asks another fact (another question word): searched."""
    question = "Are both Stephen R. Donaldson and Michael Moorcock science fiction writers?"
    follow_ups = [
        " Yes.\nFollow up: Who is Stephen R. Donaldson?\n",
        "Follow up: Where is Stephen R. Donaldson from?\n",
        "So the final answer is: Yes\n",
    ]

    def script(payload: str | list[Message], params: GenParams) -> str:
        if isinstance(payload, list):
            return "Stephen R. Donaldson is an American fantasy, science fiction and mystery novelist."
        return follow_ups[_model_part(payload).count("Intermediate answer:")]

    s = get_strategy("self-ask", ScriptedLLM(script), retriever, k=3, lang="en", final_read=False)
    r = s.run(question, filters=SCOPE)
    assert r.searches == 2 and r.short_answer == "Yes"
    assert "repeat_guard" not in [e.data["name"] for e in r.trace.of("repair")]


@pytest.mark.parametrize("mode", ["default", "paper"])
def test_a_follow_up_search_cannot_answer_is_answered_by_the_model(retriever: Retriever, mode: str) -> None:
    def script(payload: str | list[Message], params: GenParams) -> str:
        if isinstance(payload, list):
            return "Unknown."  # the passages do not answer it
        if payload.endswith("Intermediate answer:") and "model answer" not in str(params):
            part = _model_part(payload)
            if part.count("Follow up:") > part.count("Intermediate answer: "):
                return " 1966"
        if "Intermediate answer: 1966" in payload:
            return "So the final answer is: Yanka Dyagileva\n"
        return " Yes.\nFollow up: When was Yanka Dyagileva born?\n"

    s = get_strategy("self-ask", ScriptedLLM(script), retriever, k=3, lang="en", mode=mode, final_read=False)
    r = s.run(QUESTION, filters=SCOPE)
    (ia,) = r.trace.of("intermediate_answer")
    assert ia.data["source"] == "model" and ia.data["fallback"] == "the passages do not answer it"
    assert [e.data["step"] for e in r.trace.of("llm")] == ["scaffold 1", "extract 1", "model answer 1", "scaffold 2"]
