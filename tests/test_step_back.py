"""Step-back's answer form and abstention, on the in-process scripted model.

The passages and the model replies are copied from real traces: the committed
records in ``docs/results/{hotpotqa-open,policy_zh}/results.jsonl.gz`` (embedded
qwen2.5-1.5b), where the old rule-and-clause answer format was used for every
question.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from sleuth.llm.scripted import ScriptedLLM
from sleuth.search import open_retriever
from sleuth.search.base import Filters, Passage
from sleuth.strategies import get_strategy
from sleuth.strategies.parsing import parse_step_back_answer
from sleuth.strategies.prompts import load
from sleuth.strategies.repairs.clauses import document_form, rule_like

# written on HotpotQA-train 5ab6bdd255429953192ad36e ("In what country are both Ugni and Stenomesson native
# plants?"), as a yes/no question of the kind the recorded runs answered in the old rule-and-clause format: both
# genera's passages (shortened) and two written distractors
LYCORIS_DOCS = [
    (
        "Stenomesson",
        "Stenomesson is a genus of bulbous plants in the family Amaryllidaceae. All the species are native to "
        "western South America (Colombia, Ecuador, Peru and northern Chile).",
    ),
    (
        "Ugni",
        "Ugni is a genus of plants in the myrtle family Myrtaceae, described as a genus in 1848. It is native to "
        "western Latin America from the Valdivian temperate rain forests of southern Chile (including the Juan "
        "Fernández Islands) and adjacent regions of southern Argentina, north to southern Mexico.",
    ),
    (
        "Myrtaceae",
        "Myrtaceae, the myrtle family, is a family of woody plants with centres of diversity in Australia, "
        "South America and southern Asia.",
    ),
    (
        "Amaryllidaceae",
        "Amaryllidaceae is a family of herbaceous, mainly perennial and bulbous flowering plants, many of them "
        "native to South America and southern Africa.",
    ),
]
LYCORIS_Q = "Are Ugni and Stenomesson both native to South America?"
# the replies, in the recorded shape: the step-back question, and an answer with its labels inline on one line
LYCORIS_STEP_BACK = (
    "What are the general rules, scope, and exceptions for the distribution of native plants in South America?"
)
LYCORIS_ANSWER = (
    "General rule: Ugni is native to western Latin America from the Valdivian temperate rain forests of southern "
    "Chile and adjacent regions of southern Argentina, north to southern Mexico. Stenomesson is native to western "
    "South America (Colombia, Ecuador, Peru and northern Chile). No specific clause for this case in the "
    "documents. Conclusion: Yes, Ugni and Stenomesson are both native to South America. Short answer: Yes"
)


def _wiki_index(tmp_path: Path, docs: list[tuple[str, str]]):
    corpus = tmp_path / "wiki.jsonl"
    corpus.write_text(
        "".join(json.dumps({"id": t, "title": t, "text": x}, ensure_ascii=False) + "\n" for t, x in docs), "utf-8"
    )
    return open_retriever(str(corpus), cache_dir=tmp_path / "idx")


def _policy(data_dir: Path) -> dict[str, dict]:
    lines = (data_dir / "policy_zh" / "questions.jsonl").read_text("utf-8").splitlines()
    return {json.loads(x)["id"]: json.loads(x) for x in lines}


def _scope(q: dict) -> Filters:
    sc = q["scope"]
    return Filters.make({k: v for k, v in sc.items() if k != "acl"}, acl=sc["acl"])


# -- the signal -------------------------------------------------------------------------------------
def test_policy_passages_are_rules_and_wikipedia_passages_are_not(data_dir: Path) -> None:
    policy = [
        Passage(id=d["id"], text=d["text"], doc_id=d["id"], title=d["title"], section=d["section"])
        for d in map(json.loads, (data_dir / "policy_zh" / "corpus.jsonl").read_text("utf-8").splitlines())
    ]
    assert all(rule_like(p) for p in policy)  # clause numbers in text or section (第十五条, 第三章 审计程序)
    wiki = [Passage(id=t, text=x, doc_id=t, title=t) for t, x in LYCORIS_DOCS]
    assert not any(rule_like(p) for p in wiki)
    assert not rule_like(Passage(id="s", text="Its use in food is prohibited under standard 1.4.4."))  # no clause
    assert document_form(policy) == ("rules", len(policy))
    assert document_form(wiki) == ("general", 0)
    assert document_form([]) == ("general", 0)
    # half of the passages decide; the option overrides the signal
    assert document_form([policy[0], wiki[0]])[0] == "rules"
    assert document_form([policy[0], *wiki[:2]])[0] == "general"
    assert document_form(wiki, "rules") == ("rules", 0) and document_form(policy, "general")[0] == "general"
    english_rules = Passage(id="x", text="Claims must be filed within 30 days. Late claims must be approved.")
    assert rule_like(english_rules) and rule_like(Passage(id="y", text="Under Section 4.2 the fee is waived."))


# -- the answer parser ------------------------------------------------------------------------------
def test_parse_inline_labels_of_a_real_reply() -> None:
    a = parse_step_back_answer(LYCORIS_ANSWER)
    assert a.short == "Yes" and not a.abstained
    assert a.fields["answer"] == "Yes, Ugni and Stenomesson are both native to South America."
    assert a.answer.endswith("both native to South America.") and "Short answer" not in a.answer


@pytest.mark.parametrize(
    ("reply", "short", "abstained"),
    [
        # the shape of a recorded refusal (the page was in the context, the model declined), on HotpotQA-train
        # 5ac13e195542994ab5c67cc5 (the Red Bird question)
        (
            "General rule: In the documents provided, there is no specific clause about the actor from Red Bird "
            "known for a character in Seinfeld.\nSpecific clause: No specific clause for this case in the "
            "documents.\nConclusion: Cannot be answered from the available documents.\nShort answer: Cannot be "
            "answered from the available documents.",
            "Cannot be answered from the available documents",
            True,
        ),
        # the shape of a recorded reply: "No specific information." as the short answer
        (
            "General rule: The documents do not provide specific information about a Basham brother.\nSpecific "
            "clause: No specific clause for this case in the documents.\nConclusion: The documents do not provide "
            "information about a Basham brother who met the criteria specified in the question.\nShort answer: "
            "No specific information.",
            "No specific information",
            True,
        ),
        # policy_zh q5 (no access to the audit file): a bare Chinese refusal, full-width colon
        ("一般规定：根据现有可查阅的材料无法回答。", None, True),
        # policy_zh q6: the rule with its citation, cut before the other fields
        (
            "一般规定：内部审计部门每半年对差旅费用进行抽查，抽查比例不低于报销笔数的5%。发现虚假报销的，追回款项并按"
            "《员工奖惩办法》处理。本文件仅限财务与审计人员查阅。[1]",
            "内部审计部门每半年对差旅费用进行抽查，抽查比例不低于报销笔数的5%",
            False,
        ),
        # the neutral form, bold labels and a Chinese colon
        (
            "**Background:** X held posts [1].\n**Evidence**： In 2004 he was CEO [2].\n**Answer:** He was CEO.",
            "He was CEO",
            False,
        ),
        # a refusal that still gives an answer of its own is no abstention
        ("Answer: The documents do not say so directly.\nShort answer: Paris", "Paris", False),
        # a refusal that cites evidence has found some
        ("Conclusion: The documents do not mention 2005, but [2] lists him as CEO until 2006.", None, False),
        # tuning run (hotpotqa/train): the prompt's own wording of a refusal, and "None" as the short answer
        (
            "Evidence: The documents do not provide information about Yasar Kemal.\nAnswer: The documents do not "
            "answer the question.\nShort answer: The documents do not answer the question.",
            None,
            True,
        ),
        ("Answer: The documents do not answer the question.\nShort answer: None", None, True),
        # the shape of a recorded reply: an adverb inside the refusal ("do not directly answer"), a reply with
        # no answer field whose first sentence was taken for the short answer (on HotpotQA-train's Devilment)
        (
            "Background: The documents provide information about several metal bands and their members, including "
            "Devilment, Dani Filth and others. They mention that Dani Filth is the vocalist of the extreme metal "
            "band Cradle of Filth. The documents do not directly answer the question about which band's founding "
            "member became Devilment's stable vocalist.",
            None,
            True,
        ),
        ("Answer: The capital is not explicitly stated in the documents.", None, True),
        # the same adverb before an answer of its own is no abstention (recorded shape, HotpotQA-train question)
        (
            "Evidence: The documents do not explicitly state who replaced the manager of Aston Villa. However, "
            "Martin O'Neill took over from him [1].\nShort answer: Martin O'Neill",
            "Martin O'Neill",
            False,
        ),
        # "No" answers a yes/no question; it is not "None"
        ("Answer: No, Ugni and Stenomesson are not both native to South America.\nShort answer: No", "No", False),
        ("", None, False),
    ],
)
def test_parse_step_back_answer(reply: str, short: str | None, abstained: bool) -> None:
    a = parse_step_back_answer(reply)
    if short is not None:
        assert a.short == short
    assert a.abstained is abstained


_PIECES = [
    "Background:",
    "Evidence:",
    "Answer:",
    "Short answer:",
    "Conclusion:",
    "一般规定：",
    "结论：",
    "简短答案：",
    "**",
    "\n",
    ". ",
    "。",
    "[1]",
    "cannot be answered",
    "无法回答",
    " ",
]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=hs.lists(hs.one_of(hs.sampled_from(_PIECES), hs.text(max_size=20)), max_size=40).map("".join))
def test_parser_never_raises(text: str) -> None:
    a = parse_step_back_answer(text)
    assert isinstance(a.answer, str) and (a.short is None or isinstance(a.short, str))


def test_parser_bounded_on_huge_input() -> None:
    t = time.perf_counter()
    parse_step_back_answer("Answer: x. Background: y. " * 50_000)
    parse_step_back_answer(None)  # type: ignore[arg-type]
    assert time.perf_counter() - t < 5.0


# -- the strategy, end to end -----------------------------------------------------------------------
def test_wikipedia_question_gets_the_neutral_form(tmp_path: Path) -> None:
    llm = ScriptedLLM([LYCORIS_STEP_BACK, LYCORIS_ANSWER])
    s = get_strategy("step-back", llm, _wiki_index(tmp_path, LYCORIS_DOCS), k=3, lang="en")
    r = s.run(LYCORIS_Q)
    sb = r.trace.of("step_back")[0].data
    assert sb["form"] == "general" and sb["rule_like"] == "0/3"
    question_prompt, answer_prompt = (str(c.payload) for c in llm.calls)
    assert "general rule" not in question_prompt.lower() and "whole history" in question_prompt
    assert "Background:" in answer_prompt and "General rule" not in answer_prompt
    # the search before the step-back question: the form is decided on the original route
    kinds = [e.kind for e in r.trace.events]
    assert kinds.index("search") < kinds.index("llm") < kinds.index("step_back")
    assert r.short_answer == "Yes" and not r.trace.of("note")


def test_policy_question_keeps_the_rule_form_and_abstains_without_evidence(data_dir: Path, tmp_path: Path) -> None:
    """policy_zh q5: the finance-only audit file is outside the scope, so nothing bears on the question."""
    qs = _policy(data_dir)
    idx = open_retriever(str(data_dir / "policy_zh" / "corpus.jsonl"), cache_dir=tmp_path)
    llm = ScriptedLLM(["内部审计对差旅报销的抽查比例一般是多少？", "一般规定：根据现有可查阅的材料无法回答。"])
    # verdict=False: the rule-and-clause form alone (by default the answerability call comes first, below)
    r = get_strategy("step-back", llm, idx, k=3, verdict=False).run(qs["q5"]["question"], filters=_scope(qs["q5"]))
    assert r.lang == "zh" and r.trace.of("step_back")[0].data["form"] == "rules"
    question_prompt, answer_prompt = (str(c.payload) for c in llm.calls)
    assert "规章制度" in question_prompt and "一般规定：" in answer_prompt and "专门条款" in answer_prompt
    assert "“根据现有可查阅的材料无法回答。”" not in answer_prompt  # no escape phrase to copy
    assert r.short_answer == "根据现有可查阅的材料无法回答" and not r.citations
    assert [e.data["type"] for e in r.trace.of("note")] == ["abstained"]
    assert "fin-audit-2025" not in json.dumps(r.to_dict(), ensure_ascii=False)


def test_policy_answer_with_evidence_is_not_an_abstention(data_dir: Path, tmp_path: Path) -> None:
    """policy_zh q6 (finance scope): the real reply states the rule and cites it."""
    qs = _policy(data_dir)
    idx = open_retriever(str(data_dir / "policy_zh" / "corpus.jsonl"), cache_dir=tmp_path)
    reply = (
        "一般规定：内部审计部门每半年对差旅费用进行抽查，抽查比例不低于报销笔数的5%。发现虚假报销的，追回款项并按"
        "《员工奖惩办法》处理。本文件仅限财务与审计人员查阅。[1]"
    )
    settled = "依据：[1] 内部审计部门每半年对差旅费用进行抽查\n结论：抽查比例不低于报销笔数的5%。"
    llm = ScriptedLLM(["内部审计对差旅报销的抽查比例一般是多少？", settled, reply])
    r = get_strategy("step-back", llm, idx, k=3).run(qs["q6"]["question"], filters=_scope(qs["q6"]))
    assert r.trace.of("step_back")[0].data["form"] == "rules"
    assert r.trace.of("answerable")[0].data["settled"] is True
    assert "5%" in r.short_answer  # the reply's first sentence (the span is no longer fitted to a number)
    assert not [e for e in r.trace.of("note") if e.data["type"] == "abstained"]
    assert [p.doc_id for p in r.citations] == ["fin-audit-2025"]


def test_documents_option_forces_a_form(tmp_path: Path) -> None:
    llm = ScriptedLLM([LYCORIS_STEP_BACK, LYCORIS_ANSWER])
    idx = _wiki_index(tmp_path, LYCORIS_DOCS)
    s = get_strategy("step-back", llm, idx, k=3, lang="en", documents="rules", verdict=False)  # the form itself
    r = s.run(LYCORIS_Q)
    assert r.trace.of("step_back")[0].data["form"] == "rules"
    assert "General rule:" in str(llm.calls[1].payload)
    assert r.short_answer == "Yes"


# -- the real-model check of this change (embedded qwen2.5-1.5b, `sleuth ask --strategy step-back`) -----------
# TimeQA "Who acted as M between Aug 2012 and Sep 2012 in James Bond films?" (gold Ralph Fiennes): the
# original route's passages and the model's two replies; it kept the time span in its step-back question
M_DOCS = [
    (
        "M (James Bond)",
        "M is a fictional character in Ian Flemings James Bond book and film series ; the character is the Head of "
        "the Secret Intelligence Service—also known as MI6 . In the Eon Productions series of films , M has been "
        "portrayed by four actors : Bernard Lee , Robert Brown , Judi Dench",
    ),
    (
        "M (James Bond)",
        "- Featured in : - The likeness of Lee was used in the 2005 James Bond video game adaptation of James Bond "
        "007 : From Russia with Love for the role of M by EA Games . Robert Brown : 1983–1989 .",
    ),
    (
        "M (James Bond)",
        ", whom she turned over to the Chinese in order to save six other agents . She is shot and killed in the "
        "film , making her the only M to die in the Eon Bond films . Denchs M makes a final appearance in Spectre "
        "in a video will",
    ),
    (
        "M (James Bond)",
        "After the death of Judi Denchs M at the end of Skyfall , she is succeeded by Gareth Mallory , played by "
        "Ralph Fiennes .",
    ),
]
M_Q = "Who acted as M between Aug 2012 and Sep 2012 in James Bond films?"
M_STEP_BACK = "Who was M between August 2012 and September 2012 in James Bond films?"
M_ANSWER = (
    "Background: The documents provide information about the character M in James Bond films, including the actors "
    "who portrayed him and the years in which they played the role. They also mention the specific film in which M "
    "was portrayed in 2012, which was Spectre.\nEvidence: The entry for Spectre in the Eon Productions series of "
    "films states that Ralph Fiennes played M in 2012.\nAnswer: Ralph Fiennes acted as M between August 2012 and "
    "September 2012 in James Bond films.\nShort answer: Ralph Fiennes"
)


def test_a_version_question_keeps_its_year_in_the_rule_form(data_dir: Path, tmp_path: Path) -> None:
    """policy_zh q3 asks under the 2024 version: in the rule form "2024年时" stays in the step-back question."""
    qs = _policy(data_dir)
    idx = open_retriever(str(data_dir / "policy_zh" / "corpus.jsonl"), cache_dir=tmp_path)
    step_back = "2024年时，取消行程的退票费用报销期限的一般规定是什么？"  # the committed record's reply
    llm = ScriptedLLM(
        [
            step_back,
            "依据：第3条\n结论：45天",  # the answerability call: the clauses settle it (the model's real reply)
            "一般规定：员工应在行程结束后45个自然日内提交差旅报销申请。[1]\n结论：45个自然日内。\n简短答案：45天",
        ]
    )
    r = get_strategy("step-back", llm, idx, k=3).run(qs["q3"]["question"], filters=_scope(qs["q3"]))
    assert r.trace.of("step_back")[0].data == {
        "question": step_back,
        "generated": step_back,
        "fallback": False,
        "form": "rules",
        "rule_like": "1/1",
    }
    assert r.short_answer == "45天"


# policy_zh q1 (scope 2025 / 境内 / all), the rule-form template as it stood at the real-model check: the model
# copied the conclusion's instruction ("有专门条款时依据专门条款，否则依据一般规定") as its answer
Q1_TEMPLATE_AT_CHECK = (
    "一般规定：<适用的一般规定及出处>\n专门条款：<针对这一具体情形的条款及出处（如果没有任何文档包含这样的条款，就说明没有，"
    "不要自行推广一般规定）>\n结论：<问题的答案：有专门条款时依据专门条款，否则依据一般规定（只有在没有任何文档涉及这个问题时，"
    "才说明现有材料无法回答）>\n简短答案：<几个词>"
)
Q1_REPLY = (
    "一般规定：员工应在行程结束后30个自然日内通过费用系统提交报销申请，逾期未提交的，需经部门负责人书面说明后方可受理。\n"
    "专门条款：无\n结论：有专门条款时依据专门条款，否则依据一般规定。\n简短答案：有专门条款时依据专门条款，否则依据一般规定。"
)


def test_a_copied_instruction_is_no_answer() -> None:
    a = parse_step_back_answer(Q1_REPLY, Q1_TEMPLATE_AT_CHECK)
    assert "answer" not in a.fields and "short" not in a.fields and a.fields["evidence"] == "无"
    assert a.short is not None and a.short.startswith("员工应在行程结束后30个自然日内")  # not "无", not the instruction
    assert not a.abstained
    # the answer line quotes the question: a reply that only repeats it is no answer
    echo = parse_step_back_answer(f"Background: M is head of MI6 [1].\nAnswer: {M_Q}", question=M_Q)
    assert "answer" not in echo.fields and echo.short == "M is head of MI6"
    placeholder = parse_step_back_answer(
        "Answer: X did it [1].\nShort answer: <a few words>", "Short answer: <a few words>"
    )
    assert placeholder.short == "X did it"
    kept = parse_step_back_answer("Conclusion: 按一般规定。\nShort answer: 一般规定", Q1_TEMPLATE_AT_CHECK)
    assert kept.short == "一般规定"  # a short answer that is also a word of the template stays
    # the templates now keep instructions out of the answer's placeholders
    for lang in ("en", "zh"):
        for name in ("step_back_answer", "step_back_answer_rules"):
            text = load(name, lang).template
            assert "依据专门条款" not in text and "“" + "根据现有可查阅的材料无法回答" not in text


def _rerank(r) -> dict:
    return next(e.data for e in r.trace.of("repair") if e.data["name"] == "rerank")


def _in_context(r) -> list[str]:
    return [x["id"] for x in _rerank(r)["ranking"] if x["in_context"]]


def test_general_documents_show_as_many_passages_as_rag(tmp_path: Path) -> None:
    """Wikipedia-like passages: the reranked context is ``k_original`` passages (RAG's count), not both
    quotas; 40 HotpotQA-train questions: +0.028 F1 at half the prompt tokens (docs/strategies.md)."""
    idx = _wiki_index(tmp_path, LYCORIS_DOCS)
    r = get_strategy("step-back", ScriptedLLM([LYCORIS_STEP_BACK, LYCORIS_ANSWER]), idx, k=2, lang="en").run(LYCORIS_Q)
    assert r.trace.of("step_back")[0].data["form"] == "general"
    pool = _rerank(r)["ranking"]
    assert len(pool) > 2 and len(_in_context(r)) == 2
    wide = get_strategy(
        "step-back", ScriptedLLM([LYCORIS_STEP_BACK, LYCORIS_ANSWER]), idx, k=2, lang="en", k_context=4
    ).run(LYCORIS_Q)
    assert len(_in_context(wide)) == min(4, len(_rerank(wide)["ranking"]))


def test_rules_keep_both_quotas_so_the_step_back_rule_stays(data_dir: Path, tmp_path: Path) -> None:
    """policy_zh q8: rules show both quotas (the general rule comes from the step-back route). With
    RAG's five passages the real run dropped two step-back passages and took the submission-deadline
    rule as its general rule, losing the 600-yuan clause it had named with all seven."""
    qs = _policy(data_dir)
    idx = open_retriever(str(data_dir / "policy_zh" / "corpus.jsonl"), cache_dir=tmp_path)
    llm = ScriptedLLM(["差旅住宿费用的报销标准和超标处理规定是什么？", "结论：不能全额报销。\n简短答案：不能"])
    r = get_strategy("step-back", llm, idx).run(qs["q8"]["question"], filters=_scope(qs["q8"]))
    assert r.trace.of("step_back")[0].data["form"] == "rules"
    ctx, pool = _in_context(r), _rerank(r)["ranking"]
    assert len(ctx) == min(10, len(pool)) and len(ctx) > 5  # more than k_original
    assert "trv-2025-04#0" in ctx  # the evidence (第九条 住宿标准)


# tuning run (hotpotqa/train, step-back): the reply reached max_tokens inside its answer line
CHOMSKY_Q = "Who has written more than 100 books, Yaşar Kemal or Avram Noam Chomsky?"
CHOMSKY_DOCS = [
    (
        "Noam Chomsky",
        "Avram Noam Chomsky is an American linguist, philosopher, cognitive scientist, historian, social critic, "
        "and political activist. He is the author of over 100 books on topics such as linguistics, war and politics.",
    ),
    ("Yaşar Kemal", "Kemal Sadık Gökçeli, known as Yaşar Kemal, was a Turkish writer and human rights activist."),
]
CHOMSKY_CUT = (
    "Background: Noam Chomsky has published over 100 books on topics such as linguistics, war and politics [1]. "
    "Yasar Kemal is a Turkish writer and human rights activist [2].\nAnswer: Avram Noam"
)


CHOMSKY_ABSTAINS = (
    "Background: Noam Chomsky is described as an American linguist who has written over 100 books [1].\n"
    "Evidence: The documents do not provide information about Yasar Kemal, so the answer cannot be determined.\n"
    "Answer: The documents do not answer the question.\nShort answer: The documents do not answer the question."
)


def test_an_abstention_with_passages_is_read_again_and_rules_keep_theirs(tmp_path: Path) -> None:
    """Tuning run (hotpotqa/train, step-back): the background held the answer, the answer line refused;
    RAG, reading the same passages, answered "Avram Noam Chomsky"."""
    idx = _wiki_index(tmp_path, CHOMSKY_DOCS)
    read = "Noam Chomsky is the author of over 100 books [1].\nSo the answer is: Avram Noam Chomsky"
    llm = ScriptedLLM(["Who has written more than 100 books?", CHOMSKY_ABSTAINS, read])
    r = get_strategy("step-back", llm, idx, k=2, lang="en").run(CHOMSKY_Q)
    note = next(e.data for e in r.trace.of("repair") if e.data["name"] == "abstention_reread")
    assert note["used"] is True and note["read"] == "Avram Noam Chomsky"
    assert str(llm.calls[-1].payload[-1]["content"]).startswith("Answer the question using only the documents below")
    assert r.short_answer == "Avram Noam Chomsky" and [c.doc_id for c in r.citations] == ["Noam Chomsky"]
    assert "abstained" not in [e.data.get("type") for e in r.trace.of("note")]
    # a second reading that also finds nothing: the abstention stands
    llm = ScriptedLLM(["Who has written more than 100 books?", CHOMSKY_ABSTAINS, "So the answer is: unknown"])
    r = get_strategy("step-back", llm, idx, k=2, lang="en").run(CHOMSKY_Q)
    notes = {e.data.get("type"): e.data for e in r.trace.of("note")}
    reread = next(e.data for e in r.trace.of("repair") if e.data["name"] == "abstention_reread")
    assert reread["used"] is False and "abstained" in notes
    assert r.short_answer == "cannot be answered from the available documents" and r.citations == []
    # rules: "insufficient evidence" is the form's answer; no second reading
    llm = ScriptedLLM(["Who has written more than 100 books?", CHOMSKY_ABSTAINS])
    r = get_strategy("step-back", llm, idx, k=2, lang="en", documents="rules", verdict=False).run(CHOMSKY_Q)
    assert len(llm.calls) == 2 and "abstention_reread" not in [e.data["name"] for e in r.trace.of("repair")]
    # the repair off (and the paper mode): the abstention stands, no second reading
    for opts in ({"abstention_reread": False}, {"mode": "paper"}):
        llm = ScriptedLLM(["Who has written more than 100 books?", CHOMSKY_ABSTAINS])
        r = get_strategy("step-back", llm, idx, k=2, lang="en", **opts).run(CHOMSKY_Q)
        assert "abstention_reread" not in [e.data["name"] for e in r.trace.of("repair")]
        assert len(llm.calls) == 2 and r.citations == []


# -- the verdict (issue 53): a yes/no question over rules decided from its deciding clause -----------------
# the embedded 1.5B model's real replies on policy_zh q1 (`sleuth ask --strategy step-back`): its step-back
# question and its verdict over the three best clauses
Q1_STEP_BACK = "行程取消后，退票费用的计算依据是什么？"
Q1_VERDICT = "依据：第十五条\n结论：不是"


def test_a_yes_no_policy_question_is_decided_from_its_deciding_clause(data_dir: Path, tmp_path: Path) -> None:
    qs = _policy(data_dir)
    idx = open_retriever(str(data_dir / "policy_zh" / "corpus.jsonl"), cache_dir=tmp_path)
    llm = ScriptedLLM([Q1_STEP_BACK, Q1_VERDICT])
    r = get_strategy("step-back", llm, idx).run(qs["q1"]["question"], filters=_scope(qs["q1"]))
    assert [e.data["step"] for e in r.trace.of("llm")] == ["step back", "verdict"]  # no rule-and-clause form
    verdict = r.trace.of("verdict")[0].data
    assert verdict["polarity"] == "no" and verdict["deciding"] == "trv-2025-02#0 第十五条"
    assert "trv-2025-02#0 第十五条" in verdict["clauses"]  # the refund clause is among the three shown
    shown = str(llm.calls[1].payload)
    assert "第十五条 因公取消行程产生的退票费用" in shown and "[1]" in shown
    assert r.short_answer == "不是"
    assert r.answer.startswith("不是。\n依据：第十五条 因公取消行程产生的退票费用") and "15个自然日" in r.answer
    assert r.answer.endswith("[1]") and [p.doc_id for p in r.citations] == ["trv-2025-02"]


def test_switching_the_verdict_or_the_rule_form_off_removes_exactly_its_step(data_dir: Path, tmp_path: Path) -> None:
    """The same policy question: ``verdict=false`` answers in the rule-and-clause form (no verdict call);
    ``rule_form=false`` asks the paper's prompts (the verdict, which reads only the detection of rules, stays),
    and with ``verdict=false`` too answers in the paper's one form;
    ``grounding=false`` cites every passage in context instead of the ones the answer rests on."""
    qs = _policy(data_dir)
    idx = open_retriever(str(data_dir / "policy_zh" / "corpus.jsonl"), cache_dir=tmp_path)
    form = "一般规定：第二条 30个自然日 [3]\n专门条款：第十五条 退款到账后15个自然日内 [1]\n结论：不是，按第十五条。\n简短答案：不是"
    q, scope = qs["q1"]["question"], _scope(qs["q1"])
    on_llm = ScriptedLLM([Q1_STEP_BACK, Q1_VERDICT])
    on = get_strategy("step-back", on_llm, idx).run(q, filters=scope)
    llm = ScriptedLLM([Q1_STEP_BACK, form])
    off = get_strategy("step-back", llm, idx, verdict=False).run(q, filters=scope)
    assert [e.data["step"] for e in off.trace.of("llm")] == ["step back", "answer"] and not off.trace.of("verdict")
    assert "verdict" not in [e.data["name"] for e in off.trace.of("repair")]
    assert "verdict" in [e.data["name"] for e in on.trace.of("repair")]
    assert off.trace.of("step_back")[0].data["form"] == "rules" and "专门条款" in str(llm.calls[1].payload)
    paper_prompts = ScriptedLLM([Q1_STEP_BACK, Q1_VERDICT])
    r = get_strategy("step-back", paper_prompts, idx, rule_form=False).run(q, filters=scope)
    assert [e.data["step"] for e in r.trace.of("llm")] == ["step back", "verdict"] and r.answer == on.answer
    assert "一般规定" not in str(paper_prompts.calls[0].payload) and "一般规定" in str(on_llm.calls[0].payload)
    assert "rule_form" not in [e.data["name"] for e in r.trace.of("repair")]
    general = ScriptedLLM([Q1_STEP_BACK, "答案：不是 [1]\n简短答案：不是"])
    r = get_strategy("step-back", general, idx, rule_form=False, verdict=False).run(q, filters=scope)
    assert "专门条款" not in str(general.calls[1].payload) and r.short_answer == "不是"
    assert "rule_form" in [e.data["name"] for e in off.trace.of("repair")]
    wide = get_strategy("step-back", ScriptedLLM([Q1_STEP_BACK, Q1_VERDICT]), idx, grounding=False).run(
        q, filters=scope
    )
    assert wide.answer == on.answer and len(wide.citations) > len(on.citations) == 1


def test_a_clause_that_refers_to_the_general_rule_is_quoted_with_it(data_dir: Path, tmp_path: Path) -> None:
    """第十六条 says "按第二条一般规定执行": the answer quotes 第二条 (its 30 days) after it."""
    from sleuth.strategies.repairs.clauses import referred, split_clauses

    corpus = [
        json.loads(ln) for ln in (data_dir / "policy_zh" / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    ps = [Passage(id=d["id"] + "#0", doc_id=d["id"], title=d["title"], text=d["text"]) for d in corpus]
    every = split_clauses(ps)
    c16 = next(c for c in every if c.number == "第十六条")
    assert [(c.passage.doc_id, c.number) for c in referred(c16, every)] == [("trv-2025-01", "第二条")]
    # a reference inside a sentence ("期限见办法第十五条。") starts no clause
    assert [c.number for c in every if c.passage.doc_id == "trv-2025-faq"] == [""]


def test_an_undecided_verdict_leaves_the_question_to_the_rule_form(data_dir: Path, tmp_path: Path) -> None:
    qs = _policy(data_dir)
    idx = open_retriever(str(data_dir / "policy_zh" / "corpus.jsonl"), cache_dir=tmp_path)
    form = "一般规定：第二条 30个自然日 [3]\n专门条款：第十五条 退款到账后15个自然日内 [1]\n结论：不是，按第十五条。\n简短答案：不是"
    llm = ScriptedLLM([Q1_STEP_BACK, "依据：第十五条\n结论：要看退款时间", form])
    r = get_strategy("step-back", llm, idx).run(qs["q1"]["question"], filters=_scope(qs["q1"]))
    assert [e.data["step"] for e in r.trace.of("llm")] == ["step back", "verdict", "answer"]
    assert [e.data["type"] for e in r.trace.of("note") if e.data["type"] == "verdict_undecided"]
    assert r.short_answer == "不是" and "简短答案" not in r.answer


def test_the_verdicts_own_marks_number_the_listing_and_never_reach_the_answer(data_dir: Path, tmp_path: Path) -> None:
    """ "依据：[2]" names the second clause listed; the answer cites that clause's passage by the context's number."""
    qs = _policy(data_dir)
    idx = open_retriever(str(data_dir / "policy_zh" / "corpus.jsonl"), cache_dir=tmp_path)
    llm = ScriptedLLM([Q1_STEP_BACK, "依据：[2]\n结论：不是，应按[2]在到账后15日内提交。"])
    r = get_strategy("step-back", llm, idx).run(qs["q1"]["question"], filters=_scope(qs["q1"]))
    shown = r.trace.of("verdict")[0].data["clauses"]
    assert r.trace.of("verdict")[0].data["deciding"] == shown[1]
    first = r.answer.splitlines()[0]
    assert first == "不是，应按在到账后15日内提交。" and r.short_answer == "不是"
    assert r.answer.splitlines()[1].endswith("[1]") and len(r.citations) == 1


# -- answerability (issue 53): a question the accessible clauses do not settle says so ----------------------
# policy_zh q5 in the all-staff scope: the audit ratio is in a finance-only file.  "依据：第21条 / 结论：无" is
# the embedded 1.5B model's real reply over the three best clauses (tuning half of benchmarks/data/policy_zh)
Q5_STEP_BACK = "内部审计对差旅报销的抽查比例一般是多少？"


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        ("依据：第21条\n结论：无", "said"),  # the model's real reply
        ("依据：无\n结论：现有材料没有规定", "said"),
        ("依据：第二十五条\n结论：抽查比例为报销笔数的10%。", "invented"),  # no clause holds 10
        ("依据：第二十条\n结论：差旅报销的抽查比例", "restated"),  # nothing beyond the question's own words
        ("依据：第二十五条\n结论：内部审计一般每季度随机抽取部分差旅单据进行复核", "unsupported"),  # made up
    ],
)
def test_a_question_the_accessible_clauses_do_not_settle_says_so_and_cites_nothing(
    data_dir: Path, tmp_path: Path, reply: str, why: str
) -> None:
    qs = _policy(data_dir)
    idx = open_retriever(str(data_dir / "policy_zh" / "corpus.jsonl"), cache_dir=tmp_path)
    llm = ScriptedLLM([Q5_STEP_BACK, reply])
    r = get_strategy("step-back", llm, idx).run(qs["q5"]["question"], filters=_scope(qs["q5"]))
    assert [e.data["step"] for e in r.trace.of("llm")] == ["step back", "answerable"]  # no rule-and-clause form
    shown = str(llm.calls[1].payload)
    assert "问题：内部审计对差旅报销的抽查比例是多少？" in shown and "[3]" in shown and "[4]" not in shown
    check = r.trace.of("answerable")[0].data
    assert check["settled"] is False and check["why"] == why and len(check["clauses"]) == 3
    assert r.answer == r.short_answer == "根据现有可查阅的材料无法回答" and r.citations == []
    assert "fin-audit-2025" not in json.dumps(r.to_dict(), ensure_ascii=False)
    # scored as the benchmark scores it: the right answer, no scope violation
    from sleuth.eval.policy import conclusion_score, scope_violations

    cites = [p.to_dict() for p in r.citations]
    bad = scope_violations(_scope(qs["q5"]), cites, restricted=["fin-audit-2025"], answer=r.answer)
    score = conclusion_score(
        expected=None, answerable=False, answer=r.answer, short=r.short_answer, must=[], must_not=["5%"], violations=bad
    )
    assert score["conclusion"] == 1.0 and bad == []


def test_a_question_the_clauses_settle_is_answered_by_the_rule_form(data_dir: Path, tmp_path: Path) -> None:
    """policy_zh q2: the clauses state the hotel fee's deadline (第十六条 -> 第二条), so the form answers and cites."""
    qs = _policy(data_dir)
    idx = open_retriever(str(data_dir / "policy_zh" / "corpus.jsonl"), cache_dir=tmp_path)
    settled = "依据：第十六条\n结论：自原定行程结束之日起计算。"  # the model's real reply
    form = (
        "一般规定：员工应在行程结束后30个自然日内提交差旅报销申请 [2]\n"
        "专门条款：第十六条 无法退回的酒店预订费用按第二条一般规定执行，自原定行程结束之日起计算 [1]\n"
        "结论：原定行程结束之日起30个自然日内提交。\n简短答案：30个自然日"
    )
    llm = ScriptedLLM(["取消行程后酒店费用的报销期限怎么规定？", settled, form])
    r = get_strategy("step-back", llm, idx).run(qs["q2"]["question"], filters=_scope(qs["q2"]))
    assert [e.data["step"] for e in r.trace.of("llm")] == ["step back", "answerable", "answer"]
    assert r.trace.of("answerable")[0].data == {**r.trace.of("answerable")[0].data, "settled": True, "why": ""}
    assert "abstained" not in [e.data.get("type") for e in r.trace.of("note")]
    assert r.short_answer == "30个自然日" and "30个自然日" in r.answer and "简短答案" not in r.answer
    assert "trv-2025-02" in {p.doc_id for p in r.citations}


def test_settles_reads_numbers_and_the_questions_own_words() -> None:
    from sleuth.strategies.repairs.clauses import split_clauses
    from sleuth.strategies.repairs.step_back import parse_verdict, settles

    shown = split_clauses(
        [
            Passage(
                id="lv#0",
                doc_id="lv",
                title="考勤",
                text="第八条 已满10年不满20年的，年休假10天。第九条 病假须附医院证明。第十条 试用期内的员工不享受年休假。",
            )
        ]
    )
    q = "累计工作满12年的员工每年有几天年假？"
    assert settles(parse_verdict("依据：第八条\n结论：10天")[1], q, shown) == (True, "")
    assert settles("10天", q, shown) == (True, "")  # the numbers of the question and the clauses are known
    assert settles("每年有12天年假", q, shown) == (False, "restated")  # 12: the question's number, no clause's
    assert settles("15天", q, shown) == (False, "invented")
    assert settles("第九条", q, shown) == (False, "restated")  # a clause's number is no value
    assert settles("无。", q, shown) == (False, "said")
    assert settles("工龄满10年后由人事部门每年重新核定天数", q, shown) == (False, "unsupported")  # 10 is known
    assert settles("", q, shown) == (False, "said")
    assert settles("Not stated in the available documents.", "How many days?", shown) == (False, "said")
    # "没有" can be an answer (试用期员工没有年休假), not a refusal
    assert settles("没有，第十条规定试用期内不享受年休假", "试用期员工有几天年假？", shown) == (True, "")


def test_a_basis_in_arabic_numerals_names_its_clause() -> None:
    """The model often writes "依据：第8条" for 第八条 (tuning q8): the answer must quote 第八条, not the first listed."""
    from sleuth.strategies.repairs.clauses import clause_number, deciding, split_clauses

    assert [clause_number(x) for x in ("第十五条", "第15条", "第二十一条", "第十条", "第一百零二条", "Article 7")] == [
        15,
        15,
        21,
        10,
        102,
        7,
    ]
    shown = split_clauses(
        [
            Passage(id="e#0", doc_id="e", title="费用", text="第十一条 业务招待餐费每人每次不超过300元。"),
            Passage(id="t#0", doc_id="t", title="差旅", text="第八条 一线城市住宿每晚不超过600元。"),
        ]
    )
    assert deciding("第8条", shown).number == "第八条"
    assert deciding("第18条", shown).number == "第十一条"  # no clause of that number: the first shown
    assert deciding("[2]", shown).number == "第八条"


def test_a_named_general_rule_gives_way_to_the_shown_clause_that_overrides_it() -> None:
    """The model names 第二条 (tuning exp-t2); 第十六条, shown too, says it does not apply to December: 第十六条 decides."""
    from sleuth.strategies.repairs.clauses import deciding, referred, split_clauses

    title = "费用报销管理办法（2025版）"
    shown = split_clauses(
        [
            Passage(
                id="a#0", doc_id="a", title=title, text="第十六条 12月发生的费用应在次年1月10日前提交，不适用第二条。"
            ),
            Passage(id="b#0", doc_id="b", title=title, text="第二条 员工应在费用发生之日起60个自然日内提交报销。"),
        ]
    )
    chosen = deciding("第2条", shown)
    assert chosen.number == "第十六条" and [c.number for c in referred(chosen, shown)] == ["第二条"]
    assert deciding("第十六条", shown).number == "第十六条"


def test_only_questions_that_ask_no_yes_or_no_are_checked_for_answerability() -> None:
    from sleuth.lang.question import analyze

    def asks(q: str) -> bool:
        return analyze(q).asks_yes_no

    assert asks("休婚假需要提前申请吗？要提前几天？") and asks("Does it apply? How many days?") and asks("能报吗？")
    assert not asks("内部审计对差旅报销的抽查比例是多少？") and not asks("How many days?")


def test_a_form_that_says_nothing_gives_way_to_the_settled_answerability_reply(tmp_path: Path) -> None:
    """benchmarks/data/policy_zh tuning sec-t4: the answerability call settled it ("每180天更换一次"), then the
    form replied "一般规定：无 / 专门条款：[1]" (the model's real replies): the settled reply is the answer."""
    bench = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "policy_zh"
    q = next(json.loads(x) for x in (bench / "tuning.jsonl").read_text("utf-8").splitlines() if '"sec-t4"' in x)
    idx = open_retriever(str(bench / "corpus.jsonl"), cache_dir=tmp_path)
    replies = ["2024年的密码更换规定是什么？", "依据：第8条\n结论：每180天更换一次。", "一般规定：无\n专门条款：[1]"]
    r = get_strategy("step-back", ScriptedLLM(replies), idx).run(q["question"], filters=_scope(q))
    assert [e.data["step"] for e in r.trace.of("llm")] == ["step back", "answerable", "answer"]
    assert r.answer == "每180天更换一次。" and "180" in r.short_answer
    used = [e.data for e in r.trace.of("repair") if e.data["name"] == "verdict"]
    assert used and used[0]["used"] == "每180天更换一次。" and used[0]["form"].startswith("一般规定：无")
    assert [p.doc_id for p in r.citations] == ["sec-2024-01"]
    full = "一般规定：第八条 登录密码每180天更换一次 [1]\n结论：每180天更换一次。\n简短答案：每180天"
    kept = get_strategy("step-back", ScriptedLLM([*replies[:2], full]), idx).run(q["question"], filters=_scope(q))
    assert kept.short_answer == "每180天" and "verdict" not in [e.data["name"] for e in kept.trace.of("repair")]


def test_the_verdict_ranks_clauses_by_the_question_and_the_step_back_question() -> None:
    """A question that shares no word with its deciding clause ("住一晚650元" / "住宿标准") reaches it
    through the step-back question ("住宿费用报销的一般规定"), fused by reciprocal rank."""
    from sleuth.strategies.repairs.clauses import rank_clauses, split_clauses

    text = (
        "第八条 员工出差乘坐火车可选择二等座，副总监及以上可选择一等座。第九条 住宿标准：一线城市每人每晚不超过600元。"
        "第十条 出差期间的伙食补助每天100元。第十一条 报销时须提交发票原件。"
    )
    clauses = split_clauses([Passage(id="t#0", doc_id="t", title="差旅办法", text=text)])
    q = "出差去上海住一晚650元，能全额报销吗？"
    alone = [c.number for c in rank_clauses(q, clauses, 2)]
    both = [c.number for c in rank_clauses(q, clauses, 2, also="出差住宿费用报销的一般规定和例外是什么？")]
    assert "第九条" not in alone and "第九条" in both
    assert [c.number for c in rank_clauses(q, clauses, 4)] == [c.number for c in rank_clauses(q, clauses, 4, also="")]


_RANK_IN_A_PROCESS = """
import json, sys
from sleuth.search.base import Passage
from sleuth.strategies.repairs.clauses import rank_clauses, split_clauses
docs = {d["id"]: d for d in map(json.loads, open(sys.argv[1], encoding="utf-8"))}
ps = [Passage(id=f"{i}#0", doc_id=i, title=docs[i]["title"], text=docs[i]["text"]) for i in sys.argv[2:]]
q, also = "在境外办公，可以直接连酒店的公共Wi-Fi访问公司内部系统吗？", "在境外办公，是否可以直接连酒店的公共Wi-Fi访问公司内部系统？"
print([c.name for c in rank_clauses(q, split_clauses(ps), 3, also=also)])
"""


def test_the_clause_ranking_does_not_depend_on_the_hash_seed() -> None:
    """policy_zh tuning sec-t6: the third clause shown to the verdict was 第三条 or 第四条 of the purchase rules
    depending on PYTHONHASHSEED (8 gave the other), since the weights summed a set's floats in its hash order."""
    import os
    import subprocess
    import sys

    corpus = Path(__file__).resolve().parents[1] / "benchmarks/data/policy_zh/corpus.jsonl"
    ids = ["sec-ovs-2025-01", "pur-ovs-2025-01", "lv-ovs-2025-01", "trv-ovs-2025-01", "exp-ovs-2025-01"]
    seen = set()
    for seed in ("0", "8"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        run = subprocess.run(
            [sys.executable, "-c", _RANK_IN_A_PROCESS, str(corpus), *ids], env=env, capture_output=True
        )
        assert run.returncode == 0, run.stderr.decode()
        seen.add(run.stdout.decode().strip())
    assert len(seen) == 1, seen
