"""Search-o1's Reason-in-Documents grounding and its steering repeat guard, on real traces.

Every model reply below is copied from the committed qwen2.5-1.5b records
(docs/results/{hotpotqa-open,policy_zh}/results.jsonl.gz); the passages are the ones those
runs retrieved (first 400 characters), indexed for real in ``tmp_path``.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from sleuth.llm.base import GenParams, Message
from sleuth.llm.scripted import ScriptedLLM
from sleuth.search import open_retriever
from sleuth.search.base import Filters, Passage
from sleuth.strategies import FINISHED, REPEAT_LIMIT, get_strategy
from sleuth.strategies.rid_support import closest_sentence, ground, sentences

SCOPE = Filters.parse(["acl=all"])
DOCS = [
    ("Cotai Arena", "The Cotai Arena is an indoor arena, located on the premises of The Venetian Macao, on the Cotai Strip, in Macau, China. It opened in 2007 with a seating capacity of 15,000."),
    ("The Venetian Macao", "The Venetian Macao () is a luxury hotel and casino resort in Macau owned by the American Las Vegas Sands company. The Venetian is a 39-story, casino hotel on the Cotai Strip in Macau."),
    ("Charles Fort", 'Charles Hoy Fort (August 6, 1874 – May 3, 1932) was an American writer and researcher who specialized in anomalous phenomena. The terms "Fortean" and "Forteana" are sometimes used to characterize various such phenomena.'),
    ("Elena Shaddow", "In August 2013, she was in the world premiere of Jason Robert Brown's new musical, \"The Bridges of Madison County\" at the Williamstown Theatre Festival, starring alongside Steven Pasquale."),
    ("In Love Again: The Music of Richard Rodgers", "In Love Again: The Music of Richard Rodgers is a 2002 studio album by Stacey Kent, of the songs of the American composer Richard Rodgers."),
    ("Richard Rodgers School", "Richard Rodgers School refers to several schools named after the American composer Richard Rodgers, including these two in New York City:"),
    ("Katrina Bowden", 'Katrina Bowden (born September 19, 1988) is an American actress best known for playing Cerie on the NBC sitcom "30 Rock" (2006–2013). She also appeared in films such as "Sex Drive", "Piranha 3DD", and "Scary Movie 5".'),
    ("Sex Drive (film)", 'Sex Drive is a 2008 sex comedy film about a high school graduate who goes on a road trip to have sex with a girl he met online. The film was directed by Sean Anders, and stars Josh Zuckerman, Amanda Crew, Clark Duke, Seth Green, and James Marsden, while Katrina Bowden, Alice Greczyn, Michael Cudlitz, Dave Sheridan,'),
    ("Hard Sell (film)", "Hard Sell is an American comedy-drama written and directed by Sean Nalaboff in his directorial debut. The film stars Katrina Bowden, Skyler Gisondo, and Kristin Chenoweth, with Hannah Marks and Kevin Kilner in supporting roles."),
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


def test_answer_before_a_repeated_query_ends_the_run(retriever) -> None:
    """HotpotQA: the model wrote ``\\boxed{American Las Vegas Sands}`` and then asked its first query
    again; it used to burn two more turns on "already searched" notices (step_limit)."""
    script = scripted(
        [
            " First, I need to find the hotel on whose premises the Cotal Arena is located. <|begin_search_query|> Cotal Arena hotel location ",
            "Now, I need to find the company that owns The Venetian Macao. <|begin_search_query|> The Venetian Macao owner ",
            "The hotel on whose premises the Cotal Arena is located is owned by the American Las Vegas Sands company.\nFinal answer: \\boxed{American Las Vegas Sands} <|begin_search_query|> Cotal Arena hotel location ",
        ],
        [
            "The Cotai Arena is an indoor arena located on the premises of The Venetian Macao, on the Cotai Strip, in Macau, China.",
            "The Venetian Macao is owned by the American Las Vegas Sands company.",
        ],
        final="unused",
    )  # fmt: skip
    s = get_strategy("search-o1", ScriptedLLM(script), retriever, k=2, max_steps=6, lang="en")
    r = s.run("Which company owns the hotel on whose premises the Cotal Arena is located ?", filters=SCOPE)
    assert r.finish_reason == FINISHED and r.answer == "American Las Vegas Sands"
    assert "final answer" not in _steps(r) and r.searches == 2
    note = next(e.data for e in r.trace.of("note") if e.data.get("type") == "answer_before_repeat")
    assert note["repeat_of"] == "Cotal Arena hotel location"


def test_answer_before_a_repeated_query_ends_the_run_zh(retriever) -> None:
    """policy_zh: "最终答案：\\boxed{45}" followed by the same query again (was step_limit)."""
    script = scripted(
        [
            "我需要查找退票费用的报销时间规定。<|begin_search_query|> 退票 费用 报销时间 ",
            "最终答案：\\boxed{45} <|begin_search_query|> 退票 费用 报销时间 ",
        ],
        ["根据文档内容，退票费用的报销时间规定是45个自然日内。"],
        final="unused",
    )
    s = get_strategy("search-o1", ScriptedLLM(script), retriever, k=1, max_steps=6, lang="zh")
    r = s.run("2024年时，取消行程的退票费用要在多少天内报销？", filters=SCOPE)
    assert r.finish_reason == FINISHED and r.answer == "45" and r.searches == 1
    assert r.trace.of("reason_in_documents")[0].data["helpful"]  # 45 and the words are in the document


def test_repeat_is_steered_with_the_earlier_result_then_forced(retriever) -> None:
    """HotpotQA: after "Nothing was found." for "Fortean subject" the model asked it twice more.
    The first repeat now gets the earlier result again and a push to search for something else;
    the second forces the answer with finish reason ``repeat_limit``."""
    prompts: list[str] = []
    again = "I need to search for the subject named for Charles Hoy Fort again. <|begin_search_query|> Fortean subject "
    script = scripted(
        [
            " First, I need to find Charles Hoy Fort. <|begin_search_query|> Charles Hoy Fort ",
            "Next, I need to find the subject named for Charles Hoy Fort. <|begin_search_query|> Fortean subject ",
            again,
            again,
        ],
        [
            'Charles Hoy Fort was an American writer and researcher who specialized in anomalous phenomena. The terms "Fortean" and "Forteana" are sometimes used to characterize various such phenomena.',
            "Nothing was found.",
        ],
        final="Fortean",
        prompts=prompts,
    )  # fmt: skip
    s = get_strategy("search-o1", ScriptedLLM(script), retriever, k=2, max_steps=6, lang="en")
    r = s.run("UFO Magazine covers what subject named for Charles Hoy Fort?", filters=SCOPE)
    assert r.finish_reason == REPEAT_LIMIT and r.answer == "Fortean" and r.searches == 2
    notes = [e.data for e in r.trace.of("note")]
    assert [n["type"] for n in notes if n["type"] in ("repeated_query", "repeat_guard")] == [
        "repeated_query",
        "repeat_guard",
    ]
    assert 'You already searched "Fortean subject". Its result was: Nothing was found.' in prompts[3]
    assert "Search for another fact you still need" in prompts[3]
    assert _steps(r)[-1] == "final answer"


def test_near_duplicate_query_is_a_repeat(retriever) -> None:
    """A query whose content words overlap an earlier one by >= 0.8 is not searched again
    (recorded pair: 'Landsman Kill New York State Route 308' / '... location', same passages)."""
    script = scripted(
        [
            " I need the creek. <|begin_search_query|> Landsman Kill New York State Route 308 ",
            "I need its location. <|begin_search_query|> Landsman Kill New York State Route 308 location ",
            "Final answer: \\boxed{New York}",
        ],
        ["Nothing was found."],
        final="unused",
    )
    s = get_strategy("search-o1", ScriptedLLM(script), retriever, k=2, max_steps=6, lang="en")
    r = s.run("Where is Landsman Kill?", filters=SCOPE)
    assert r.searches == 1 and r.finish_reason == FINISHED
    note = next(e.data for e in r.trace.of("note") if e.data.get("type") == "repeated_query")
    assert note["repeat_of"] == "Landsman Kill New York State Route 308"


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


def test_reason_in_documents_drops_a_fact_from_memory(retriever) -> None:
    """HotpotQA: Reason-in-Documents repeated the reasoning's own claim "Richard Rodgers was a
    relative of ... George Gershwin"; no retrieved passage names Gershwin."""
    script = scripted(
        [
            " First, I need to find the show Elena Shaddow was in. <|begin_search_query|> Elena Shaddow show ",
            "Next, I need to find the relative of Richard Rodgers who wrote this show. Richard Rodgers was a relative of the American composer and lyricist, George Gershwin. <|begin_search_query|> Richard Rodgers relative ",
            'The show "The Bridges of Madison County" was written by a relative of Richard Rodgers.\nFinal answer: \\boxed{The Bridges of Madison County} ',
        ],
        [
            "Elena Shaddow was in the world premiere of Jason Robert Brown's new musical, \"The Bridges of Madison County\" at the Williamstown Theatre Festival, starring alongside Steven Pasquale.",
            "Richard Rodgers was a relative of the American composer and lyricist, George Gershwin.",
        ],
        final="unused",
    )  # fmt: skip
    s = get_strategy("search-o1", ScriptedLLM(script), retriever, k=3, max_steps=6, lang="en")
    r = s.run("What show was Elena Shaddow in that was written by a relative of Richard Rodgers?", filters=SCOPE)
    first, second = (e.data for e in r.trace.of("reason_in_documents"))
    assert first["helpful"] and "Bridges of Madison County" in first["info"] and not first["dropped"]
    assert "Gershwin" not in second["info"]  # what is left is a quoted passage sentence, or "nothing found"
    assert second["info"].startswith("The documents say: (") or second["info"] == "No helpful information found."
    assert second["dropped"] == [
        {
            "sentence": "Richard Rodgers was a relative of the American composer and lyricist, George Gershwin.",
            "why": "name not in the documents: george, gershwin",
        }
    ]


def test_nothing_found_quotes_the_closest_document_sentence(retriever) -> None:
    """HotpotQA: Reason-in-Documents answered "Nothing was found." twice although the passages
    name the film ("She also appeared in films such as "Sex Drive""; "directed by Sean Anders");
    the run then repeated its query and answered "Nothing was found".  Now the passage sentence
    that covers most of the query is quoted instead."""
    prompts: list[str] = []
    again = "I need to search for the movie starring Katrina Bowden and directed by Sean Anders. <|begin_search_query|> Katrina Bowden Sean Anders movie "
    script = scripted(
        [" First, I need the movie starring Katrina Bowden. <|begin_search_query|> Katrina Bowden movie ", again, again, again],
        ["Nothing was found.", "Nothing was found."],
        final="Nothing was found",
        prompts=prompts,
    )  # fmt: skip
    s = get_strategy("search-o1", ScriptedLLM(script), retriever, k=3, max_steps=6, lang="en")
    r = s.run("What is the name of the movie that stars Katrina Bowden and was directed by Sean Anders?", filters=SCOPE)
    first, second = (e.data for e in r.trace.of("reason_in_documents"))
    assert first["quoted"] and first["helpful"]
    assert first["info"].startswith(
        'The documents say: (Katrina Bowden) She also appeared in films such as "Sex Drive"'
    )
    assert second["info"].startswith("The documents say: (Sex Drive (film)) The film was directed by Sean Anders")
    assert first["info"] in prompts[1] and second["info"] in prompts[2]
    assert r.finish_reason == REPEAT_LIMIT


def _p(title: str, text: str) -> Passage:
    return Passage(id=title, doc_id=title, title=title, text=text)


PEKAR = _p("Harvey Pekar", "Harvey Lawrence Pekar ( ; October 8, 1939 – July 12, 2010) was an American underground comic book writer.")  # fmt: skip
LEVERTOV = _p("Denise Levertov", "Priscilla Denise Levertov (24 October 1923 – 20 December 1997) was an American poet.")


def test_ground_keeps_document_facts_with_their_document_numbers() -> None:
    info = "Harvey Pekar was born on October 8, 1939 [1]. Denise Levertov was born on October 24, 1923. [2]"
    g = ground(info, [PEKAR, LEVERTOV], "birth dates Harvey Pekar Denise Levertov")
    assert not g.dropped and g.cited == [1, 2]
    assert g.text == "Harvey Pekar was born on October 8, 1939. Denise Levertov was born on October 24, 1923."


def test_ground_reads_document_numbers_written_before_the_sentence() -> None:
    """qwen2.5-1.5b with the new Reason-in-Documents prompt (replayed on the Elena Shaddow step of
    the HotpotQA trace) numbers its sentences in front and lists unused numbers at the end."""
    shaddow = _p("Elena Shaddow", DOCS[3][1])
    raw = (
        "[1] Elena Shaddow was in the world premiere of Jason Robert Brown's new musical, \"The Bridges of "
        'Madison County" at the Williamstown Theatre Festival, starring alongside Steven Pasquale. [2] [3] [4] [5]'
    )
    g = ground(raw, [shaddow], "Elena Shaddow show")
    assert g.cited == [1] and not g.dropped and g.text.startswith("Elena Shaddow was in the world premiere")
    g = ground("[2] Richard Rodgers was a relative of the American composer and lyricist, George Gershwin.", [shaddow])
    assert g.text == "" and g.why[0].startswith("name not in the documents: ")


def test_ground_drops_numbers_the_documents_do_not_state() -> None:
    """HotpotQA: "latitudes of Dal Lake Waterton Lake"; neither passage gives a latitude."""
    dal = _p("Dal Lake", "Dal is a lake in Srinagar (Dal Lake is a misnomer as Dal in Kashmiri means lake), the summer capital of Jammu and Kashmir.")  # fmt: skip
    waterton = _p("Waterton Lake", "Waterton Lake is a mountain lake in southern Alberta, Canada and northern Montana, United States.")  # fmt: skip
    g = ground("The latitude of Dal Lake is 33.94° N, and the latitude of Waterton Lake is 49.97° N.", [dal, waterton])
    assert g.text == "" and g.why == ["number not in the documents: 33, 94, 49"]


def test_ground_numbers_words_and_separators() -> None:
    band = _p("The Frames", "The Frames are an Irish rock band with three members.")
    assert ground("The Frames has 3 members.", [band]).kept  # 3 written as a word
    city = _p("Kansas", "The population of Kansas was 2,913,314 in 2019.")
    assert ground("Kansas had 2913314 people in 2019.", [city]).kept
    assert not ground("Kansas had 2,913,123 people in 2017.", [city]).kept


def test_ground_zh_by_characters() -> None:
    doc = _p("差旅费用管理办法（2025版）", "第九条 住宿标准：一线城市每人每晚不超过600元，其他城市不超过400元。")
    info = "一线城市每人每晚不超过600元。出差可以乘坐头等舱，费用不超过5000元。"
    assert sentences(info) == ["一线城市每人每晚不超过600元。", "出差可以乘坐头等舱，费用不超过5000元。"]
    g = ground(info, [doc])
    assert g.text == "一线城市每人每晚不超过600元。" and g.why == ["number not in the documents: 5000"]
    assert ground("员工可以乘坐头等舱出国旅游。", [doc]).why == ["most words not in the documents"]
    quote = closest_sentence("住宿 标准 一线城市", [doc])
    assert quote == "(差旅费用管理办法（2025版）) 第九条 住宿标准：一线城市每人每晚不超过600元，其他城市不超过400元。"
    assert closest_sentence("出国 头等舱", [doc]) is None  # covers too little of the query


def test_ground_drops_a_restated_query_that_no_one_document_states() -> None:
    """hotpotqa/train tuning run, "Which is a comedy film, The Million Dollar Duck or Don Quixote?": for
    the query "comedy film Don Quixote" the model wrote "[1] Don Quixote is a comedy film." (three times);
    the words are spread over two passages (the novel's and another comedy film's), none states it, and
    the run answered "Don Quixote". A restatement one passage does hold is kept."""
    found = [
        Passage(
            id="Don Quixote#0",
            title="Don Quixote",
            text="The Ingenious Nobleman Sir Quixote of La Mancha, or just Don Quixote, is a Spanish novel by "
            "Miguel de Cervantes.",
        ),
        Passage(
            id="Local Kung Fu 2#0", title="Local Kung Fu 2", text="Local Kung Fu 2 is a 2017 Hong Kong comedy film."
        ),
    ]
    g = ground("[1] Don Quixote is a comedy film. [2] Don Quixote is a comedy film.", found, "comedy film Don Quixote")
    assert g.text == "" and g.why == ["restates the query as a fact no one document states"] * 2
    duck = [
        Passage(id="d", title="The Million Dollar Duck", text="The Million Dollar Duck is a 1971 American comedy film.")
    ]
    kept = ground("[1] The Million Dollar Duck is a comedy film.", duck, "comedy film The Million Dollar Duck")
    assert kept.text == "The Million Dollar Duck is a comedy film." and not kept.dropped
    zh = [
        Passage(id="a", title="堂吉诃德", text="《堂吉诃德》是西班牙作家塞万提斯的长篇小说。"),
        Passage(id="b", title="本地功夫2", text="《本地功夫2》是2017年的香港喜剧电影。"),
    ]
    assert ground("[1] 堂吉诃德是喜剧电影。", zh, "喜剧电影 堂吉诃德").why == [  # Chinese: by characters
        "restates the query as a fact no one document states"
    ]
    assert ground("[2] 本地功夫2是喜剧电影。", zh, "喜剧电影 本地功夫2").text == "本地功夫2是喜剧电影。"


# -- an answer of the wrong kind (MuSiQue: "When was the astronomical clock built in the city where
# Karel Purkyně died?" was answered "Prague" by RAG; Search-o1 boxed "South Korea" for "When was the
# last time the Olympics were held in the country that released …?") ------------------------------
PURKYNE = [
    ("Karel Purkyně", "Karel Purkyně (15 March 1834 – 5 April 1868) was a Czech painter. He died in Prague."),
    ("Prague astronomical clock", "The Prague astronomical clock is a medieval astronomical clock attached to the Old Town Hall in Prague. The clock mechanism was built in 1410."),
]  # fmt: skip
PURKYNE_Q = "When was the astronomical clock built in the city where Karel Purkyně died?"


@pytest.fixture(scope="module")
def purkyne(tmp_path_factory: pytest.TempPathFactory):
    return _titled_index(tmp_path_factory, "purkyne", PURKYNE)


def _titled_index(tmp_path_factory: pytest.TempPathFactory, name: str, docs: list[tuple[str, str]]):
    """A real index of (title, text) passages, each id its title, all under ``acl=all``."""
    path = tmp_path_factory.mktemp(name) / "docs.jsonl"
    rows = [{"id": t, "title": t, "text": x, "acl": "all"} for t, x in docs]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return open_retriever(str(path), cache_dir=tmp_path_factory.mktemp(f"{name}-idx"))


def _purkyne_turns(last: str) -> list[str]:
    return [
        " First, I need to find where Karel Purkyně died. <|begin_search_query|> Karel Purkyně death place ",
        "Karel Purkyně died in Prague.\nFinal answer: \\boxed{Prague} ",
        "<|begin_search_query|> Prague astronomical clock built ",
        last,
    ]


def test_an_answer_of_the_wrong_kind_is_sent_back_once(purkyne) -> None:
    prompts: list[str] = []
    script = scripted(
        _purkyne_turns("The clock mechanism was built in 1410.\nFinal answer: \\boxed{1410} "),
        ["Karel Purkyně died in Prague.", "The clock mechanism was built in 1410."],
        final="unused",
        prompts=prompts,
    )
    s = get_strategy("search-o1", ScriptedLLM(script), purkyne, k=1, max_steps=4, lang="en")
    r = s.run(PURKYNE_Q, filters=SCOPE)
    assert r.finish_reason == FINISHED and r.short_answer == "1410" and r.searches == 2
    (note,) = [e.data for e in r.trace.of("note") if e.data.get("type") == "kind_guard"]
    assert note["answer"] == "Prague" and note["expected"] == "date"
    # the third turn reads the notice right after its boxed answer
    assert prompts[2].endswith(
        '\\boxed{Prague} \nThe question asks for a date or a year, and "Prague" is not one. '
        "Find what is still missing: search for it, then give the final answer.\n"
    )


def test_the_second_answer_of_the_wrong_kind_stands(purkyne) -> None:
    script = scripted(
        _purkyne_turns("Final answer: \\boxed{Prague} "),
        ["Karel Purkyně died in Prague.", "The clock mechanism was built in 1410."],
        final="unused",
    )
    r = get_strategy("search-o1", ScriptedLLM(script), purkyne, k=1, max_steps=4, lang="en").run(
        PURKYNE_Q, filters=SCOPE
    )
    assert r.short_answer == "Prague" and r.finish_reason == FINISHED
    assert [e.data.get("type") for e in r.trace.of("note")].count("kind_guard") == 1


def test_no_search_left_means_no_steering(purkyne) -> None:
    script = scripted(_purkyne_turns("unused")[:2], ["Karel Purkyně died in Prague."], final="unused")
    r = get_strategy("search-o1", ScriptedLLM(script), purkyne, k=1, max_steps=1, lang="en").run(
        PURKYNE_Q, filters=SCOPE
    )
    assert r.short_answer == "Prague" and "kind_guard" not in [e.data.get("type") for e in r.trace.of("note")]


# -- rgb_zh (qwen2.5-1.5b): "北京冬奥会和冬残奥会的开幕日期分别是什么时候?" searched the first part, then its
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
    assert "repeated_query" not in [e.data.get("type") for e in r.trace.of("note")]
    assert r.answer == "2022年2月4日、2022年3月4日"


@pytest.mark.parametrize(
    ("a", "b", "near"),
    [
        ("北京 冬奥会 开幕日期", "北京 冬残奥会 开幕日期", False),  # one character more: another entity
        ("差旅 报销 期限", "报销 差旅 期限", True),  # the same words
        ("Landsman Kill New York State Route 308", "Landsman Kill New York State Route 308 location", True),
        ("Katrina Bowden movie", "Katrina Bowden Sean Anders movie", False),
    ],
)
def test_near_duplicate_queries(a: str, b: str, near: bool) -> None:
    from sleuth.strategies.search_o1 import NEAR_DUPLICATE
    from sleuth.strategies.text import query_similarity

    assert (query_similarity(a, b) >= NEAR_DUPLICATE) is near
