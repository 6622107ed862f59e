"""Grounded citations (strategies/grounding.py), built from committed traces.

The passages and model replies are copied from docs/results/hotpotqa-open (qwen2.5-1.5b,
the Cotai Arena question: Search-o1's two hops, RAG's ``[1]``; the bonobo question:
a Reason-in-Documents note written from memory) and docs/results/policy_zh (Chinese).
"""

from __future__ import annotations

import json

import pytest

from sleuth.llm.base import GenParams, Message
from sleuth.llm.scripted import ScriptedLLM
from sleuth.search import open_retriever
from sleuth.search.base import Passage
from sleuth.strategies import get_strategy
from sleuth.strategies.grounding import Claim, ground, renumber
from sleuth.strategies.result import Result

# passages as the committed traces hold them (id "<title>#0")
COTAI = {
    "Dom-Hotel": 'The Dom-Hotel is a five-star hotel in Cologne, Germany, located on Roncalliplatz in Innenstadt. The hotel is named after Cologne Cathedral (the "Dom"), which is its direct neighbour. The hotels is one of the oldest grand hotels in Europe; its location and history make it one of the city\'s most prominent buildings.',
    "Hotel Grand Chancellor, Hobart": "The Hotel Grand Chancellor is a twelve-storey hotel located on the waterfront of Hobart, Tasmania, Australia The hotel opened in 1987 as the Sheraton and has since been taken over by the Grand Hotels International group. The Grand Chancellor is home to the Restaurant Tasman, the Atrium Bar, Strickland Gallery and Zenica Hairdressing. The hotel has a pool, a gym and a sauna on site for guest usage.",
    "Cotai Arena": 'The Cotai Arena is an indoor arena, located on the premises of The Venetian Macao, on the Cotai Strip, in Macau, China. It opened in 2007 with a seating capacity of 15,000. The arena was known as Venetian Arena from 2007 to 2010, when it was renamed as "CotaiArena". It hosts sporting events such as basketball, tennis and boxing, as well as concerts and international televised awards shows.',
    "The O2 Arena": 'The O2 Arena (temporarily the sponsor-neutral "North Greenwich Arena", during the 2012 Summer Olympics and 2012 Summer Paralympics), is a multi-purpose indoor arena located in the centre of The O2 entertainment complex on the Greenwich Peninsula in south-east London. The arena was built under the former Millennium Dome, a large dome-shaped building built to house an exhibition celebrating the turn of the third millennium; as the dome-shaped structure still stands over the arena, "The Dome" remai',
    "The Venetian Las Vegas": "The Venetian Resort Hotel Casino is a five-diamond luxury hotel and casino resort located on the Las Vegas Strip in Paradise, Nevada, United States, on the site of the old Sands Hotel. Designed by KlingStubbins, the hotel tower contains 36 stories and rises 475 ft . The Venetian is owned and operated by Las Vegas Sands. The Venetian also serves as the seat of the corporate headquarters for its parent company.",
    "Sands China": "Sands China Limited () is an integrated resort developer and operator in Macau and a subsidiary of Las Vegas Sands Corp, the owner of The Venetian Las Vegas and The Palazzo. It mainly operates in five segments in Macau: The Venetian Macao, Sands Macao, The Plaza Macao, Sands Cotai Central and ferry and other operations. Its business involves gaming areas, meeting space, convention and exhibition halls, retail and dining areas and entertainment venues.",
    "The Venetian Macao": "The Venetian Macao () is a luxury hotel and casino resort in Macau owned by the American Las Vegas Sands company. The Venetian is a 39-story, casino hotel on the Cotai Strip in Macau. The 10500000 sqft Venetian Macao is modeled on its sister casino resort The Venetian Las Vegas, and is the seventh-largest building in the world by floor area. The Venetian Macao is also the largest casino in the world, and the largest single structure hotel building in Asia.",
    "2010 Mnet Asian Music Awards": "The 2010 Mnet Asian Music Awards was the twelfth of the annual music awards in Seoul, South Korea that took place on November 28, 2010, at The Venetian Macao in Macau, China.",
    "City of Dreams (casino)": "City of Dreams () is a resort and casino in Cotai, Macau, China. It is built, owned and managed by Melco Crown Entertainment, formerly known as Melco PBL Entertainment. City of Dreams is Melco's second mega-sized property in Macau. It is located directly opposite The Venetian Macao, the first property in Cotai, opened by Las Vegas Sands Corp.",
    "Murray Premises": "The Murray Premises is a National Historic Site of Canada located in downtown St. John's, Newfoundland and Labrador. The Murray Premises was renovated in 1979 and now contains office suites, restaurants, retail stores and, most recently, a boutique hotel. The buildings once served as a fishery premises, with facilities for drying and packaging fish and warehouses for fish, barrels and other items. The oldest of the buildings is the one facing on Beck’s Cove. It was built after the 1846 fire and ",
    "Wetherspoons": "J D Wetherspoon plc, branded as Wetherspoon's, is a pub company in the United Kingdom and the Republic of Ireland. Founded in 1979 by Tim Martin, the company owns just under 1,000 outlets, including the chain of Lloyds No.1 bars and the chain of Wetherspoon hotels. With its headquarters in Watford, Wetherspoons is known for converting unconventional premises into pubs. The company is listed on the London Stock Exchange and is a constituent of the FTSE 250 Index.",
    "Choice Hotels": "Choice Hotels International, Inc. is a hospitality holding corporation based in Rockville, Maryland, in the United States. The company owns the hotel and motel brands Comfort Inn, Comfort Suites, Quality Inn, Sleep Inn, Clarion, Cambria Hotel & Suites, Mainstay Suites, Suburban Extended Stay, Econo Lodge, Rodeway Inn, and Ascend Hotel Collection. The company manages 6,379 properties worldwide. There were 505,278 rooms, with approximately $45.80 in revenue per room, totaling $758 million in reven",
}
BONOBO = {
    "Common chimpanzee": 'The common chimpanzee ("Pan troglodytes"), also known as the robust chimpanzee, is a species of great ape. Colloquially, the common chimpanzee is often called the chimpanzee (or "chimp"), though this term can be used to refer to both species in the genus "Pan": the common chimpanzee and the closely related bonobo, formerly called the pygmy chimpanzee. Evidence from fossils and DNA sequencing shows both species of chimpanzees are the sister taxon to the modern human lineage.',
    "Bonobo": 'The bonobo ( or ; "Pan paniscus"), formerly called the pygmy chimpanzee and less often, the dwarf or gracile chimpanzee, is an endangered great ape and one of the two species making up the genus "Pan"; the other is "Pan troglodytes", or the common chimpanzee. Although the name "chimpanzee" is sometimes used to refer to both species together, it is usually understood as referring to the common chimpanzee, whereas "Pan paniscus" is usually referred to as the bonobo.',
    "Das Marienleben": 'Das Marienleben ("The Life of Mary") is a song cycle by German composer Paul Hindemith. The cycle, written for piano and soprano, sets to music a collection of 15 poems by Rainer Maria Rilke that tells the story of the life of Mary. Thirteen years after its 1923 premiere in Frankfurt, Hindemith began extensively revising and reworking the piece, eventually producing a second version which premiered in Hanover in 1948.',
    "Caladenia pygmaea": 'Caladenia pygmaea, commonly known as the pygmy finger orchid is a plant in the orchid family Orchidaceae and is endemic to South Australia. It is a ground orchid with a single erect, sparsely hairy leaf and a single pink flower with red stripes on the labellum. It was formerly known as a variety of "Caladenia carnea".',
    "Stacey McKenzie": "Stacey McKenzie (born in Kingston, Jamaica) is a Canadian fashion model, runway coach and most recently a model coach and judge on the Canadian reality television show \"Canada's Next Top Model\". In 2017, McKenzie served as a guest mentor on 2 episodes of America's Next Top Model Cycle 23.",
}


COTAI_Q = "Which company owns the hotel on whose premises the Cotal Arena is located ?"
BONOBO_Q = "What type of ovulation does the animal formerly known as the pygmy chimpanzee have?"


def P(title: str) -> Passage:
    text = {**COTAI, **BONOBO}[title]
    return Passage(id=f"{title}#0", text=text, doc_id=title, title=title)


def ids(ps: list[Passage]) -> list[str]:
    return [p.id for p in ps]


# -- the method, on claims copied from the traces ------------------------------------------
def test_hops_cite_the_passage_holding_each_hop_in_the_order_used() -> None:
    """Search-o1's two Reason-in-Documents notes: each cites the one passage of its search that
    holds it (not the five found), the arena first, the owner second; the final answer
    ("American Las Vegas Sands") is already in the second, so nothing is added."""
    first = [P(t) for t in ("Dom-Hotel", "Hotel Grand Chancellor, Hobart", "Cotai Arena", "The O2 Arena")]
    second = [P(t) for t in ("Sands China", "The Venetian Macao", "Cotai Arena", "2010 Mnet Asian Music Awards")]
    claims = [
        Claim(
            "The Cotai Arena is an indoor arena located on the premises of The Venetian Macao, on the Cotai Strip, "
            "in Macau, China.",
            [*first, P("The Venetian Las Vegas")],
            "Cotal Arena hotel location",
        ),
        Claim(
            "The Venetian Macao is owned by the American Las Vegas Sands company.",
            [*second, P("City of Dreams (casino)")],
            "The Venetian Macao owner",
        ),
    ]
    g = ground(claims, "American Las Vegas Sands", COTAI_Q)
    assert ids(g.citations) == ["Cotai Arena#0", "The Venetian Macao#0"]  # HotpotQA's two gold paragraphs
    assert g.final == "in_claims" and [p["how"] for p in g.picks] == ["overlap", "overlap"]


def test_marks_are_honoured_and_the_passage_holding_the_final_answer_is_added() -> None:
    """RAG's reply "The answer is: The Venetian Las Vegas [1]." marks the arena; the short
    answer is in the fifth passage, cited after it. A mark on a passage sharing no word of
    the claim is dropped."""
    ctx = [P(t) for t in ("Cotai Arena", "Murray Premises", "Wetherspoons", "Choice Hotels", "The Venetian Las Vegas")]
    g = ground(
        [Claim("The answer is: The Venetian Las Vegas [1].", ctx, COTAI_Q, [1])], "The Venetian Las Vegas", COTAI_Q
    )
    assert ids(g.citations) == ["Cotai Arena#0", "The Venetian Las Vegas#0"] and g.final == "added"
    # the reader sees the grounded list, so the reply's marks are renumbered into it
    fifth = Claim("The answer is: The Venetian Las Vegas [5].", ctx, COTAI_Q, [5])
    g5 = ground([fifth], "The Venetian Las Vegas", COTAI_Q)
    assert ids(g5.citations) == ["The Venetian Las Vegas#0"]
    assert renumber(fifth.text, [fifth], g5.citations) == "The answer is: The Venetian Las Vegas [1]."
    wrong = ground([Claim("The answer is: The Venetian Las Vegas [2].", ctx, COTAI_Q, [2])], "", COTAI_Q)
    assert wrong.picks[0]["how"] == "overlap" and ids(wrong.citations) == ["The Venetian Las Vegas#0"]


def test_a_claim_written_from_memory_cites_nothing_rather_than_everything() -> None:
    """The bonobo question: Reason-in-Documents wrote gestation and birth weight that none of
    the five passages holds, and the answer "single offspring per year" is in none either."""
    found = [P(t) for t in BONOBO]
    info = (
        "The pygmy chimpanzee has a gestation period of approximately 180 days, with a birth weight of about "
        "1.5 pounds. The female pygmy chimpanzee gives birth to a single offspring, which is usually born in the "
        "wild. The offspring is raised by its mother and other members of the group."
    )
    g = ground([Claim(info, found, "pygmy chimpanzee reproductive cycle")], "single offspring per year", BONOBO_Q)
    assert g.citations == [] and g.final == "unsupported" and "nothing cited" in g.message
    assert ground([Claim(info, found, "")], "unknown", BONOBO_Q).final == "abstained"


def test_chinese_claims_are_matched_by_characters() -> None:
    """policy_zh, Search-o1: "退票 费用 报销时间" found the 2024 rules; the note says 45 days,
    which the 2024 clause holds and the 2025 clause (15 days) does not."""
    p2024 = Passage(
        id="trv-2024-01#0",
        doc_id="trv-2024-01",
        title="差旅费用管理办法（2024版）",
        text="第二条 员工应在行程结束后45个自然日内提交差旅报销申请。第三条 取消行程产生的退票费用按一般报销期限执行，"
        "不单独规定。本办法自2024年1月1日起施行，2025年1月1日起由2025版替代。",
    )
    p2025 = Passage(
        id="trv-2025-02#0",
        doc_id="trv-2025-02",
        title="差旅费用管理办法（2025版）",
        text="第十五条 因公取消行程产生的退票费用、改签手续费，应在退款结算完成后15个自然日内提交报销，"
        "计时起点为航空公司或铁路部门退款到账之日。",
    )
    claim = Claim("根据文档内容，退票费用的报销时间规定是45个自然日内。", [p2025, p2024], "退票 费用 报销时间")
    g = ground([claim], "45", "2024年时，取消行程的退票费用要在多少天内报销？")
    assert ids(g.citations) == ["trv-2024-01#0"] and g.final == "in_claims"
    # a yes/no hop ("是") adds no words: it rests on a passage matching what was asked; the
    # yes/no final answer adds nothing of its own
    yes = Claim("是", [p2025, p2024], "行程取消后，退票费用是否按普通差旅期限提交？")
    g = ground([yes], "是", "行程取消后，退票费用还要按普通差旅期限提交吗？")
    assert len(g.citations) == 1 and g.citations[0] in yes.passages and g.final == "none"


# -- live runs on the scripted model: the trace keeps every passage, and reads back the same --------
@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory):
    path = tmp_path_factory.mktemp("corpus") / "docs.jsonl"
    with path.open("w", encoding="utf-8") as f:
        for title, text in {**COTAI, **BONOBO}.items():
            f.write(json.dumps({"id": title, "title": title, "text": text}) + "\n")
    return open_retriever(str(path), cache_dir=tmp_path_factory.mktemp("idx"))


def _searched(r: Result) -> list[str]:
    return [p["id"] for e in r.trace.of("search") for p in e.data["passages"]]


def _check(r: Result, name: str) -> None:
    """Citations are a subset of what the trace's searches hold, and the answer event names them."""
    assert set(ids(r.citations)) <= set(_searched(r)) and len(set(_searched(r))) > len(r.citations)
    answer = r.trace.of("answer")[-1].data
    assert answer["citations"] == ids(r.citations) and "grounds" in answer


def _search_o1_script(replies: list[str], infos: list[str]):
    def script(payload: str | list[Message], params: GenParams) -> str:
        if isinstance(payload, list):  # Reason-in-Documents
            return infos[sum(1 for m in payload if "Venetian Macao owner" in m["content"]) if len(infos) > 1 else 0]
        return replies[payload.rsplit("Question:", 1)[-1].count("<|begin_search_result|>")]

    return script


def test_search_o1_run_cites_the_two_hops_and_the_trace_keeps_every_passage(index) -> None:
    replies = [
        " First, I need to find the hotel on whose premises the Cotal Arena is located. "
        "<|begin_search_query|> Cotal Arena hotel location ",
        "Now, I need to find the company that owns The Venetian Macao. <|begin_search_query|> The Venetian Macao owner ",
        "The hotel on whose premises the Cotal Arena is located is owned by the American Las Vegas Sands company.\n"
        "Final answer: \\boxed{American Las Vegas Sands}",
    ]
    infos = [
        "The Cotai Arena is an indoor arena located on the premises of The Venetian Macao, on the Cotai Strip, "
        "in Macau, China.",
        "The Venetian Macao is owned by the American Las Vegas Sands company.",
    ]
    llm = ScriptedLLM(_search_o1_script(replies, infos))
    r = get_strategy("search-o1", llm, index, k=5, lang="en").run(COTAI_Q)
    assert r.short_answer == "American Las Vegas Sands"
    assert ids(r.citations) == ["Cotai Arena#0", "The Venetian Macao#0"]
    _check(r, "search-o1")


def test_search_o1_run_from_memory_cites_nothing_and_says_so(index) -> None:
    replies = [
        " To answer this question, I need to search for information about the pygmy chimpanzee's reproductive "
        "cycle. <|begin_search_query|> pygmy chimpanzee reproductive cycle ",
        "The pygmy chimpanzee has a single offspring per year, which is a type of ovulation. The final answer is "
        "\\boxed{single offspring per year}. ",
    ]
    infos = [
        "The pygmy chimpanzee has a gestation period of approximately 180 days, with a birth weight of about "
        "1.5 pounds. The female pygmy chimpanzee gives birth to a single offspring, which is usually born in the "
        "wild. The offspring is raised by its mother and other members of the group."
    ]
    r = get_strategy("search-o1", ScriptedLLM(_search_o1_script(replies, infos)), index, k=5, lang="en").run(BONOBO_Q)
    assert r.citations == [] and len(_searched(r)) == 5
    assert [e.data["type"] for e in r.trace.of("note")].count("no_citations") == 1


def test_rag_and_self_ask_runs_read_back_the_same(index) -> None:
    rag = get_strategy(
        "rag", ScriptedLLM(["The answer is: The Venetian Las Vegas [1].", "The Venetian Las Vegas"]), index, k=5
    ).run(COTAI_Q)
    # [1] is this index's top passage (the arena); the Las Vegas hotel is not among the five found
    assert ids(rag.citations) == _searched(rag)[:1] == ["Cotai Arena#0"]
    assert rag.trace.of("answer")[-1].data["final_grounded"] == "unsupported"
    _check(rag, "rag")

    def self_ask(payload: str | list[Message], params: GenParams) -> str:
        if isinstance(payload, list):  # the extraction call
            return "TLC Casino Enterprises owns the hotel on the premises of The Venetian Macao."
        if payload.rsplit("Are follow up questions needed here:", 1)[-1].count("Intermediate answer:") > 0:
            return "So the final answer is: TLC Casino Enterprises\n"
        return " Yes.\nFollow up: Who owns the hotel on whose premises the Cotal Arena is located?\n"

    sa = get_strategy("self-ask", ScriptedLLM(self_ask), index, k=5, max_steps=2, lang="en").run(COTAI_Q)
    _check(sa, "self-ask")


def test_step_back_and_rat_runs_read_back_the_same(index) -> None:
    """Step-back's context and RAT's numbered passages are grounded like the others'."""
    sb = get_strategy(
        "step-back",
        ScriptedLLM(
            [
                "Which company owns The Venetian Macao?",
                "Background: an arena on a hotel's premises belongs to the hotel's owner.\n"
                "Evidence: The Cotai Arena is on the premises of The Venetian Macao [1], which Las Vegas Sands owns.\n"
                "Answer: Las Vegas Sands owns the hotel on whose premises the Cotai Arena is located.\n"
                "Short answer: Las Vegas Sands",
            ]
        ),
        index,
        lang="en",
    ).run(COTAI_Q)
    assert sb.citations and sb.short_answer == "Las Vegas Sands"
    _check(sb, "step-back")
    rat = get_strategy(
        "rat",
        ScriptedLLM(
            [
                "The Cotai Arena is at The Venetian Macao.\n\nThe Venetian Macao is owned by Las Vegas Sands.\n"
                "So the answer is: Las Vegas Sands",
                "Cotai Arena premises",
                "The Cotai Arena is on the premises of The Venetian Macao [1].",
                "The Venetian Macao owner",
                "The Cotai Arena is on the premises of The Venetian Macao [1]. It is owned by Las Vegas Sands [3].",
                "The Cotai Arena is on the premises of The Venetian Macao [1], owned by Las Vegas Sands [3].\n"
                "So the answer is: Las Vegas Sands",
            ]
        ),
        index,
        lang="en",
    ).run(COTAI_Q)
    assert rat.citations and rat.short_answer == "Las Vegas Sands"
    _check(rat, "rat")


def test_a_reply_that_restates_the_question_keeps_its_mark() -> None:
    """StrategyQA tuning record, RAG: "Yes, Goofy would need heartworm prevention. [1]" adds no
    word to the question (the mark's digit is not a word); its [1] holds "heartworm prevention"."""
    goofy = [
        Passage(id="363a55b705110a878be1~f1#0", text="Dogs require regular heartworm prevention.", title="Goofy"),
        Passage(id="5a5cdf519ba94a287202~f0#0", text="Goofy was created in 1932", title="Goofy"),
        Passage(id="363a55b705110a878be1~f0#0", text="Goofy is an anthropomorphic dog character.", title="Goofy"),
    ]
    q = "If Goofy were a pet, would he need heartworm prevention? Answer yes or no."
    g = ground([Claim("Yes, Goofy would need heartworm prevention. [1]", goofy, q, [1])], "Yes", q)
    assert ids(g.citations) == ["363a55b705110a878be1~f1#0"] and g.picks[0]["how"] == "marks"
