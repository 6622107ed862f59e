"""Search-o1's paper steps and its repair ``repeat_guard``, on real traces.

The Chinese replies are copied from the committed qwen2.5-1.5b records (docs/results/policy_zh);
the English failures were recorded on HotpotQA's and MuSiQue's reporting splits
(docs/results/hotpotqa-open), so here they are replayed on tuning questions (HotpotQA train,
MuSiQue's tuning half) with replies written in the recorded shape and passages shortened from
those questions' paragraphs, indexed for real in ``tmp_path``.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from sleuth.llm.base import GenParams, Message
from sleuth.llm.scripted import ScriptedLLM
from sleuth.search import open_retriever
from sleuth.search.base import Filters
from sleuth.strategies import FINISHED, REPEAT_LIMIT, get_strategy

SCOPE = Filters.parse(["acl=all"])
DOCS = [
    ("Indian Mound Cottage", "Indian Mound Cottage is a mansion that was owned by oil executive William Rockefeller. It was built in 1892, stands three stories high, and has a total of 25 rooms."),
    ("William Rockefeller", "William Avery Rockefeller, Jr. (May 31, 1841 – June 24, 1922) was an American businessman and financier. He was a co-founder of Standard Oil along with his older brother John Davison Rockefeller."),
    ("Kilby International Awards", "The Kilby International Awards was an award created by the High Tech Committee of the North Dallas Chamber of Commerce, in 1990. It was named after inventor Jack Kilby, who took part in the realization of the first integrated circuit."),
    ("Dominic Cooper", 'Dominic Edward Cooper (born 2 June 1978) is an English actor. He played the young Howard Stark in the Marvel Cinematic Universe, including the ABC series "Agent Carter".'),
    ("Agent Carter (TV series)", "Agent Carter is an American television series created for ABC by Christopher Markus and Stephen McFeely, inspired by the 2011 film Captain America: The First Avenger."),
    ("Captain America: The First Avenger", "Captain America: The First Avenger is a 2011 American superhero film based on the Marvel Comics character Captain America, directed by Joe Johnston."),
    ("Humphrey Bogart", 'Humphrey DeForest Bogart (December 25, 1899 – January 14, 1957) was an American screen and stage actor. He starred in films such as "The Maltese Falcon" (1941) and "Casablanca" (1942).'),
    ("Casablanca (film)", "Casablanca is a 1942 American romantic drama film directed by Michael Curtiz. The film was produced by Harold Brent Wallis and stars Humphrey Bogart, Ingrid Bergman and Paul Henreid."),
    ("The Maltese Falcon (1941 film)", "The Maltese Falcon is a 1941 American film noir written and directed by John Huston, starring Humphrey Bogart as private investigator Sam Spade."),
    ("差旅费用管理办法（2024版）", "第二条 员工应在行程结束后45个自然日内提交差旅报销申请。第三条 取消行程产生的退票费用按一般报销期限执行，不单独规定。本办法自2024年1月1日起施行，2025年1月1日起由2025版替代。"),
]  # fmt: skip


@pytest.fixture(scope="module")
def retriever(tmp_path_factory: pytest.TempPathFactory):
    path = tmp_path_factory.mktemp("corpus") / "docs.jsonl"
    with path.open("w", encoding="utf-8") as f:
        for i, (title, text) in enumerate(DOCS):
            f.write(json.dumps({"id": f"d{i}", "title": title, "text": text, "acl": "all"}, ensure_ascii=False) + "\n")
    return open_retriever(str(path), cache_dir=tmp_path_factory.mktemp("idx"))


Script = Callable[[str | list[Message], GenParams], str]


def scripted(turns: list[str], rid: list[str], final: str, prompts: list[str] | None = None) -> Script:
    """Reasoning turns in order, Reason-in-Documents replies in order, the forced answer."""
    turns, rid = list(turns), list(rid)

    def script(payload: str | list[Message], params: GenParams) -> str:
        if isinstance(payload, list):  # Reason-in-Documents is a chat call
            return rid.pop(0)
        if payload.rstrip().endswith("\\boxed{"):
            return final
        if prompts is not None:
            prompts.append(payload)
        return turns.pop(0)

    return script


def _steps(r) -> list[str]:
    return [str(e.data["step"]) for e in r.trace.of("llm")]


def test_repeat_is_steered_with_the_earlier_result_then_forced(retriever) -> None:
    """HotpotQA train (the recorded shape): after "Nothing was found." for "Kilby electronics phenomenon"
    the model asked it twice more.  The first repeat now gets the earlier result again and a push to
    search for something else; the second forces the answer with finish reason ``repeat_limit``."""
    prompts: list[str] = []
    again = "I need to search for the phenomenon discovered by Jack Kilby again. <|begin_search_query|> Kilby electronics phenomenon "
    script = scripted(
        [
            " First, I need to find the inventor the Kilby International Awards were named after. <|begin_search_query|> Kilby International Awards ",
            "Next, I need to find the electronics phenomenon Jack Kilby discovered. <|begin_search_query|> Kilby electronics phenomenon ",
            again,
            again,
        ],
        [
            "The Kilby International Awards was an award created by the High Tech Committee of the North Dallas Chamber of Commerce, in 1990. It was named after inventor Jack Kilby.",
            "Nothing was found.",
        ],
        final="integrated circuit",
        prompts=prompts,
    )  # fmt: skip
    s = get_strategy("search-o1", ScriptedLLM(script), retriever, k=2, max_steps=6, lang="en")
    r = s.run(
        "The Kilby International Awards were named after the inventor who discovered what electronics phenomenon?",
        filters=SCOPE,
    )
    assert r.finish_reason == REPEAT_LIMIT and r.answer == "integrated circuit" and r.searches == 2
    assert [e.data["refused"] for e in r.trace.of("repair") if e.data["name"] == "repeat_guard"] == [1, 2]
    assert 'You already searched "Kilby electronics phenomenon". Its result was: Nothing was found.' in prompts[3]
    assert "Search for another fact you still need" in prompts[3]
    assert _steps(r)[-1] == "final answer"


def test_without_the_repeat_guard_a_repeat_is_searched_again_as_the_paper_does(retriever) -> None:
    """``repeat_guard=false`` (and ``mode=paper``): the same turns, each repeat searched and read again;
    the only difference is the guard's steps: no notice, one more search and Reason-in-Documents each."""
    again = "<|begin_search_query|> Kilby electronics phenomenon "
    turns = [" <|begin_search_query|> Kilby International Awards ", again, again, "So \\boxed{integrated circuit}"]
    rid = ["It was named after inventor Jack Kilby.", "Nothing was found.", "Nothing was found.", "Nothing was found."]
    question = (
        "The Kilby International Awards were named after the inventor who discovered what electronics phenomenon?"
    )
    for opts in ({"repeat_guard": False}, {"mode": "paper"}):
        prompts: list[str] = []
        llm = ScriptedLLM(scripted(list(turns), list(rid), final="unused", prompts=prompts))
        r = get_strategy("search-o1", llm, retriever, k=2, max_steps=6, lang="en", **opts).run(question, filters=SCOPE)
        assert r.finish_reason == FINISHED and r.answer == "integrated circuit" and r.searches == 3, opts
        assert "repeat_guard" not in [e.data["name"] for e in r.trace.of("repair")]
        assert "You already searched" not in prompts[-1]
        assert _steps(r) == ["reason 1", "reason-in-documents 1", "reason 2", "reason-in-documents 2", "reason 3",
                             "reason-in-documents 3", "reason 4"]  # fmt: skip


def test_near_duplicate_query_is_a_repeat(retriever) -> None:
    """A query whose content words overlap an earlier one by >= 0.8 is not searched again
    (the recorded kind of pair: a query and the same query with "location" added, same passages)."""
    script = scripted(
        [
            " I need the plantation. <|begin_search_query|> Castle Hill plantation Thomas Jefferson residence ",
            "I need its location. <|begin_search_query|> Castle Hill plantation Thomas Jefferson residence location ",
            "Final answer: \\boxed{Virginia}",
        ],
        ["Nothing was found."],
        final="unused",
    )
    s = get_strategy("search-o1", ScriptedLLM(script), retriever, k=2, max_steps=6, lang="en")
    r = s.run("Where is Castle Hill?", filters=SCOPE)
    assert r.searches == 1 and r.finish_reason == FINISHED
    note = next(e.data for e in r.trace.of("repair") if e.data["name"] == "repeat_guard")
    assert note["repeat_of"] == "Castle Hill plantation Thomas Jefferson residence"


def test_repeat_notice_zh(retriever) -> None:
    prompts: list[str] = []
    q = "<|begin_search_query|> 退票 费用 报销时间 "
    script = scripted(
        ["我需要查找退票费用的报销时间规定。" + q, q, "最终答案：\\boxed{45个自然日}"],
        ["根据文档内容，退票费用的报销时间规定是45个自然日内。"],
        final="unused",
        prompts=prompts,
    )
    s = get_strategy("search-o1", ScriptedLLM(script), retriever, k=1, max_steps=6, lang="zh")
    r = s.run("2024年时，取消行程的退票费用要在多少天内报销？", filters=SCOPE)
    assert r.finish_reason == FINISHED and r.answer == "45个自然日"
    assert (
        "你已经检索过“退票 费用 报销时间”，结果是：根据文档内容，退票费用的报销时间规定是45个自然日内。" in prompts[2]
    )


def _titled_index(tmp_path_factory: pytest.TempPathFactory, name: str, docs: list[tuple[str, str]]):
    """A real index of (title, text) passages, each id its title, all under ``acl=all``."""
    path = tmp_path_factory.mktemp(name) / "docs.jsonl"
    rows = [{"id": t, "title": t, "text": x, "acl": "all"} for t, x in docs]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return open_retriever(str(path), cache_dir=tmp_path_factory.mktemp(f"{name}-idx"))


# second query "北京 冬残奥会 开幕日期" was refused as a repeat of "北京 冬奥会 开幕日期" (one character
# more: overlap 0.9 by characters), and the answer kept one part of two -----------------------------
OLYMPICS = [
    ("北京冬奥会", "2022年北京冬季奥运会开幕式于北京当地时间2022年2月4日举行，闭幕式于2月20日举行。"),
    ("北京冬残奥会", "2022年北京冬季残疾人奥林匹克运动会于2022年3月4日开幕，3月13日闭幕。"),
]  # fmt: skip


@pytest.fixture(scope="module")
def olympics(tmp_path_factory: pytest.TempPathFactory):
    return _titled_index(tmp_path_factory, "olympics", OLYMPICS)


def test_a_query_one_character_apart_is_a_new_query_zh(olympics) -> None:
    script = scripted(
        [
            "我需要查找北京冬奥会和冬残奥会的开幕日期。<|begin_search_query|> 北京 冬奥会 开幕日期 ",
            "<|begin_search_query|> 北京 冬残奥会 开幕日期 ",
            "最终答案：\\boxed{2022年2月4日、2022年3月4日} ",
        ],
        ["北京冬奥会开幕式于2022年2月4日举行。", "北京冬残奥会于2022年3月4日开幕。"],
        final="unused",
    )
    s = get_strategy("search-o1", ScriptedLLM(script), olympics, k=1, max_steps=4, lang="zh")
    r = s.run("北京冬奥会和冬残奥会的开幕日期分别是什么时候？", filters=SCOPE)
    assert [e.data["query"] for e in r.trace.of("search")] == ["北京 冬奥会 开幕日期", "北京 冬残奥会 开幕日期"]
    assert not r.trace.of("repair") or "repeat_guard" not in [e.data["name"] for e in r.trace.of("repair")]
    assert r.answer == "2022年2月4日、2022年3月4日"


@pytest.mark.parametrize(
    ("a", "b", "near"),
    [
        ("北京 冬奥会 开幕日期", "北京 冬残奥会 开幕日期", False),  # one character more: another entity
        ("差旅 报销 期限", "报销 差旅 期限", True),  # the same words
        (
            "Castle Hill plantation Thomas Jefferson residence",
            "Castle Hill plantation Thomas Jefferson residence location",
            True,
        ),
        ("Humphrey Bogart films 1942", "Harold Brent Wallis Humphrey Bogart film", False),
    ],
)
def test_near_duplicate_queries(a: str, b: str, near: bool) -> None:
    from sleuth.strategies.repairs import NEAR_DUPLICATE
    from sleuth.strategies.text import query_similarity

    assert (query_similarity(a, b) >= NEAR_DUPLICATE) is near
