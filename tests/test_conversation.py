"""Follow-up questions: the standalone-question step, its budget and option, and conversations in
``sleuth eval`` (three modes per conversation, the report's comparison) and the benchmark builder."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import titled_index
from sleuth.eval.conversations import LAST, REWRITE, STANDALONE, conversation_rows, conversation_section
from sleuth.eval.datasets import DatasetError, load_dataset
from sleuth.eval.runner import build_tasks
from sleuth.llm.scripted import ScriptedLLM
from sleuth.search.base import Filters
from sleuth.strategies import get_strategy
from sleuth.strategies.base import RunState, Strategy
from sleuth.strategies.conversation import (
    BadHistory,
    Turn,
    estimate_tokens,
    find_reference,
    fit,
    kept_entity,
    leans_on_context,
    parse_history,
    parse_rewrite,
    previous_entity,
)

ROOT = Path(__file__).resolve().parents[1]
DOCS = {
    "Ayla Brandt": "Ayla Brandt is a glass artist who founded the Lumen Works studio in Tallinn in 1998.",
    "Lumen Works": "Lumen Works is a glass studio in Tallinn. It employs forty glassblowers.",
    "Tallinn": "Tallinn is the capital of Estonia; its old town is a UNESCO site.",
}
HISTORY = [
    {"role": "user", "content": "Who founded the Lumen Works studio?"},
    {"role": "assistant", "content": "Ayla Brandt."},
]


@pytest.fixture(scope="module")
def glass(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return titled_index(tmp_path_factory, "glass", DOCS)


def rag_model(rewritten: str = "In which year did Ayla Brandt found the Lumen Works studio?"):
    """A model that answers the rewrite prompt with ``rewritten`` and RAG's prompt from its documents."""

    def reply(payload: Any, params: Any) -> str:
        text = payload if isinstance(payload, str) else "\n".join(m["content"] for m in payload)
        if "Standalone question:" in text or "完整问题：" in text:
            return f"Standalone question: {rewritten}\n\nmore text"
        if "1998" in text:
            return "She founded it in 1998 [1].\nSo the answer is: 1998"
        return "The documents do not say.\nSo the answer is: unknown"

    return ScriptedLLM(reply)


# ------------------------------------------------------------------ the step itself
def test_a_follow_up_is_rewritten_first_and_the_strategy_answers_the_rewrite(glass: Any) -> None:
    llm = rag_model()
    seen: list[str] = []
    r = get_strategy("rag", llm, glass, k=2).run(
        "In which year did she found it?", history=HISTORY, listeners=[lambda ev: seen.append(ev.kind)]
    )
    assert r.short_answer == "1998" and r.citations[0].title == "Ayla Brandt"
    kinds = [e.kind for e in r.trace.events]
    assert kinds[:3] == ["start", "llm", "rewrite"] and seen[:3] == kinds[:3]  # first in the trace and the stream
    assert r.trace.events[1].data["step"] == "rewrite"
    rw = r.trace.of("rewrite")[0].data
    assert rw["original"] == "In which year did she found it?"
    assert rw["question"] == r.question == "In which year did Ayla Brandt found the Lumen Works studio?"
    assert rw["turns"] == rw["turns_used"] == 2 and rw["dropped_turns"] == 0
    assert r.trace.of("search")[0].data["query"] == rw["question"]
    # the rewrite prompt carried the earlier turns and the question, in English
    prompt = llm.calls[0].payload[0]["content"]
    assert "User: Who founded the Lumen Works studio?\nAssistant: Ayla Brandt." in prompt
    assert prompt.endswith("Last question: In which year did she found it?\nStandalone question:")
    assert r.llm_calls == 2


def test_no_history_costs_nothing_and_the_option_turns_the_step_off(glass: Any) -> None:
    plain = get_strategy("rag", rag_model(), glass, k=2).run("In which year did Ayla Brandt found Lumen Works?")
    assert plain.llm_calls == 1 and not plain.trace.of("rewrite")
    empty = get_strategy("rag", rag_model(), glass, k=2).run("In which year did Ayla Brandt found it?", history=[])
    assert empty.llm_calls == 1 and not empty.trace.of("rewrite")
    off = get_strategy("rag", rag_model(), glass, k=2, rewrite=False).run("In which year did she found it?",
                                                                           history=HISTORY)  # fmt: skip
    assert off.llm_calls == 1 and not off.trace.of("rewrite")
    note = [e.data for e in off.trace.of("note") if e.data.get("type") == "history_unused"]
    assert note and note[0]["turns"] == 2
    assert off.trace.of("search")[0].data["query"] == "In which year did she found it?"


def test_chinese_follow_ups_use_the_chinese_prompt(glass: Any) -> None:
    llm = rag_model("境外出差的报销期限是多久？")
    r = get_strategy("rag", llm, glass, k=2).run(
        "那出境的呢？",
        history=[{"role": "user", "content": "国内出差的报销期限是多久？"}, {"role": "assistant", "content": "30天。"}],
    )
    prompt = llm.calls[0].payload[0]["content"]
    assert "用户：国内出差的报销期限是多久？\n助手：30天。" in prompt and prompt.endswith("完整问题：")
    assert r.question == "境外出差的报销期限是多久？" and r.lang == "zh"


def test_a_long_history_is_cut_to_the_budget_and_the_trace_says_what_was_dropped(glass: Any) -> None:
    old = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " + "words " * 60} for i in range(10)]
    llm = rag_model()
    r = get_strategy("rag", llm, glass, k=2, history_tokens=200).run("And in which year?", history=old + HISTORY)
    rw = r.trace.of("rewrite")[0].data
    assert rw["turns"] == 12 and rw["dropped_turns"] > 0 and rw["dropped_tokens"] > 0
    assert rw["turns_used"] + rw["dropped_turns"] == 12
    prompt = llm.calls[0].payload[0]["content"]
    assert "Ayla Brandt." in prompt and "turn 0 " not in prompt and "turn 9 " in prompt


def test_fit_keeps_the_newest_turns_and_trims_one_that_alone_is_too_long() -> None:
    turns = [Turn("user", "a" * 400), Turn("assistant", "b" * 40), Turn("user", "c" * 40)]
    w = fit(turns, 30)
    assert [t.content[0] for t in w.kept] == ["b", "c"] and w.dropped_turns == 1 and w.dropped_tokens == 100
    w = fit([Turn("user", "x" * 1000)], 10)
    assert w.trimmed and w.kept[0].content.startswith("…") and estimate_tokens(w.kept[0].content) <= 12
    assert estimate_tokens("出境的呢") == 4 and estimate_tokens("abcdefgh") == 2


def test_the_rewrite_reply_is_read_defensively(glass: Any) -> None:
    assert (
        parse_rewrite("Standalone question: Who founded Tesla?\nUser: more", "Who founded it?") == "Who founded Tesla?"
    )
    assert parse_rewrite('  "Who founded Tesla?"', "q") == "Who founded Tesla?"
    assert parse_rewrite("完整问题：境外出差的期限？", "q") == "境外出差的期限？"
    assert parse_rewrite("\n\n", "Who founded it?") == "Who founded it?"
    assert parse_rewrite("x" * 5000, "Who founded it?") == "Who founded it?"
    # an empty reply: the original question is answered, and the trace says what was asked
    r = get_strategy("rag", ScriptedLLM(["", "So the answer is: unknown"]), glass, k=2).run("Who?", history=HISTORY)
    assert r.trace.of("rewrite")[0].data["question"] == "Who?" == r.question


@pytest.mark.parametrize(
    ("history", "message"),
    [
        ("just text", "must be a list"),
        ([{"role": "system", "content": "x"}], "role 'system'"),
        ([{"role": "user", "content": 3}], "no text content"),
        ([{"role": "user", "content": "a\x00b"}], "history turn 1"),
        ([{"role": "user", "content": "x" * 20_001}], "the limit is 20000"),
    ],
)
def test_a_malformed_history_is_one_clear_error(history: Any, message: str) -> None:
    with pytest.raises(BadHistory, match=message):
        parse_history(history)


def test_history_never_changes_the_filters(glass: Any) -> None:
    scope = Filters.make(acl=["nobody"])
    r = get_strategy("rag", rag_model(), glass, k=2).run(
        "In which year did she found it?", history=[*HISTORY, {"role": "user", "content": "filters: acl=all"}],
        filters=scope,
    )  # fmt: skip
    assert r.trace.of("start")[0].data["filters"] == scope.to_dict()
    assert all(not e.data["passages"] for e in r.trace.of("search")) and not r.citations


# ------------------------------------------------------------------ eval
def _conversations(tmp_path: Path) -> Path:
    rows = [
        {"id": "c1", "messages": [*HISTORY, {"role": "user", "content": "In which year did she found it?"}],
         "standalone": "In which year did Ayla Brandt found Lumen Works?", "answers": ["1998"]},
        {"id": "c2", "question": "Where is Lumen Works?", "answers": ["Tallinn"]},
    ]  # fmt: skip
    path = tmp_path / "conv.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_conversation_records_load_and_become_three_tasks(tmp_path: Path) -> None:
    ds = load_dataset(_conversations(tmp_path))
    assert ds.format == "jsonl"
    c1, c2 = ds.items
    assert c1.question == "In which year did she found it?" and c1.history == HISTORY and c1.standalone
    assert not c2.history
    tasks = build_tasks(ds, ["rag"], gap=False)
    got = [(t[1].id, t[2].get("mode"), t[1].question, bool(t[1].history)) for t in tasks]
    assert got == [
        ("c1", REWRITE, "In which year did she found it?", True),
        ("c1::last", LAST, "In which year did she found it?", False),
        ("c1::standalone", STANDALONE, "In which year did Ayla Brandt found Lumen Works?", False),
        ("c2", None, "Where is Lumen Works?", False),
    ]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "x", "messages": [{"role": "assistant", "content": "hi"}], "answers": []}) + "\n")
    with pytest.raises(DatasetError, match="no user message"):
        load_dataset(bad, "jsonl")


def _rec(qid: str, mode: str, score: float, calls: int, rewrite_tokens: int = 0) -> dict[str, Any]:
    trace = []
    if rewrite_tokens:
        trace = [{"kind": "llm", "data": {"step": "rewrite", "usage": {"prompt_tokens": rewrite_tokens,
                                                                       "completion_tokens": 10}}}]  # fmt: skip
    kind = "main" if mode == REWRITE else "turn"
    return {
        "strategy": "rag",
        "qid": qid if mode == REWRITE else f"{qid}::{mode}",
        "task": {"kind": kind, "mode": mode, **({"parent": qid} if kind == "turn" else {})},
        "scores": {"score": score, "f1": score, "llm_calls": calls, "prompt_tokens": 100 * calls, "seconds": calls},
        "result": {"trace": trace},
    }


def test_the_report_compares_rewrite_last_and_standalone_paired() -> None:
    records = []
    for i in range(30):
        q = f"q{i}"
        records += [_rec(q, REWRITE, 0.8 if i % 5 else 0.0, 2, 90), _rec(q, LAST, 0.1, 1), _rec(q, STANDALONE, 0.9, 1)]
    (row,) = conversation_rows(records, ["rag"])
    assert row["n"] == 30 and row["rewrite_calls"] == 1 and row["rewrite_tokens"] == 100
    assert row[REWRITE]["score"][0] == pytest.approx(0.64) and row[LAST]["score"][0] == pytest.approx(0.1)
    m, lo, _ = row["vs_last"]["diff"]
    assert m == pytest.approx(0.54) and lo > 0 and row["vs_last"]["wins"] == 24
    assert row["share"] == pytest.approx(0.64 / 0.9)
    text = "\n".join(conversation_section(records, ["rag"]))
    assert "## Follow-up questions" in text and "| rag | 30 | 0.640 [" in text and "+0.540 [" in text
    assert "| rag | rewrite | 2.00 | 200.0 |" in text and "| 1.00 | 100.0 |" in text
    assert conversation_section([r for r in records if r["task"]["mode"] == REWRITE]) == []


# ------------------------------------------------------------------ the benchmark builder
def test_the_musique_builder_makes_follow_ups_from_decompositions(data_dir: Path, tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import build_conversations as bc
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    assert bc.reference_for("X >> country") == "that country"
    assert bc.reference_for("X >> performer") == "that person"
    assert bc.reference_for("What company makes X?") == "that company"
    assert bc.reference_for("What musical instrument does X play?") == "that musical instrument"
    assert bc.reference_for("Who painted X?") == "that person"
    out = tmp_path / "conv.jsonl"
    assert bc.main([str(data_dir / "musique/train.json"), str(out)]) == 0
    ds = load_dataset(out)
    assert len(ds.items) >= 40
    source = {it.id: it for it in load_dataset(data_dir / "musique/train.json", "musique").items}
    for it in ds.items:
        hop1, hop2 = source[it.metadata["source_id"]].decomposition[:2]
        assert len(it.history) == 2 and it.history[1]["content"].startswith(hop1.answer.rstrip("."))
        assert "#" not in it.question and it.metadata["reference"].lower() in it.question.lower()
        assert hop1.answer in it.standalone and it.answers[0] == hop2.answer
        assert it.paragraphs and (not it.gold_ids or it.gold_ids[0] in {p.id for p in it.paragraphs})


def test_the_builder_keeps_one_half_of_musique_and_the_rewrite_benchmark_scores_rewrites(
    data_dir: Path, tmp_path: Path
) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_rewrite as br
        import build_conversations as bc
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    ids = {}
    for part in ("tuning", "reporting"):
        out = tmp_path / f"{part}.jsonl"
        assert bc.main([str(data_dir / "musique/train.json"), str(out), "--split", part]) == 0
        recs = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
        assert len(recs) >= 40 and {r["metadata"]["split"] for r in recs} == {part}
        ids[part] = {r["metadata"]["source_id"] for r in recs}
    assert not ids["tuning"] & ids["reporting"]
    with pytest.raises(SystemExit, match="reporting"):  # never tuned on by accident
        br.load(tmp_path / "reporting.jsonl", reporting=False)
    recs = br.load(tmp_path / "tuning.jsonl", reporting=False)[:3]
    # a model that keeps the reference: the check repairs typed references, the rows say which
    rows = br.measure(ScriptedLLM(lambda payload, params: "Standalone question: " + recs_last(payload)), recs, {})
    off = br.measure(ScriptedLLM(lambda payload, params: "Standalone question: " + recs_last(payload)), recs,
                     {"rewrite_check": False})  # fmt: skip
    for r, o, rec in zip(rows, off, recs, strict=True):
        assert o["rewritten"].endswith(r["question"]) and o["calls"] == r["calls"] == 1  # no call for the check
        if rec["metadata"]["reference"] != "it":
            assert r["bridge"] == 1.0 and r["fallback"] == 1.0 and r["f1"] >= o["f1"]
    assert "n=3" in br.summary("defaults", rows)


def recs_last(payload: Any) -> str:
    """The last question of a rewrite prompt, given back unchanged (a model that resolves nothing)."""
    text = payload if isinstance(payload, str) else "\n".join(m["content"] for m in payload)
    return text.rsplit("Last question: ", 1)[1].split("\n", 1)[0]


def test_a_rewrite_that_only_repeats_a_question_falls_back_to_the_one_before_and_the_message(glass: Any) -> None:
    zh = [{"role": "user", "content": "国内出差的报销期限是多久？"}, {"role": "assistant", "content": "30天。"}]
    for echoed in ("那出境的呢？", "国内出差的报销期限是多久？"):  # the message itself, or the earlier question
        r = get_strategy("rag", rag_model(echoed), glass, k=2).run("那出境的呢？", history=zh)
        rw = r.trace.of("rewrite")[0].data
        assert rw["fallback"] and rw["question"] == r.question == "国内出差的报销期限是多久？那出境的呢？"
    r = get_strategy("rag", rag_model("Who founded it?"), glass, k=2).run("Who founded it?", history=HISTORY)
    assert r.question == "Who founded the Lumen Works studio? Who founded it?"
    # a message that stands alone may come back unchanged: no fallback
    alone = "How many glassblowers work at Lumen Works?"
    r = get_strategy("rag", rag_model(alone), glass, k=2).run(alone, history=HISTORY)
    assert r.question == alone and not r.trace.of("rewrite")[0].data["fallback"]
    r = get_strategy("rag", rag_model("差旅住宿费的报销需要哪些票据？"), glass, k=2).run(
        "差旅住宿费的报销需要哪些票据？", history=zh
    )
    assert not r.trace.of("rewrite")[0].data["fallback"]
    assert leans_on_context("往返那天怎么算？") and leans_on_context("那里的餐费怎么报？")
    assert not leans_on_context("员工出差坐火车可以选什么座位？") and not leans_on_context("Who founded Tesla?")


def test_a_rewrite_that_lost_the_previous_answer_gets_it_back_in_place_of_the_reference(glass: Any) -> None:
    hist = [{"role": "user", "content": "Where was the founder of Lumen Works born?"},
            {"role": "assistant", "content": "Tallinn."}]  # fmt: skip
    # the model kept "that city", or named the earlier question's entity instead of the answer
    for reply in ("What country is that city the capital of?", "What country is Lumen Works the capital of?"):
        r = get_strategy("rag", rag_model(reply), glass, k=2).run("What country is that city the capital of?",
                                                                  history=hist)  # fmt: skip
        rw = r.trace.of("rewrite")[0].data
        assert rw["fallback"] == "entity" and r.question == "What country is Tallinn the capital of?"
        assert r.trace.of("search")[0].data["query"] == r.question  # the strategy searches for the repaired question
        assert r.llm_calls == 2  # the check costs no call
        off = get_strategy("rag", rag_model(reply), glass, k=2, rewrite_check=False).run(
            "What country is that city the capital of?", history=hist
        )
        # without the check: the model's rewrite, or for a repeated message the older fallback (the earlier question too)
        want = reply if "Lumen" in reply else f"{hist[0]['content']} {reply}"
        assert off.question == want and off.trace.of("rewrite")[0].data["fallback"] != "entity"
    # a rewrite that names the answer stands
    good = "Which country is Tallinn, the city, the capital of?"
    r = get_strategy("rag", rag_model(good), glass, k=2).run("What country is that city the capital of?", history=hist)
    assert r.question == good and not r.trace.of("rewrite")[0].data["fallback"]


def test_self_ask_works_on_the_repaired_question(glass: Any) -> None:
    hist = [{"role": "user", "content": "Who founded the Lumen Works studio?"},
            {"role": "assistant", "content": "Ayla Brandt."}]  # fmt: skip

    def reply(payload: Any, params: Any) -> str:
        text = payload if isinstance(payload, str) else "\n".join(m["content"] for m in payload)
        if "Standalone question:" in text:
            return "Where was that person born?"  # the model kept the reference
        return "Are follow up questions needed here: No.\nSo the final answer is: Tallinn"

    llm = ScriptedLLM(reply)
    r = get_strategy("self-ask", llm, glass, k=2).run("Where was that person born?", history=hist)
    assert r.question == "Where was Ayla Brandt born?" and r.trace.of("rewrite")[0].data["fallback"] == "entity"
    later = [c.payload if isinstance(c.payload, str) else c.payload[-1]["content"] for c in llm.calls[1:]]
    assert later and all("Where was Ayla Brandt born?" in p and "that person" not in p for p in later)


def test_the_rewrite_check_only_fills_references_that_stand_for_a_short_previous_answer() -> None:
    def turns(answer: str) -> list[Turn]:
        return [Turn("user", "Who wrote the novel?"), Turn("assistant", answer)]

    melville = turns("Herman Melville.")
    assert kept_entity("When did that person die?", "When did that person die?", melville) == (
        "When did Herman Melville die?"
    )
    assert kept_entity("x", "Where did he live?", melville) == "Where did Herman Melville live?"
    assert kept_entity("x", "What was his first book?", melville) == "What was Herman Melville's first book?"
    assert kept_entity("x", "That fictional work has what character?", turns("Dracula.")) == (
        "Dracula has what character?"
    )
    # the rewrite named the answer ("'s", case and punctuation aside): it stands
    assert kept_entity("When did herman melville's son die?", "When did that person's son die?", melville) is None
    # "it" may mean the earlier question's subject: the model's reading stands
    assert kept_entity("When was Lumen Works opened?", "When was it opened?", turns("Ayla Brandt.")) is None
    # a long answer is not an entity; a message with no reference is left alone
    long = turns("The novel was written by Herman Melville in 1851, during his stay in Massachusetts.")
    assert previous_entity(long) == "" and kept_entity("x", "When did that person die?", long) is None
    assert kept_entity("Who won in 1990?", "Who won in 1990?", melville) is None
    assert find_reference("Is this true?") is None and find_reference("Who founded it?") is None
    assert kept_entity("Who won the league this year?", "Who won the league this year?", turns("Chelsea.")) is None
    assert kept_entity("x", "Who lived there?", turns("Paris.")) is None
    # Chinese: 他/她, 那个城市, 那里
    cao = [Turn("user", "《红楼梦》的作者是谁？"), Turn("assistant", "曹雪芹。")]
    assert kept_entity("他是哪个朝代的人？", "他是哪个朝代的人？", cao) == "曹雪芹是哪个朝代的人？"
    assert kept_entity("曹雪芹是哪个朝代的人？", "他是哪个朝代的人？", cao) is None
    assert kept_entity("x", "那个城市有多少人？", [Turn("assistant", "杭州。")]) == "杭州有多少人？"
    assert kept_entity("x", "那里的气温怎么样？", [Turn("assistant", "杭州。")]) is None


def test_tasks_group_by_their_conversation_even_when_ids_hold_the_separator() -> None:
    from sleuth.eval.gap import question_of

    assert question_of("a::b::last") == question_of("a::b::standalone") == question_of("a::b") == "a::b"
    assert question_of("q1::sub2") == "q1" and question_of("q1") == "q1"


class LastWord(Strategy):
    """Answers with the last word of the question it is given (after any rewrite): no model of its own."""

    name = "last-word"

    def solve(self, question: str, st: RunState) -> None:
        st.result.answer = st.result.short_answer = question.rstrip("?").split()[-1]


def test_sleuth_eval_runs_conversations_and_reports_the_three_modes(tmp_path: Path) -> None:
    from fake_openai_server import FakeOpenAIServer
    from sleuth.eval.runner import EvalConfig, run_eval
    from sleuth.eval.store import read_records

    rows = [
        {"id": f"p::{i}", "messages": [{"role": "user", "content": f"Who founded studio {i}?"},
                                        {"role": "assistant", "content": f"Founder{i}."},
                                        {"role": "user", "content": "Where was that person born?"}],
         "standalone": f"Where was Founder{i} born? Town{i}", "answers": [f"Town{i}"]}
        for i in range(4)
    ]  # fmt: skip
    data = tmp_path / "conv.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")

    def model(body: dict[str, Any]) -> str:  # the rewrite resolves the reference for even conversations
        text = body["messages"][0]["content"]
        i = text.rsplit("User: Who founded studio ", 1)[1].split("?")[0]
        return f"Where was Founder{i} born? Town{i}" if int(i) % 2 == 0 else "Where was that person born?"

    with FakeOpenAIServer(script=model) as srv:
        cfg = EvalConfig(data=str(data), format="jsonl", out=str(tmp_path / "run"), setting="closed",
                         strategies=[f"{Path(__file__).stem}:LastWord"], base_url=srv.base_url, model="fake")  # fmt: skip
        run_eval(cfg, progress=False)
    recs = read_records(tmp_path / "run")
    assert sorted(r["qid"] for r in recs) == sorted(
        f"p::{i}{s}" for i in range(4) for s in ("", "::last", "::standalone")
    )
    by = {r["qid"]: r for r in recs}
    assert by["p::0"]["scores"]["f1"] == 1.0 and by["p::0::last"]["scores"]["f1"] == 0.0
    assert by["p::0"]["history"][0]["content"] == "Who founded studio 0?"
    assert by["p::1"]["result"]["trace"][2]["data"]["fallback"]  # the model resolved nothing
    report = (tmp_path / "run" / "report.md").read_text(encoding="utf-8")
    assert "## Follow-up questions" in report and "| 4 | 0.500 [" in report
    assert "4 questions" in report or "4 of 4" in report or "complete" in report


def test_an_assistant_turn_with_control_characters_is_cleaned_a_user_turn_refused() -> None:
    turns = parse_history([{"role": "user", "content": "Q?"}, {"role": "assistant", "content": "A\x1b[0m\x00."}])
    assert turns[1].content == "A[0m."
    with pytest.raises(BadHistory, match="history turn 1"):
        parse_history([{"role": "user", "content": "Q\x1b?"}])
