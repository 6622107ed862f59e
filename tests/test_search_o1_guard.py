"""Search-o1's Reason-in-Documents grounding and its steering repeat guard, on real traces.

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
from sleuth.search.base import Filters, Passage
from sleuth.strategies import FINISHED, REPEAT_LIMIT, get_strategy
from sleuth.strategies.rid_support import closest_sentence, ground, sentences

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


def test_answer_before_a_repeated_query_ends_the_run(retriever) -> None:
    """HotpotQA train (the recorded shape): the model wrote ``\\boxed{Standard Oil}`` and then asked
    its first query again; it used to burn two more turns on "already searched" notices (step_limit)."""
    script = scripted(
        [
            " First, I need to find the financier who owned Indian Mound Cottage. <|begin_search_query|> Indian Mound Cottage owner ",
            "Now, I need to find the company William Rockefeller co-founded. <|begin_search_query|> William Rockefeller co-founded company ",
            "Indian Mound Cottage was owned by William Rockefeller, who co-founded Standard Oil.\nFinal answer: \\boxed{Standard Oil} <|begin_search_query|> Indian Mound Cottage owner ",
        ],
        [
            "Indian Mound Cottage is a mansion that was owned by oil executive William Rockefeller.",
            "William Rockefeller was a co-founder of Standard Oil along with his older brother John Davison Rockefeller.",
        ],
        final="unused",
    )  # fmt: skip
    s = get_strategy("search-o1", ScriptedLLM(script), retriever, k=2, max_steps=6, lang="en")
    r = s.run("Indian Mound Cottage was owned by the financier that co-founded which company?", filters=SCOPE)
    assert r.finish_reason == FINISHED and r.answer == "Standard Oil"
    assert "final answer" not in _steps(r) and r.searches == 2
    note = next(e.data for e in r.trace.of("note") if e.data.get("type") == "answer_before_repeat")
    assert note["repeat_of"] == "Indian Mound Cottage owner"


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
    notes = [e.data for e in r.trace.of("note")]
    assert [n["type"] for n in notes if n["type"] in ("repeated_query", "repeat_guard")] == [
        "repeated_query",
        "repeat_guard",
    ]
    assert 'You already searched "Kilby electronics phenomenon". Its result was: Nothing was found.' in prompts[3]
    assert "Search for another fact you still need" in prompts[3]
    assert _steps(r)[-1] == "final answer"


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
    note = next(e.data for e in r.trace.of("note") if e.data.get("type") == "repeated_query")
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


def test_reason_in_documents_drops_a_fact_from_memory(retriever) -> None:
    """HotpotQA train (the recorded shape): Reason-in-Documents repeated the reasoning's own claim
    "... directed by the American filmmaker Steven Spielberg"; no retrieved passage names Spielberg."""
    script = scripted(
        [
            " First, I need to find the show in which Dominic Cooper played young Howard Stark. <|begin_search_query|> Dominic Cooper Howard Stark show ",
            "Next, I need to find the film that inspired this show. The film that inspired the show was directed by the American filmmaker Steven Spielberg. <|begin_search_query|> film that inspired Agent Carter ",
            'The show "Agent Carter" was inspired by a 2011 film.\nFinal answer: \\boxed{Agent Carter} ',
        ],
        [
            'Dominic Cooper played the young Howard Stark in the Marvel Cinematic Universe, including the ABC series "Agent Carter".',
            "The film that inspired the show was directed by the American filmmaker Steven Spielberg.",
        ],
        final="unused",
    )  # fmt: skip
    s = get_strategy("search-o1", ScriptedLLM(script), retriever, k=3, max_steps=6, lang="en")
    r = s.run(
        "What ABC television series was inspired by a 2011 film and cast Dominic Cooper as young Howard Stark?",
        filters=SCOPE,
    )
    first, second = (e.data for e in r.trace.of("reason_in_documents"))
    assert first["helpful"] and "Agent Carter" in first["info"] and not first["dropped"]
    assert "Spielberg" not in second["info"]  # what is left is a quoted passage sentence, or "nothing found"
    assert second["info"].startswith("The documents say: (") or second["info"] == "No helpful information found."
    assert second["dropped"] == [
        {
            "sentence": "The film that inspired the show was directed by the American filmmaker Steven Spielberg.",
            "why": "name not in the documents: spielberg, steven",
        }
    ]


def test_nothing_found_quotes_the_closest_document_sentence(retriever) -> None:
    """HotpotQA train (the recorded shape): Reason-in-Documents answered "Nothing was found." twice
    although the passages name the film ("He starred in films such as ... "Casablanca" (1942)"; "The
    film was produced by Harold Brent Wallis and stars Humphrey Bogart"); the run then repeated its
    query and answered "Nothing was found".  Now the passage sentence that covers most of the query
    is quoted instead."""
    prompts: list[str] = []
    again = "I need to search for the 1942 film produced by Harold Brent Wallis and starring Humphrey Bogart. <|begin_search_query|> Harold Brent Wallis Humphrey Bogart film "
    script = scripted(
        [" First, I need the 1942 films of Humphrey Bogart. <|begin_search_query|> Humphrey Bogart films 1942 ", again, again, again],
        ["Nothing was found.", "Nothing was found."],
        final="Nothing was found",
        prompts=prompts,
    )  # fmt: skip
    s = get_strategy("search-o1", ScriptedLLM(script), retriever, k=3, max_steps=6, lang="en")
    r = s.run(
        "Harold Brent Wallis as producer and Humphrey Bogart as actor collaborated to make what 1942 film?",
        filters=SCOPE,
    )
    first, second = (e.data for e in r.trace.of("reason_in_documents"))
    assert first["quoted"] and first["helpful"]
    assert first["info"].startswith('The documents say: (Humphrey Bogart) He starred in films such as "The Maltese')
    assert second["info"].startswith(
        "The documents say: (Casablanca (film)) The film was produced by Harold Brent Wallis and stars Humphrey Bogart"
    )
    assert first["info"] in prompts[1] and second["info"] in prompts[2]
    assert r.finish_reason == REPEAT_LIMIT


def _p(title: str, text: str) -> Passage:
    return Passage(id=title, doc_id=title, title=title, text=text)


BASHLACHEV = _p("Alexander Bashlachev", "Alexander Nickolaevich Bashlachev (May 27, 1960 – February 17, 1988) was a Soviet poet and singer-songwriter.")  # fmt: skip
DYAGILEVA = _p(
    "Yanka Dyagileva", 'Yana "Yanka" Stanislavovna Dyagileva (4 September 1966 – 9 May 1991) was a Russian poet.'
)


def test_ground_keeps_document_facts_with_their_document_numbers() -> None:
    info = "Alexander Bashlachev was born on May 27, 1960 [1]. Yanka Dyagileva was born on 4 September 1966. [2]"
    g = ground(info, [BASHLACHEV, DYAGILEVA], "birth dates Alexander Bashlachev Yanka Dyagileva")
    assert not g.dropped and g.cited == [1, 2]
    assert g.text == "Alexander Bashlachev was born on May 27, 1960. Yanka Dyagileva was born on 4 September 1966."


def test_ground_reads_document_numbers_written_before_the_sentence() -> None:
    """qwen2.5-1.5b with the new Reason-in-Documents prompt numbers its sentences in front and lists
    unused numbers at the end (the recorded shape, on the Dominic Cooper step above)."""
    cooper = _p("Dominic Cooper", DOCS[3][1])
    raw = (
        "[1] Dominic Cooper played the young Howard Stark in the Marvel Cinematic Universe, including the ABC "
        'series "Agent Carter". [2] [3] [4] [5]'
    )
    g = ground(raw, [cooper], "Dominic Cooper Howard Stark show")
    assert g.cited == [1] and not g.dropped and g.text.startswith("Dominic Cooper played the young Howard Stark")
    g = ground("[2] The film that inspired the show was directed by the American filmmaker Steven Spielberg.", [cooper])
    assert g.text == "" and g.why[0].startswith("name not in the documents: ")


def test_ground_drops_numbers_the_documents_do_not_state() -> None:
    """The recorded kind (latitudes neither passage gives), on HotpotQA-train's Pizza Inn / Papa Gino's."""
    inn = _p("Pizza Inn", "Pizza Inn is an American restaurant chain based in the Dallas suburb of The Colony, Texas.")  # fmt: skip
    gino = _p("Papa Gino's", "Papa Gino's, Inc. is a restaurant chain based in Dedham, Massachusetts.")  # fmt: skip
    g = ground("The latitude of The Colony is 33.09° N, and the latitude of Dedham is 42.24° N.", [inn, gino])
    assert g.text == "" and g.why == ["number not in the documents: 33, 09, 42"]


def test_ground_numbers_words_and_separators() -> None:
    band = _p("Wavves", "Wavves is an American rock band with four members.")
    assert ground("Wavves has 4 members.", [band]).kept  # 4 written as a word
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


# -- an answer of the wrong kind (MuSiQue, the recorded shape: a "when" question about a place was answered
# with the place by RAG; Search-o1 boxed "South Korea" for "When was the last time the Olympics were held in
# the country that released …?"), on MuSiQue's tuning question 2hop__26979_85063 -------------------------------
TULSA = [
    ("Oklahoma", "The Philbrook Museum of Tulsa is considered one of the top 50 fine art museums in the United States."),
    ("Admiral Twin", "Admiral Twin released their debut CD, Unlucky, in December 1997. In support of Unlucky, they toured with local Tulsa pop-stars Hanson in the summer of 1998."),
]  # fmt: skip
TULSA_Q = "When did the Admiral Twin open in the city where the Philbrook Museum is located?"


@pytest.fixture(scope="module")
def tulsa(tmp_path_factory: pytest.TempPathFactory):
    return _titled_index(tmp_path_factory, "tulsa", TULSA)


def _titled_index(tmp_path_factory: pytest.TempPathFactory, name: str, docs: list[tuple[str, str]]):
    """A real index of (title, text) passages, each id its title, all under ``acl=all``."""
    path = tmp_path_factory.mktemp(name) / "docs.jsonl"
    rows = [{"id": t, "title": t, "text": x, "acl": "all"} for t, x in docs]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return open_retriever(str(path), cache_dir=tmp_path_factory.mktemp(f"{name}-idx"))


def _tulsa_turns(last: str) -> list[str]:
    return [
        " First, I need to find where the Philbrook Museum is located. <|begin_search_query|> Philbrook Museum location ",
        "The Philbrook Museum is in Tulsa.\nFinal answer: \\boxed{Tulsa} ",
        "<|begin_search_query|> Admiral Twin Tulsa 1998 ",
        last,
    ]


def test_an_answer_of_the_wrong_kind_is_sent_back_once(tulsa) -> None:
    prompts: list[str] = []
    script = scripted(
        _tulsa_turns("Admiral Twin toured in the summer of 1998.\nFinal answer: \\boxed{1998} "),
        ["The Philbrook Museum is in Tulsa.", "Admiral Twin toured in the summer of 1998."],
        final="unused",
        prompts=prompts,
    )
    s = get_strategy("search-o1", ScriptedLLM(script), tulsa, k=1, max_steps=4, lang="en")
    r = s.run(TULSA_Q, filters=SCOPE)
    assert r.finish_reason == FINISHED and r.short_answer == "1998" and r.searches == 2
    (note,) = [e.data for e in r.trace.of("note") if e.data.get("type") == "kind_guard"]
    assert note["answer"] == "Tulsa" and note["expected"] == "date"
    # the third turn reads the notice right after its boxed answer
    assert prompts[2].endswith(
        '\\boxed{Tulsa} \nThe question asks for a date or a year, and "Tulsa" is not one. '
        "Find what is still missing: search for it, then give the final answer.\n"
    )


def test_the_second_answer_of_the_wrong_kind_stands(tulsa) -> None:
    script = scripted(
        _tulsa_turns("Final answer: \\boxed{Tulsa} "),
        ["The Philbrook Museum is in Tulsa.", "Admiral Twin toured in the summer of 1998."],
        final="unused",
    )
    r = get_strategy("search-o1", ScriptedLLM(script), tulsa, k=1, max_steps=4, lang="en").run(TULSA_Q, filters=SCOPE)
    assert r.short_answer == "Tulsa" and r.finish_reason == FINISHED
    assert [e.data.get("type") for e in r.trace.of("note")].count("kind_guard") == 1


def test_no_search_left_means_no_steering(tulsa) -> None:
    script = scripted(_tulsa_turns("unused")[:2], ["The Philbrook Museum is in Tulsa."], final="unused")
    r = get_strategy("search-o1", ScriptedLLM(script), tulsa, k=1, max_steps=1, lang="en").run(TULSA_Q, filters=SCOPE)
    assert r.short_answer == "Tulsa" and "kind_guard" not in [e.data.get("type") for e in r.trace.of("note")]


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
        (
            "Castle Hill plantation Thomas Jefferson residence",
            "Castle Hill plantation Thomas Jefferson residence location",
            True,
        ),
        ("Humphrey Bogart films 1942", "Harold Brent Wallis Humphrey Bogart film", False),
    ],
)
def test_near_duplicate_queries(a: str, b: str, near: bool) -> None:
    from sleuth.strategies.search_o1 import NEAR_DUPLICATE
    from sleuth.strategies.text import query_similarity

    assert (query_similarity(a, b) >= NEAR_DUPLICATE) is near
