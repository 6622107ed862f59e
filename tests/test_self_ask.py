"""Self-Ask on comparison questions and repeat guards, on the scripted model.

The failures are the ones qwen2.5-1.5b's committed HotpotQA traces show (docs/results/hotpotqa-open,
self-ask): the first follow-up restates the comparison, asks about neither option, or a new hop
on the same entity was refused as a "repeat".  Those traces are on the reporting split, so the
questions here are HotpotQA-train's ("Who was born first, Yanka Dyagileva or Alexander
Bashlachev?", "Which genus has more species in it, Othonna or Stangeria?", "Are both Stephen R.
Donaldson and Michael Moorcock science fiction writers?"), the replies are written in the shape
of the recorded ones, and the passages are shortened from the questions' HotpotQA paragraphs.
The Chinese test is the first one in Chinese.
"""

from __future__ import annotations

import json

import pytest

from sleuth.llm.base import GenParams, Message
from sleuth.llm.scripted import ScriptedLLM
from sleuth.search import open_retriever
from sleuth.search.base import Filters, Retriever
from sleuth.strategies import Result, get_strategy
from sleuth.strategies.self_ask_questions import asks_nothing_new, find_comparison, named, off_attribute

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


def _model_part(prompt: str, lang: str) -> str:
    return prompt.rsplit("Are follow up questions needed here:" if lang == "en" else "需要追问吗：", 1)[-1]


def _run(retriever: Retriever, question: str, script, lang: str = "en", max_steps: int = 5) -> tuple[Result, list]:
    llm = ScriptedLLM(script)
    # the scaffold's guards: its own final answer, without the final reading pass (tests/test_self_ask_read.py)
    s = get_strategy("self-ask", llm, retriever, k=3, max_steps=max_steps, lang=lang, final_read=False)
    r = s.run(question, filters=SCOPE)
    return r, llm.calls


def _scaffold(r: Result) -> str:
    return next(e.data["text"] for e in r.trace.of("note") if e.data.get("type") == "scaffold")


def test_a_restated_comparison_is_asked_per_option_and_answered_with_an_option(retriever: Retriever) -> None:
    """As recorded on the reporting split: the restated comparison "Follow up: Who was born earlier,
    A or B?" was searched whole, the extraction judged one born earlier than the other and the
    answer was wrong.  Now each option gets its own follow-up asking the compared attribute;
    when the model restates the comparison again, the final answer is forced."""
    question = "Who was born first, Yanka Dyagileva or Alexander Bashlachev?"
    restated = "Follow up: Who was born earlier, Yanka Dyagileva or Alexander Bashlachev?\n"

    def script(payload: str | list[Message], params: GenParams) -> str:
        if isinstance(payload, list):  # extraction
            asked = str(payload[-1]["content"]).rsplit("Question:", 1)[-1]
            if "Dyagileva" in asked:
                return "Yanka Dyagileva was born on 4 September 1966."
            return "Alexander Bashlachev was born on May 27, 1960."
        if payload.endswith("About Yanka Dyagileva:"):
            return " When was Yanka Dyagileva born?\n"
        if payload.endswith("About Alexander Bashlachev:"):
            return " When was Alexander Bashlachev born?\n"
        if payload.endswith("So the final answer is:"):
            return " Alexander Bashlachev was born earlier than Yanka Dyagileva.\n"
        mine = _model_part(payload, "en")
        return restated if "Intermediate answer:" in mine else " Yes.\n" + restated

    r, calls = _run(retriever, question, script)
    fus = [e.data for e in r.trace.of("follow_up")]
    assert fus[0]["off_attribute"] and fus[0]["restates_question"]
    assert fus[0]["replaced_by"] == ["Yanka Dyagileva", "Alexander Bashlachev"]
    assert [f.get("per_option") for f in fus[1:3]] == ["Yanka Dyagileva", "Alexander Bashlachev"]
    assert fus[3]["replaced_by"] == []  # every option asked: on to the final answer
    scaffold = _scaffold(r)
    assert "Follow up: When was Yanka Dyagileva born?\nIntermediate answer: Yanka Dyagileva was born on" in scaffold
    assert "Follow up: When was Alexander Bashlachev born?\nIntermediate answer: Alexander Bashlachev" in scaffold
    assert "Who was born earlier" not in scaffold  # the restated comparison never enters the scaffold
    assert r.searches == 2
    # the second option's prompt extends the first's (the server's prompt cache reuses it)
    option_prompts = [c.payload for c in calls if isinstance(c.payload, str) and "\nAbout " in c.payload[-40:]]
    assert option_prompts[1].startswith(option_prompts[0] + " When was Yanka Dyagileva born?")
    assert r.short_answer == "Alexander Bashlachev"
    assert "option_answer" in [e.data.get("type") for e in r.trace.of("note")]


def test_a_comparison_answer_naming_no_option_is_chosen_among_them(retriever: Retriever) -> None:
    """As recorded on the reporting split: a choice question got a first follow-up that named no
    option ("Which genus has the most species?" here) and a final answer that is not an option
    ("Senecio")."""
    question = "Which genus has more species in it, Othonna or Stangeria?"
    chosen: list[str] = []

    def script(payload: str | list[Message], params: GenParams) -> str:
        if isinstance(payload, list):
            text = str(payload[-1]["content"])
            if text.startswith("Answer the question with exactly one of the options"):
                chosen.append(text)
                return "Othonna"
            if "Stangeria" in text.rsplit("Question:", 1)[-1]:
                return "Stangeria eriopus is the sole species in the genus Stangeria."
            return "unknown"
        if payload.endswith("About Othonna:"):
            return " How many species are in the genus Othonna?\n"
        if payload.endswith("About Stangeria:"):
            return " How many species are in the genus Stangeria?\n"
        mine = _model_part(payload, "en")
        if mine.endswith("Intermediate answer:"):  # the model answers a follow-up the passages do not
            return " unknown\n"
        if "Intermediate answer:" in mine:
            return "So the final answer is: Senecio\n"
        return " Yes.\nFollow up: Which genus has the most species?\n"

    r, _ = _run(retriever, question, script)
    fus = [e.data for e in r.trace.of("follow_up")]
    assert fus[0]["off_attribute"] and "restates_question" not in fus[0]
    assert [f["question"] for f in fus[1:]] == [
        "How many species are in the genus Othonna?",
        "How many species are in the genus Stangeria?",
    ]
    sources = [e.data["source"] for e in r.trace.of("intermediate_answer")]
    assert sources == ["model", "search"]
    assert "Options: Othonna or Stangeria" in chosen[0] and "sole species" in chosen[0]
    assert r.answer == "Othonna" and r.short_answer == "Othonna"


def test_a_new_hop_on_the_same_entity_is_not_a_repeat_and_yes_no_is_the_short_answer(retriever: Retriever) -> None:
    """As recorded on the reporting split: "Where is X from?" after "Who is X?" was refused as a
    repeat (the same content words), and the final answer carried the copied notice.  Now it is
    searched like any new follow-up; the short answer of a yes/no comparison is the yes or no
    the final answer starts with (here the forced final answer)."""
    question = "Are both Stephen R. Donaldson and Michael Moorcock science fiction writers?"
    follow_ups = [
        " Yes.\nFollow up: Who is Stephen R. Donaldson?\n",
        "Follow up: Where is Stephen R. Donaldson from?\n",
        "Follow up: Who is Michael Moorcock?\n",
        "Follow up: Where is Michael Moorcock from?\n",
    ]

    def script(payload: str | list[Message], params: GenParams) -> str:
        if isinstance(payload, list):
            asked = str(payload[-1]["content"]).rsplit("Question:", 1)[-1]
            if "Donaldson" in asked:
                return "Stephen R. Donaldson is an American fantasy, science fiction and mystery novelist."
            return "Michael Moorcock is an English writer, primarily of science fiction and fantasy."
        if payload.endswith("So the final answer is:"):  # the step limit forces it
            return " Yes. Both Stephen R. Donaldson and Michael Moorcock are science fiction writers.\n"
        return follow_ups[_model_part(payload, "en").count("Intermediate answer:")]

    r, _ = _run(retriever, question, script, max_steps=4)
    fus = [e.data for e in r.trace.of("follow_up")]
    assert [f["question"] for f in fus] == [f.split("Follow up: ")[1].strip() for f in follow_ups]
    assert not any(f.get("repeat_of") for f in fus) and r.searches == 4
    assert "already asked" not in _scaffold(r)
    assert r.answer.startswith("Yes. Both Stephen R. Donaldson") and r.short_answer == "Yes"


def test_a_final_answer_that_decomposed_nothing_gets_one_more_follow_up(retriever: Retriever) -> None:
    """Recorded on MuSiQue: the only follow-up restated the question, its search answered
    "South Africa" and the model gave that as the final answer (gold: Niger River); 14 of the
    100 MuSiQue runs did this (F1 0.01).  Now the scaffold is continued at "Follow up:" once,
    and the model's next sub-question is searched like any other (the replies after the
    recorded ones follow the shape of a recorded run that decomposed itself)."""
    question = "What is the country where Baure is located named after?"
    follow_ups = {
        0: " Yes.\nFollow up: What is the country where Baure is located named after?\n",
        1: "So the final answer is: South Africa",
        2: "Follow up: What is Nigeria named after?\n",
        3: "So the final answer is: the Niger River\n",
    }

    def script(payload: str | list[Message], params: GenParams) -> str:
        if isinstance(payload, list):
            asked = str(payload[-1]["content"]).rsplit("Question:", 1)[-1]
            if "located named after" in asked:
                return "South Africa"
            if "Which country" in asked:
                return "Baure is in Katsina State, Nigeria."
            return "Nigeria was named after the Niger River."
        if payload.endswith("Follow up:"):
            return " Which country is Baure located in?\n"
        return follow_ups[_model_part(payload, "en").count("Intermediate answer:")]

    r, _ = _run(retriever, question, script)
    notes = [e.data for e in r.trace.of("note")]
    assert [n.get("dropped_final") for n in notes if n.get("type") == "decompose"] == ["South Africa"]
    fus = [e.data["question"] for e in r.trace.of("follow_up")]
    assert fus == [question, "Which country is Baure located in?", "What is Nigeria named after?"]
    scaffold = _scaffold(r)
    assert "South Africa\nFollow up: Which country is Baure located in?\nIntermediate answer: Baure is in" in scaffold
    assert "So the final answer is: South Africa" not in scaffold
    assert r.short_answer == "the Niger River" and r.searches == 3


def test_a_decomposed_run_keeps_its_final_answer(retriever: Retriever) -> None:
    """No nudge when a follow-up was a sub-question (the usual case): the final answer stands."""
    replies = [" Yes.\nFollow up: Which country is Baure located in?\n", "So the final answer is: Nigeria\n"]

    def script(payload: str | list[Message], params: GenParams) -> str:
        if isinstance(payload, list):
            return "Baure is in Katsina State, Nigeria."
        return replies[_model_part(payload, "en").count("Intermediate answer:")]

    r, calls = _run(retriever, "What is the country where Baure is located named after?", script)
    assert r.short_answer == "Nigeria" and len(calls) == 3
    assert "decompose" not in [e.data.get("type") for e in r.trace.of("note")]


def test_chinese_restated_comparison_is_asked_per_option(retriever: Retriever) -> None:
    question = "扬卡·季亚吉列娃和亚历山大·巴什拉乔夫谁出生得更早？"
    restated = "追问：扬卡·季亚吉列娃和亚历山大·巴什拉乔夫谁出生得更早？\n"

    def script(payload: str | list[Message], params: GenParams) -> str:
        if isinstance(payload, list):
            asked = str(payload[-1]["content"]).rsplit("问题：", 1)[-1]
            if "季亚吉列娃" in asked:
                return "扬卡·季亚吉列娃出生于1966年9月4日。"
            return "亚历山大·巴什拉乔夫出生于1960年5月27日。"
        if payload.endswith("关于扬卡·季亚吉列娃："):
            return "扬卡·季亚吉列娃是哪一年出生的？\n"
        if payload.endswith("关于亚历山大·巴什拉乔夫："):
            return "亚历山大·巴什拉乔夫是哪一年出生的？\n"
        mine = _model_part(payload, "zh")
        return "所以最终答案是：亚历山大·巴什拉乔夫出生得更早\n" if "中间答案" in mine else "是。\n" + restated

    r, _ = _run(retriever, question, script, lang="zh")
    fus = [e.data for e in r.trace.of("follow_up")]
    assert fus[0]["off_attribute"] and fus[0]["replaced_by"] == ["扬卡·季亚吉列娃", "亚历山大·巴什拉乔夫"]
    scaffold = _scaffold(r)
    assert "追问：扬卡·季亚吉列娃是哪一年出生的？\n中间答案：扬卡·季亚吉列娃出生于1966年9月4日" in scaffold
    assert "追问：亚历山大·巴什拉乔夫是哪一年出生的？\n中间答案：亚历山大·巴什拉乔夫出生于" in scaffold
    assert "谁出生得更早" not in scaffold
    assert r.short_answer == "亚历山大·巴什拉乔夫"


@pytest.mark.parametrize(
    ("question", "options", "choice", "yes_no"),
    [  # the question forms of the committed HotpotQA comparison traces, on HotpotQA-train questions
        (
            "In between  Polytechnic University of the Philippines and California Polytechnic State University which "
            "was founded as a vocational high school?",
            ("Polytechnic University of the Philippines", "California Polytechnic State University"),
            1,
            0,
        ),
        ("Which band was formed first, Wavves or Social Code?", ("Wavves", "Social Code"), 1, 0),
        (
            "Which director, John Schlesinger or Barbara Albert, was also a writer and film producer?",
            ("John Schlesinger", "Barbara Albert"),
            1,
            0,
        ),
        (
            "Who has more scope of profession, Brian G. Hutton or Xawery Żuławski?",
            ("Brian G. Hutton", "Xawery Żuławski"),
            1,
            0,
        ),
        ("who is younger Ulrich Walter or  Luca Parmitano?", ("Ulrich Walter", "Luca Parmitano"), 1, 0),
        (  # after a colon the options begin, a comma inside one of them (HotpotQA train, the settle check)
            "Which long-established US university is older: University of California, Berkeley or Syracuse University?",
            ("University of California, Berkeley", "Syracuse University"),
            1,
            0,
        ),
        ("Are Mike Bryan and Ray Ruffels both tennis players?", ("Mike Bryan", "Ray Ruffels"), 0, 1),
        ("Cranium and Twin Tin Bots are both what?", ("Cranium", "Twin Tin Bots"), 0, 0),
        # the predicate's capitalised words are not the second option's (HotpotQA train): a nationality or
        # creed before its noun, and the last word of a question that ends after the options
        ("Are both Jonathan Marray and Wayne Black British?", ("Jonathan Marray", "Wayne Black"), 0, 1),
        (
            "Are both Deerhunter and Nine Lashes American Christian rock bands?",
            ("Deerhunter", "Nine Lashes"),
            0,
            1,
        ),
        (
            "Were both Terence Fisher and Leopoldo Torre Nilsson British film directors?",
            ("Terence Fisher", "Leopoldo Torre Nilsson"),
            0,
            1,
        ),
        ("Are both Wayne Black and Jonathan Marray Democrats?", ("Wayne Black", "Jonathan Marray"), 0, 1),
        # ... but a name's own ending stays: after "both" comes the predicate, and the second option keeps
        # as many words as the first has (up to two)
        ("Are Ana Kasparian and Katherine Sarafian both Armenian-", ("Ana Kasparian", "Katherine Sarafian"), 0, 1),
        ("Are both Ana Kasparian and Katherine Sarafian journalists?", ("Ana Kasparian", "Katherine Sarafian"), 0, 1),
        ("Are both Deerhunter and Wavves American bands?", ("Deerhunter", "Wavves"), 0, 1),
        # "first of A and B", with no question mark (HotpotQA train): the choice answer_type reads
        ("Who was born first of Leslie S. Hiscott and James Rolfe", ("Leslie S. Hiscott", "James Rolfe"), 1, 0),
        ("Which band was formed first of Wavves and Social Code?", ("Wavves", "Social Code"), 1, 0),
        ("穆罕默德·阿里和艾伦·图灵谁活得更久？", ("穆罕默德·阿里", "艾伦·图灵"), 1, 0),
        ("哪本杂志创刊更早，《Woman's Day》还是《The Lady》？", ("《Woman's Day》", "《The Lady》"), 1, 0),
    ],
)
def test_find_comparison(question: str, options: tuple[str, ...], choice: int, yes_no: int) -> None:
    cmp = find_comparison(question)
    assert cmp is not None and cmp.options == options
    assert (cmp.choice, cmp.yes_no) == (bool(choice), bool(yes_no))


@pytest.mark.parametrize(
    "question",
    [  # HotpotQA-train bridge questions with an "and" or "or", and Chinese multi-part questions (rgb_zh)
        "Indian Mound Cottage was owned by the financier that co-founded which company?",
        "Harold Brent Wallis as producer and Humphrey Bogart as actor collaborated to make what 1942 film?",
        "Who starred in the 1991 American action comedy film The Hard Way and was featured on the roster of Rawkus "
        "Records?",
        # no capitalised options: not a choice, whatever the comparative reads ("grandfather"; StrategyQA)
        "Did either Kublai Khan or his grandfather practice monogamy?",
        "2022年澳网男单和女单冠军分别是谁？",
        "上海和北京2023年新任市长是谁？",
        "行程取消后，退票费用还要按普通差旅期限提交吗？",
    ],
)
def test_not_a_comparison(question: str) -> None:
    assert find_comparison(question) is None


def test_off_attribute_follow_ups() -> None:
    cmp = find_comparison("Who has more scope of profession, Brian G. Hutton or Xawery Żuławski?")
    assert cmp is not None
    assert off_attribute("Who is Brian G. Hutton?", cmp, 0)  # a choice's first follow-up: asked per option
    assert off_attribute("What professions does Brian G. Hutton have?", cmp, 0)
    assert off_attribute("Which lake is it, Brian G. Hutton or Xawery Żuławski?", cmp, 1)  # restated, any time
    assert not off_attribute("Who is Xawery Żuławski?", cmp, 1)  # later follow-ups are the model's
    mines = find_comparison("Which famous mine was in service first, the Salmita Mine or the Kanichee Mine?")
    assert mines is not None and named("When did the Salmita Mine open?", mines.options) == ["Salmita Mine"]
    both = find_comparison("Are Mike Bryan and Ray Ruffels both tennis players?")
    assert both is not None and not off_attribute("Who is Mike Bryan?", both, 0)  # yes/no: who it is is the attribute
    assert off_attribute("What is the name of the tennis player?", both, 0)  # yes/no, no option named
    assert off_attribute("Are Mike Bryan and Ray Ruffels both from California?", both, 0)
    shared = find_comparison("Cranium and Twin Tin Bots are both what?")
    assert shared is not None and not off_attribute("What are Cranium and Twin Tin Bots?", shared, 0)


@pytest.mark.parametrize(
    ("new", "old", "repeat"),
    [  # the kinds refused as repeats before in the committed traces, each a new hop (on HotpotQA-train entities)
        ("When was Yanka Dyagileva born?", "Who was Yanka Dyagileva?", False),
        ("Where is Stephen R. Donaldson from?", "Who is Stephen R. Donaldson?", False),
        ("Who is Juan Manuel Márquez's brother?", "Who is Juan Manuel Márquez?", False),
        ("Where was Leopoldo Torre Nilsson born?", "Who was Leopoldo Torre Nilsson?", False),
        # true repeats stay repeats
        (
            "Who commanded the Russian armies at the Battle of Tannenberg?",
            "Who commanded the Russian armies at the Battle of Tannenberg?",
            True,
        ),
        ("Who is the director who was a film producer?", "Who is the director who was also a film producer?", True),
        ("艾伦·图灵去世时多少岁？", "艾伦·图灵去世时多少岁？", True),
        ("艾伦·图灵在哪里出生？", "艾伦·图灵是谁？", False),
    ],
)
def test_asks_nothing_new(new: str, old: str, repeat: bool) -> None:
    assert asks_nothing_new(new, old) is repeat


# -- from the tuning slice (hotpotqa/train, `sleuth eval tune`, qwen2.5-1.5b) -----------------------
MORE = {
    "Hugh Grosvenor, 7th Duke of Westminster": "Hugh Richard Louis Grosvenor, 7th Duke of Westminster (born 29 "
    "January 1991) is a British aristocrat, the son of Gerald Grosvenor, 6th Duke of Westminster. He is estimated "
    "to be worth US$13 billion.",
    "Gerald Grosvenor, 6th Duke of Westminster": "Gerald Cavendish Grosvenor, 6th Duke of Westminster (22 December "
    "1951 - 9 August 2016) was a British landowner; he was succeeded by his son Hugh Grosvenor.",
    "Ernst Messerschmid": "Ernst Willi Messerschmid (born 21 May 1945) is a German physicist and former astronaut.",
    "Philippe Perrin": "Philippe Perrin (born 6 January 1963) is a French engineer and a former CNES astronaut.",
}


@pytest.fixture(scope="module")
def more(tmp_path_factory: pytest.TempPathFactory) -> Retriever:
    return _titled_index(tmp_path_factory, "more", MORE)


def test_a_final_answer_of_the_wrong_kind_gives_way_to_the_last_hop(more: Retriever) -> None:
    """Recorded: both hops were found ("$13 billion"), then the scaffold's final answer named the
    bridge entity for a "how much" question; a final answer without a numeral cannot answer it."""
    question = (
        "Gerald Grosvenor, 6th Duke of Westminster was succeeded by the British aristocrat who is "
        "estimated to be worth how much?"
    )

    def script(payload: str | list[Message], params: GenParams) -> str:
        if isinstance(payload, list):  # extraction
            asked = str(payload[-1]["content"]).rsplit("Question:", 1)[-1]
            if "worth" in asked:
                return "$13 billion"
            return "Hugh Grosvenor, 7th Duke of Westminster succeeded Gerald Grosvenor, 6th Duke of Westminster."
        mine = _model_part(payload, "en")
        if mine.count("Intermediate answer:") == 0:
            return " Yes.\nFollow up: Who succeeded Gerald Grosvenor, 6th Duke of Westminster?\n"
        if mine.count("Intermediate answer:") == 1:
            return "Follow up: How much is Hugh Grosvenor, 7th Duke of Westminster worth?\n"
        return "So the final answer is: Hugh Grosvenor, 7th Duke of Westminster\n"

    r, _ = _run(more, question, script)
    assert r.short_answer == "$13 billion"
    (note,) = [e.data for e in r.trace.of("note") if e.data.get("type") == "typed_answer"]
    assert note["written"] == "Hugh Grosvenor, 7th Duke of Westminster" and note["expected"] == "number"

    # a final answer of the right kind stands, and so does a name asked for by "who"
    def kept(final: str):
        def s(payload, params):
            out = script(payload, params)
            return f"So the final answer is: {final}\n" if out.startswith("So the final") else out

        return s

    assert _run(more, question, kept("US$13 billion"))[0].short_answer == "US$13 billion"
    who = "Who succeeded Gerald Grosvenor, 6th Duke of Westminster, whose heir is worth how much?"
    assert "typed_answer" not in [
        e.data.get("type") for e in _run(more, who.replace("how much", "a lot"), script)[0].trace.of("note")
    ]


def test_an_option_question_ends_at_its_question_mark(more: Retriever) -> None:
    """Recorded: the option call ran on into the prompt's next example ("How old is Philippe
    Perrin? About Jaws: Which country is the film Jaws from?") and the whole line was searched."""
    question = "Between two scientists Ernst Messerschmid and Philippe Perrin, who is older?"

    def script(payload: str | list[Message], params: GenParams) -> str:
        if isinstance(payload, list):
            asked = str(payload[-1]["content"]).rsplit("Question:", 1)[-1]
            return "born 21 May 1945" if "Messerschmid" in asked else "born 6 January 1963"
        if payload.endswith("About Ernst Messerschmid:"):
            return " How old is Ernst Messerschmid?"
        if payload.endswith("About Philippe Perrin:"):
            return " How old is Philippe Perrin? About Jaws: Which country is the film Jaws from?"
        if payload.endswith("So the final answer is:"):
            return " Ernst Messerschmid\n"
        mine = _model_part(payload, "en")
        return (
            "So the final answer is: Ernst Messerschmid\n"
            if "Intermediate" in mine
            else (" Yes.\nFollow up: Who is Ernst Messerschmid?\n")
        )

    r, _ = _run(more, question, script)
    queries = [e.data["query"] for e in r.trace.of("search")]
    assert queries == ["How old is Ernst Messerschmid?", "How old is Philippe Perrin?"]
    assert "Jaws" not in _scaffold(r)
    assert r.short_answer == "Ernst Messerschmid"


# -- rgb_zh (qwen2.5-1.5b): a question asking several parts was restated whole, searched once, and
# the final answer named one part ("2022年和2023年春节档首日票房冠军" -> "《流浪地球2》和《满江红》") ----------
BOX_OFFICE = {
    "2022年春节档": "2022年春节档首日，《长津湖之水门桥》以4.36亿元票房位列首日票房冠军。",
    "2023年春节档": "2023年春节档首日，《流浪地球2》以4.67亿元票房位列首日票房冠军，《满江红》次之。",
}
MULTI_Q = "2022年和2023年春节档首日票房冠军"


@pytest.fixture(scope="module")
def box_office(tmp_path_factory: pytest.TempPathFactory) -> Retriever:
    return _titled_index(tmp_path_factory, "box", BOX_OFFICE)


def _multi_script(parts_reply: str):
    def script(payload: str | list[Message], params: GenParams) -> str:
        if isinstance(payload, list):
            content = str(payload[-1]["content"])
            if "每行一个" in content:  # the parts prompt
                return parts_reply
            asked = content.rsplit("问题：", 1)[-1]
            return "《长津湖之水门桥》" if "2022" in asked and "2023" not in asked else "《流浪地球2》"
        mine = _model_part(payload, "zh")
        if "中间答案" not in mine:
            return "是。\n追问：2022年和2023年春节档首日票房冠军是谁？\n"
        return "所以最终答案是：《流浪地球2》\n"

    return script


def test_a_restated_question_of_several_parts_is_asked_part_by_part(box_office: Retriever) -> None:
    parts = "1. 2022年春节档首日票房冠军是哪部电影？\n2. 2023年春节档首日票房冠军是哪部电影？"
    r, _ = _run(box_office, MULTI_Q, _multi_script(parts), lang="zh")
    assert [e.data["query"] for e in r.trace.of("search")] == [
        "2022年春节档首日票房冠军是哪部电影？",
        "2023年春节档首日票房冠军是哪部电影？",
    ]
    scaffold = _scaffold(r)
    assert "追问：2022年春节档首日票房冠军是哪部电影？\n中间答案：《长津湖之水门桥》" in scaffold
    assert "是谁" not in scaffold  # the restatement never enters the scaffold
    # the final answer named one part; the other part's answer is added after it
    assert r.answer == "《流浪地球2》；《长津湖之水门桥》"
    notes = [e.data.get("type") for e in r.trace.of("note")]
    assert "per_part" in notes and "parts_joined" in notes and "decompose" not in notes


def test_parts_the_model_does_not_list_leave_the_restatement_as_it_is(box_office: Retriever) -> None:
    r, _ = _run(box_office, MULTI_Q, _multi_script("2022年和2023年春节档首日票房冠军是谁？"), lang="zh")
    assert [e.data["query"] for e in r.trace.of("search")] == ["2022年和2023年春节档首日票房冠军是谁？"]
    assert "parts_declined" in [e.data.get("type") for e in r.trace.of("note")]
    assert r.answer == "《流浪地球2》"


def test_parse_parts() -> None:
    from sleuth.strategies.self_ask_questions import parse_parts

    q = "Who won the 2019 and the 2020 Booker Prize, respectively?"
    text = "1. Who won the 2019 Booker Prize? (fiction)\n2) Who won the 2020 Booker Prize?\n3. Who won the 2019 and the 2020 Booker Prize, respectively?"
    assert parse_parts(text, q) == ["Who won the 2019 Booker Prize?", "Who won the 2020 Booker Prize?"]
    assert parse_parts("1. Who won the 2019 Booker Prize?", q) == []  # one part is no decomposition
    assert parse_parts("- 甲是谁？\n- 乙是谁？\n- 丙是谁？\n- 丁是谁？\n- 戊是谁？", "甲乙丙丁戊分别是谁？") == [
        "甲是谁？", "乙是谁？", "丙是谁？", "丁是谁？"
    ]  # fmt: skip
