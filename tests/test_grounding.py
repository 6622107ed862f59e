"""Grounded citations (strategies/grounding.py), on HotpotQA-train questions.

The failures were recorded on the reporting split (docs/results/hotpotqa-open, qwen2.5-1.5b: a
bridge question's Search-o1 hops and RAG's ``[1]``; a Reason-in-Documents note written from
memory), so they are replayed here on HotpotQA-train's "Indian Mound Cottage was owned by the
financier that co-founded which company?" and "What is the species of animal which the town of
Antelope, Kansas was named after?", with those questions' paragraphs (first 500 characters) and
replies written in the recorded shape; the Chinese case is copied from docs/results/policy_zh.
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

# the questions' HotpotQA paragraphs, as a trace holds them (id "<title>#0")
MOUND = {
    "Portavant Mound": "The Portavant Mound (also known as the Portavant Mound Site or Snead Island Temple Mound or Portavant Indian Mound) is an archaeological site on Snead Island, just west of Palmetto, Florida. On December 23, 1994, it was added to the U.S. National Register of Historic Places.",
    "Santee Indian Mound and Fort Watson": "Santee Indian Mound and Fort Watson is a historic archaeological site located near Summerton, Clarendon County, South Carolina. Santee Indian Mound was part of a Santee mound village complex; it was probably a burial and/or temple mound, likely constructed in some cultural period between 1200-1500.",
    "Indian Mound Cemetery": 'Indian Mound Cemetery is a cemetery located along the Northwestern Turnpike (U.S. Route 50) on a promontory of the "Yellow Banks" overlooking the South Branch Potomac River and Mill Creek Mountain in Romney, West Virginia, United States. The cemetery is centered on a Hopewellian mound, known as the Romney Indian Mound. Indian Mound Cemetery is also the site of Fort Pearsall, the Confederate Memorial, Parsons Bell Tower, and reinterments from Romney\'s Old Presbyterian Cemetery. The cemetery is cu',
    "Indian Mound Cottage": 'Indian Mound Cottage is a mansion that was owned by oil executive William Rockefeller. It was built in 1892, stands three stories high, and has a total of 25 rooms. There are 9 bedrooms, 9 bathrooms, and 7 servant rooms. Indian Mound has many distinguishing features such as an elevator, a cedar lined walk-in safe, taps for hot and cold salt water on the bathtub in the master bedroom bath, and a mound in the front yard which is how the cottage got its nickname "Indian Mound".',
    "Town Creek Indian Mound": "Town Creek Indian Mound (31 MG 2) is a prehistoric Native American archaeological site located near present-day Mount Gilead, Montgomery County, North Carolina, in the United States. The site, whose main features are a platform mound with a surrounding village and wooden defensive palisade, was built by the Pee Dee, a South Appalachian Mississippian culture people (a regional variation of the Mississippian culture) that developed in the region as early as 980 CE. They thrived in the Pee Dee Rive",
    "The Mound (short story)": "\"The Mound\" is a horror/science fiction novella by American author H. P. Lovecraft, written by him as a ghostwriter from December 1929 to January 1930 after he was hired by Zealia Bishop to create a story about an Indian mound which is haunted by a headless ghost. Lovecraft expanded the story into a tale about a mound that conceals a gateway to a subterranean civilization, the realm of K'n-yan. The story was not published during Lovecraft's lifetime. A heavily abridged version was published in t",
    "Mount Pisgah Benevolence Cemetery": "Mount Pisgah Benevolence Cemetery is an African-American cemetery in Romney, West Virginia, United States. The cemetery is located along the Northwestern Turnpike (U.S. Route 50) below Indian Mound Cemetery overlooking Sulphur Spring Run. Historically known as the Romney Colored Cemetery and more recently as the Romney African-American Cemetery, the cemetery was created for African-Americans in the South Branch Valley who were not permitted to be interred in the city's Indian Mound Cemetery. The",
    "William Rockefeller": "William Avery Rockefeller, Jr. (May 31, 1841 – June 24, 1922) was an American businessman and financier. He was a co-founder of Standard Oil along with his older brother John Davison Rockefeller (1839–1937). He was also a prominent member of the Rockefeller family.",
    "Indian Mound Park (Dauphin Island, Alabama)": "Indian Mound Park, also known as Shell Mound Park or Indian Shell Mound Park, is a park and bird refuge located on the northern shore of Dauphin Island, a barrier island of Mobile County, Alabama in the United States. In addition to the many birds which visit, a wide variety of botanical species contribute to the natural offerings. The site is historically significant due to the presence of prehistoric Indian shell middens, mounds composed of discarded oyster shells. The park was added to the Na",
    "Rockefeller Cottage": 'The Rockefeller Cottage is a house on Jekyll Island, Georgia. It is also called "Indian Mound" and is next to the Jekyll Island Club. The house was built by Gordon McKay in 1892. McKay died in 1903 and the house was bought by William Rockefeller in 1905, who used it as a winter home. It was evacuated in 1942, along with the rest of the island. The house remained in the Rockefeller family until 1947, when the Jekyll Island Authority bought the property. It was open as a museum from 1950 until 196',
}
# written for the test: the company RAG's reply names from memory (not among the question's paragraphs)
MOUND["Sinclair Oil Corporation"] = (
    "Sinclair Oil Corporation is an American petroleum corporation, started by Harry F. Sinclair in 1916."
)
ANTELOPE = {
    "Pronghorn": 'The pronghorn ( ) ("Antilocapra americana") is a species of artiodactyl mammal indigenous to interior western and central North America. Though not an antelope, it is often known colloquially in North America as the American antelope, prong buck, pronghorn antelope, or simply antelope because it closely resembles the true antelopes of the Old World and fills a similar ecological niche due to parallel evolution.',
    "Antelope, Kansas": "Antelope is an unincorporated community in Marion County, Kansas, United States. Antelope got its name from antelope grazing near where the first school was being built.",
    "Hartbeespoort": 'Hartbeespoort, informally also known as "Harties", is a small resort town in the North West Province of South Africa, situated on slopes of the Magaliesberg mountain and the banks of the Hartbeespoort Dam. The name of the town means "gateway of the hartbees" (a species of antelope) in Afrikaans. It was previously known as Schoemansville, named after General Hendrik Schoeman, a Boer General in the Anglo-Boer War, who owned the farm that the Hartbeespoort Dam was built on.',
    "Setaria (roundworm)": "Setaria is a genus of parasitic roundworms that infect domesticated mammals such as pigs, camels, cattle and horses. Some species also infect wild mammals such as deer and antelope. The genus consists of about 43 species. Members of the genus are uniquely parasites in the abdominal cavity of the body. They are mostly large-sized roundworms, possessing an elaborate head (cephalic) region that is characterised by spines, presence of four lips, and well-guarded mouth. Little is known about their pa",
    "Big-game hunting": 'Big-game hunting is the hunting of large game, almost always large terrestrial mammals, for meat, other animal by-products (such as horn or bone), trophy or sport. The term is historically associated with the hunting of Africa\'s "Big Five" game (lion, African elephant, Cape buffalo, leopard and rhinoceros), and with tigers and rhinoceroses on the Indian subcontinent. Along with the big five animals, many other species are hunted including kudu, antelope, and hartebeest. Moose, elk, caribou, biso',
}


MOUND_Q = "Indian Mound Cottage was owned by the financier that co-founded which company?"
ANTELOPE_Q = "What is the species of animal which the town of Antelope, Kansas was named after?"


def P(title: str) -> Passage:
    text = {**MOUND, **ANTELOPE}[title]
    return Passage(id=f"{title}#0", text=text, doc_id=title, title=title)


def ids(ps: list[Passage]) -> list[str]:
    return [p.id for p in ps]


# -- the method, on claims copied from the traces ------------------------------------------
def test_hops_cite_the_passage_holding_each_hop_in_the_order_used() -> None:
    """Search-o1's two Reason-in-Documents notes: each cites the one passage of its search that
    holds it (not the five found), the cottage first, the financier second; the final answer
    ("Standard Oil") is already in the second, so nothing is added."""
    first = [P(t) for t in ("Portavant Mound", "Santee Indian Mound and Fort Watson", "Indian Mound Cottage")]
    second = [P(t) for t in ("Rockefeller Cottage", "William Rockefeller", "Indian Mound Cottage")]
    claims = [
        Claim(
            "Indian Mound Cottage is a mansion that was owned by oil executive William Rockefeller.",
            [*first, P("Indian Mound Cemetery"), P("Rockefeller Cottage")],
            "Indian Mound Cottage owner",
        ),
        Claim(
            "William Rockefeller was a co-founder of Standard Oil along with his older brother John Davison "
            "Rockefeller.",
            [*second, P("Mount Pisgah Benevolence Cemetery"), P("Indian Mound Park (Dauphin Island, Alabama)")],
            "William Rockefeller co-founded company",
        ),
    ]
    g = ground(claims, "Standard Oil", MOUND_Q)
    assert ids(g.citations) == ["Indian Mound Cottage#0", "William Rockefeller#0"]  # HotpotQA's two gold paragraphs
    assert g.final == "in_claims" and [p["how"] for p in g.picks] == ["overlap", "overlap"]


def test_marks_are_honoured_and_the_passage_holding_the_final_answer_is_added() -> None:
    """RAG's reply "The answer is: Sinclair Oil Corporation [1]." marks the cottage (an oil
    executive's); the short answer is in the fifth passage, cited after it. A mark on a passage
    sharing no word of the claim is dropped."""
    titles = (
        "Indian Mound Cottage",
        "Portavant Mound",
        "Santee Indian Mound and Fort Watson",
        "Town Creek Indian Mound",
        "Sinclair Oil Corporation",
    )
    ctx = [P(t) for t in titles]
    answer = "Sinclair Oil Corporation"
    g = ground([Claim(f"The answer is: {answer} [1].", ctx, MOUND_Q, [1])], answer, MOUND_Q)
    assert ids(g.citations) == ["Indian Mound Cottage#0", "Sinclair Oil Corporation#0"] and g.final == "added"
    # the reader sees the grounded list, so the reply's marks are renumbered into it
    fifth = Claim(f"The answer is: {answer} [5].", ctx, MOUND_Q, [5])
    g5 = ground([fifth], answer, MOUND_Q)
    assert ids(g5.citations) == ["Sinclair Oil Corporation#0"]
    assert renumber(fifth.text, [fifth], g5.citations) == f"The answer is: {answer} [1]."
    wrong = ground([Claim(f"The answer is: {answer} [2].", ctx, MOUND_Q, [2])], "", MOUND_Q)
    assert wrong.picks[0]["how"] == "overlap" and ids(wrong.citations) == ["Sinclair Oil Corporation#0"]


MEMORY = (
    "The pronghorn has a gestation period of approximately 250 days, with a birth weight of about 7 pounds. "
    "The female pronghorn gives birth in North America, where the herd is grazing. The fawns are raised by "
    "their mother and other members of the herd."
)


def test_a_claim_written_from_memory_cites_nothing_rather_than_everything() -> None:
    """Reason-in-Documents wrote gestation and birth weight that none of the five passages holds,
    and the answer "twin fawns each spring" is in none either."""
    found = [P(t) for t in ANTELOPE]
    g = ground([Claim(MEMORY, found, "pronghorn antelope reproductive cycle")], "twin fawns each spring", ANTELOPE_Q)
    assert g.citations == [] and g.final == "unsupported" and "nothing cited" in g.message
    assert ground([Claim(MEMORY, found, "")], "unknown", ANTELOPE_Q).final == "abstained"


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
        for title, text in {**MOUND, **ANTELOPE}.items():
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
            second = sum(1 for m in payload if "William Rockefeller co-founded company" in m["content"])
            return infos[second if len(infos) > 1 else 0]
        return replies[payload.rsplit("Question:", 1)[-1].count("<|begin_search_result|>")]

    return script


def test_search_o1_run_cites_the_two_hops_and_the_trace_keeps_every_passage(index) -> None:
    replies = [
        " First, I need to find the financier who owned Indian Mound Cottage. "
        "<|begin_search_query|> Indian Mound Cottage owner ",
        "Now, I need to find the company William Rockefeller co-founded. "
        "<|begin_search_query|> William Rockefeller co-founded company ",
        "Indian Mound Cottage was owned by William Rockefeller, who co-founded Standard Oil.\n"
        "Final answer: \\boxed{Standard Oil}",
    ]
    infos = [
        "Indian Mound Cottage is a mansion that was owned by oil executive William Rockefeller.",
        "William Rockefeller was a co-founder of Standard Oil along with his older brother John Davison Rockefeller.",
    ]
    llm = ScriptedLLM(_search_o1_script(replies, infos))
    r = get_strategy("search-o1", llm, index, k=5, lang="en").run(MOUND_Q)
    assert r.short_answer == "Standard Oil"
    assert ids(r.citations) == ["Indian Mound Cottage#0", "William Rockefeller#0"]
    _check(r, "search-o1")


def test_search_o1_run_from_memory_cites_nothing_and_says_so(index) -> None:
    replies = [
        " To answer this question, I need to search for information about the pronghorn antelope's reproductive "
        "cycle. <|begin_search_query|> pronghorn antelope reproductive cycle ",
        "The pronghorn gives birth to twin fawns each spring, which is a kind of species. The final answer is "
        "\\boxed{twin fawns each spring}. ",
    ]
    r = get_strategy("search-o1", ScriptedLLM(_search_o1_script(replies, [MEMORY])), index, k=5, lang="en").run(
        ANTELOPE_Q
    )
    assert r.citations == [] and len(_searched(r)) == 5
    assert [e.data["type"] for e in r.trace.of("note")].count("no_citations") == 1


def test_rag_and_self_ask_runs_read_back_the_same(index) -> None:
    answer = "Sinclair Oil Corporation"
    rag = get_strategy("rag", ScriptedLLM([f"The answer is: {answer} [1].", answer]), index, k=5).run(MOUND_Q)
    # [1] is this index's top passage (the cottage); the oil company's passage is not among the five found
    assert ids(rag.citations) == _searched(rag)[:1] == ["Indian Mound Cottage#0"]
    assert "Sinclair Oil Corporation#0" not in _searched(rag)
    assert rag.trace.of("answer")[-1].data["final_grounded"] == "unsupported"
    _check(rag, "rag")

    def self_ask(payload: str | list[Message], params: GenParams) -> str:
        if isinstance(payload, list):  # the extraction call
            return "The Jekyll Island Authority bought the Rockefeller Cottage, called Indian Mound."
        if payload.rsplit("Are follow up questions needed here:", 1)[-1].count("Intermediate answer:") > 0:
            return "So the final answer is: Jekyll Island Authority\n"
        return " Yes.\nFollow up: Which company did the financier who owned Indian Mound Cottage co-found?\n"

    sa = get_strategy("self-ask", ScriptedLLM(self_ask), index, k=5, max_steps=2, lang="en").run(MOUND_Q)
    _check(sa, "self-ask")


def test_step_back_and_rat_runs_read_back_the_same(index) -> None:
    """Step-back's context and RAT's numbered passages are grounded like the others'."""
    sb = get_strategy(
        "step-back",
        ScriptedLLM(
            [
                "Which company did William Rockefeller co-found?",
                "Background: a mansion's owner is named in its history.\n"
                "Evidence: Indian Mound Cottage was owned by William Rockefeller [1], a co-founder of Standard Oil.\n"
                "Answer: William Rockefeller, who owned Indian Mound Cottage, co-founded Standard Oil.\n"
                "Short answer: Standard Oil",
            ]
        ),
        index,
        lang="en",
    ).run(MOUND_Q)
    assert sb.citations and sb.short_answer == "Standard Oil"
    _check(sb, "step-back")
    rat = get_strategy(
        "rat",
        ScriptedLLM(
            [
                "Indian Mound Cottage was owned by William Rockefeller.\n\nWilliam Rockefeller co-founded Standard "
                "Oil.\nSo the answer is: Standard Oil",
                "Indian Mound Cottage owner",
                "Indian Mound Cottage was owned by William Rockefeller [1].",
                "William Rockefeller co-founded company",
                "Indian Mound Cottage was owned by William Rockefeller [1]. He co-founded Standard Oil [2].\n"
                "So the answer is: Standard Oil",
            ]
        ),
        index,
        lang="en",
    ).run(MOUND_Q)
    assert rat.citations and rat.short_answer == "Standard Oil"
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
