"""Self-Ask's final reading pass (option ``final_read``), on the scripted model and a real index.

The question is HotpotQA-train's "Max Hoffmann along with Hindenburg and Ludendorff, masterminded
the devastating defeat of the Russian armies in a battle fought when ?" (gold "26–30 August 1914").
The scaffold's replies are written after a failure qwen2.5-1.5b showed on a question of this
shape in the reporting split (the hybrid re-make, self-ask, 2026-12-03): both follow-ups asked
about the bridge entity's posts, and the final answer to "when?" was an intermediate answer
("Chief of Staff of the Eastern Front").  The search for the question itself finds the passage
that dates the battle; the reading pass reads that passage with the follow-ups' passages, and
the scaffold's answer is kept as the draft.  The passages are the question's own paragraphs,
cut to their first sentences.
"""

from __future__ import annotations

import json
from itertools import zip_longest

import pytest

from sleuth.llm.base import GenParams, Message
from sleuth.llm.scripted import ScriptedLLM
from sleuth.search import open_retriever
from sleuth.search.base import Filters, Retriever
from sleuth.strategies import Result, get_strategy
from sleuth.strategies.options import OptionsError

SCOPE = Filters.parse(["acl=all"])
HOFFMANN = "Max Hoffmann"
BATTLE = "Battle of Tannenberg"
PASSAGES = {
    HOFFMANN: "Carl Adolf Maximilian Hoffmann (25 January 1869 – 8 July 1927) was a German military strategist. As a "
    "staff officer at the beginning of World War I, he was Chief of Staff of the 8th Army. Hoffmann, along with "
    "Hindenburg and Ludendorff, masterminded the devastating defeat of the Russian armies at Tannenberg and the "
    "Masurian Lakes. He then held the position of Chief of Staff of the Eastern Front.",
    BATTLE: "The Battle of Tannenberg was fought between Russia and Germany from 26–30 August 1914, during the "
    "first month of World War I. The battle resulted in the almost complete destruction of the Russian Second Army.",
    "Operation Michael": "Operation Michael was a major German military offensive during the First World War that "
    "began the Spring Offensive on 21 March 1918.",
    "Polish–Soviet War in 1919": "In 1918, the German Army in the east was the most powerful force in the region. "
    "The commander of the German forces in the east, Max Hoffmann, was a chief negotiator in the Treaty of "
    "Brest-Litovsk.",
}
QUESTION = (
    "Max Hoffmann along with Hindenburg and Ludendorff, masterminded the devastating defeat of the Russian armies "
    "in a battle fought when ?"
)
FOLLOW_UPS = [
    " Yes.\nFollow up: What position did Max Hoffmann hold at the beginning of World War I?\n",
    "Follow up: What position did Max Hoffmann hold after the defeat of the Russian armies?\n",
    "So the final answer is: Chief of Staff of the Eastern Front\n",
]
READ = (
    "Hoffmann, Hindenburg and Ludendorff defeated the Russian armies at Tannenberg, fought from 26–30 August 1914 "
    "[2][1].\nSo the answer is: 26–30 August 1914"
)


@pytest.fixture(scope="module")
def retriever(tmp_path_factory: pytest.TempPathFactory) -> Retriever:
    path = tmp_path_factory.mktemp("tannenberg") / "docs.jsonl"
    rows = [{"id": t, "title": t, "text": x, "acl": "all"} for t, x in PASSAGES.items()]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return open_retriever(str(path), cache_dir=tmp_path_factory.mktemp("tannenberg-idx"))


def _script(read_reply: str, reads: list[str]):
    def script(payload: str | list[Message], params: GenParams) -> str:
        if isinstance(payload, list):
            content = str(payload[-1]["content"])
            if content.startswith("Answer the question using only the documents below"):  # the reading pass
                reads.append(content)
                return read_reply
            asked = content.rsplit("Question:", 1)[-1]
            if "beginning" in asked:
                return "He was Chief of Staff of the 8th Army."
            return "Chief of Staff of the Eastern Front"
        mine = payload.rsplit("Are follow up questions needed here:", 1)[-1]
        return FOLLOW_UPS[mine.count("Intermediate answer:")]

    return script


def _run(retriever: Retriever, read: bool = True, read_reply: str = READ) -> tuple[Result, list[str]]:
    reads: list[str] = []
    llm = ScriptedLLM(_script(read_reply, reads))
    strategy = get_strategy("self-ask", llm, retriever, k=2, final_read=read)
    return strategy.run(QUESTION, filters=SCOPE), reads


def test_the_reading_pass_answers_from_the_questions_own_passages_and_keeps_the_scaffolds_as_draft(
    retriever: Retriever,
) -> None:
    r, reads = _run(retriever)
    routes = [e.data["route"] for e in r.trace.of("search")]
    assert routes == ["follow_up", "follow_up", "original"]  # the question's own search comes last
    assert len(reads) == 1
    # the question's passages first (the battle's date), then the follow-ups' not yet shown
    shown = next(e.data["shown"] for e in r.trace.of("repair") if e.data["name"] == "final_read")
    own = [p["id"] for p in r.trace.of("search")[-1].data["passages"]]
    assert shown[: len(own)] == own and f"{BATTLE}#0" in own
    assert len(shown) == len(set(shown)) == 3  # the follow-ups' passages not found again, after them
    assert reads[0].index("from 26–30 August 1914") < reads[0].index("Question:")
    draft = r.trace.of("draft")[0].data
    assert draft["short_answer"] == "Chief of Staff of the Eastern Front" and draft["stage"] == "scaffold"
    assert r.short_answer == "26–30 August 1914"
    assert r.answer.startswith("Hoffmann, Hindenburg and Ludendorff defeated") and "So the answer is" not in r.answer
    assert [c.doc_id for c in r.citations][:2] == [BATTLE, HOFFMANN]  # in the order the answer uses them


def test_a_reading_that_finds_no_answer_leaves_the_scaffolds_answer(retriever: Retriever) -> None:
    r, _ = _run(retriever, True, "The documents do not say.\nSo the answer is: The documents do not say")
    assert r.short_answer == "Chief of Staff of the Eastern Front"
    assert "read_abstained" in [e.data.get("type") for e in r.trace.of("note")]


def test_off_is_the_papers_method_one_search_per_follow_up_and_no_draft(retriever: Retriever) -> None:
    r, reads = _run(retriever, False)
    assert reads == [] and r.trace.of("draft") == [] and r.searches == 2
    assert r.short_answer == "Chief of Staff of the Eastern Front"


def test_a_reading_option_that_is_not_a_boolean_is_refused() -> None:
    with pytest.raises(OptionsError, match="final_read"):
        get_strategy("self-ask", ScriptedLLM(["x"]), None, final_read="always")


BOX_OFFICE = {
    "2022年春节档": "2022年春节档首日，《长津湖之水门桥》以4.36亿元票房位列首日票房冠军。",
    "长津湖之水门桥": "《长津湖之水门桥》是2022年上映的战争片，由徐克执导。",
    "2021年春节档": "2021年春节档首日票房冠军是《唐人街探案3》，首日票房超过10亿元。",
    "2019年春节档": "2019年春节档首日，《疯狂的外星人》和《流浪地球》票房领先。",
    "春节档观影人次": "春节档首日观影人次创下新高，多部影片票房过亿。",
    "春节档排片": "影院春节档排片以喜剧和科幻片为主，首日票房冠军往往获得更多排片。",
    "贺岁片": "贺岁片是在春节档上映的电影，票房冠军常被媒体报道。",
    "档期": "中国电影的主要档期包括春节档、暑期档和国庆档，春节档首日票房最受关注。",
}
ZH_QUESTION = "2022年春节档首日票房冠军影片的导演是谁？"
ZH_FOLLOW_UPS = [
    "是。\n追问：2022年春节档首日票房冠军是哪部电影？\n",
    "追问：《长津湖之水门桥》的导演是谁？\n",
    "所以最终答案是：《长津湖之水门桥》\n",
]


def test_a_chinese_reading_keeps_places_for_the_follow_ups_passages(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Chinese prompts carry 2000 characters of documents: six passages of 300 characters, four of
    them the question's own, then each follow-up's best that the question's search did not rank there."""
    path = tmp_path_factory.mktemp("box") / "docs.jsonl"
    rows = [{"id": t, "title": t, "text": x, "acl": "all"} for t, x in BOX_OFFICE.items()]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    retriever = open_retriever(str(path), cache_dir=tmp_path_factory.mktemp("box-idx"))

    def script(payload: str | list[Message], params: GenParams) -> str:
        if isinstance(payload, list):
            content = str(payload[-1]["content"])
            if content.startswith("请只根据下面的文档回答问题"):
                return "2022年春节档首日票房冠军是《长津湖之水门桥》，由徐克执导[6]。\n所以答案是：徐克"
            return "《长津湖之水门桥》" if "2022" in content.rsplit("问题：", 1)[-1] else "徐克"
        return ZH_FOLLOW_UPS[payload.rsplit("需要追问吗：", 1)[-1].count("中间答案")]

    r = get_strategy("self-ask", ScriptedLLM(script), retriever, final_read=True).run(ZH_QUESTION, filters=SCOPE)
    searches = r.trace.of("search")
    own = [p["id"] for p in searches[-1].data["passages"]]
    hops = [[p["id"] for p in e.data["passages"]] for e in searches[:-1]]
    shown = next(e.data["shown"] for e in r.trace.of("repair") if e.data["name"] == "final_read")
    assert len(own) == 5 and len(shown) == 6 and shown[:4] == own[:4]
    # then the follow-ups' by rank, each follow-up's best first: the director's page (the second
    # follow-up's best), which the question's search did not rank in its first four, comes first
    by_rank = [p for rank in zip_longest(*hops) for p in rank if p]
    assert shown[4:] == [p for p in dict.fromkeys(by_rank) if p not in own[:4]][:2]
    assert shown[4] == hops[1][0] == "长津湖之水门桥#0" and shown[4] not in own[:4]
    assert r.trace.of("draft")[0].data["short_answer"] == "《长津湖之水门桥》"  # the bridge entity
    assert r.short_answer == "徐克" and [c.doc_id for c in r.citations] == ["长津湖之水门桥"]


def test_the_cli_shows_the_scaffolds_answer_before_the_reading(retriever: Retriever) -> None:
    from rich.console import Console

    from sleuth.cli.ask import StepPrinter

    out = Console(record=True, width=200)
    llm = ScriptedLLM(_script(READ, []))
    get_strategy("self-ask", llm, retriever, k=2).run(QUESTION, filters=SCOPE, listeners=[StepPrinter(out)])
    text = out.export_text()
    assert "scaffold's answer Chief of Staff of the Eastern Front" in text and "paragraphs" not in text
