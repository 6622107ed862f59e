"""The report compares strategies on the same questions while a run is still in progress."""

from __future__ import annotations

from sleuth.eval.report import render
from sleuth.eval.summary import comparable, progress


def _rec(strategy: str, qid: str, score: float, *, hop: int | None = None, hops: int = 2, wall_s: float = 0.0) -> dict:
    task = {"kind": "main"} if hop is None else {"kind": "sub", "parent": qid, "hop": hop, "hops": hops}
    return {
        "strategy": strategy,
        "qid": qid if hop is None else f"{qid}::sub{hop}",
        "status": "ok",
        "task": task,
        "scores": {"score": score, "primary": "f1", "f1": score, "em": score},
        "result": {"trace": []},
        "wall_s": wall_s,
    }


def _manifest(questions: int, *, gap: bool = False, **extra: object) -> dict:
    return {"settings": {"strategies": ["a", "b"], "gap": gap}, "data": {"questions": questions}, **extra}


def test_tables_cover_only_questions_every_strategy_finished() -> None:
    # "a" is one question ahead of "b", and scores 1 on it: counting it would flatter "a"
    recs = [_rec("a", "q1", 0.0), _rec("b", "q1", 0.0), _rec("a", "q2", 1.0)]
    prog = progress(recs, _manifest(3))
    assert prog.complete == {"q1"} and not prog.finished
    assert prog.text() == "1 of 3 questions answered by all 2 strategies (3 of 6 tasks)"
    assert [r["qid"] for r in comparable(recs, prog)] == ["q1", "q1"]
    report = render(recs, _manifest(3))
    assert "| progress | 1 of 3 questions answered by all 2 strategies (3 of 6 tasks) |" in report
    assert "1 record of questions still in progress is left out" in report
    assert "| a | 1 | 0.000 [0.000, 0.000] |" in report  # not 0.5 over two questions
    assert "| results | 3 records |" in report
    # the time still needed: each strategy's unanswered questions at its own recorded seconds a
    # question ("a" is ahead: one left at 1000 s; "b" two at 2600 s), not the questions no
    # strategy has finished at the pace of a whole question (that counted "a"'s q2 again)
    timed = [
        _rec("a", "q1", 0.0, wall_s=1000.0),
        _rec("b", "q1", 0.0, wall_s=2600.0),
        _rec("a", "q2", 1, wall_s=1000.0),
    ]
    assert progress(timed, _manifest(3)).text() == (
        "1 of 3 questions answered by all 2 strategies (3 of 6 tasks); "
        "the rest takes about 1.7 h at each strategy's recorded seconds a question"
    )
    # a strategy with no record yet has no pace, and no question is complete: no estimate
    three = [*timed, _rec("c", "q1", 0.0, wall_s=3600.0)]
    m3 = {"settings": {"strategies": ["a", "b", "c", "d"]}, "data": {"questions": 3}}
    assert progress(three, m3).text().endswith("(4 of 12 tasks)")  # d has none: nothing complete, no pace

    recs.append(_rec("b", "q2", 1.0))
    recs += [_rec("a", "q3", 0.0), _rec("b", "q3", 1.0)]
    prog = progress(recs, _manifest(3))
    assert prog.finished and prog.text() == "complete: 3 questions × 2 strategies (6 of 6 tasks)"
    report = render(recs, _manifest(3))
    assert "left out" not in report and "| a | 3 | 0.333" in report


def test_a_gap_question_is_complete_once_every_hop_is_answered() -> None:
    recs = [_rec(s, "q1", 1.0) for s in "ab"] + [_rec("a", "q1", 1.0, hop=h) for h in (1, 2)]
    recs.append(_rec("b", "q1", 1.0, hop=1))
    m = _manifest(1, gap=True, tasks=6, hops={"q1": 2})
    assert progress(recs, m).complete == frozenset()  # b has not answered hop 2
    assert "## Compositionality gap" not in render(recs, m)
    recs.append(_rec("b", "q1", 0.0, hop=2))
    prog = progress(recs, m)
    assert prog.complete == {"q1"} and prog.text() == "complete: 1 question × 2 strategies (6 of 6 tasks)"
    report = render(recs, m)
    assert "## Compositionality gap" in report and "| a | em | 1 | 1 | 2/2 | 1 | 0 | 0.000 |" in report
    # a run directory from before the manifest listed hops: the hop records tell the count
    old = _manifest(1, gap=True)
    assert progress(recs, old).complete == {"q1"} and progress(recs[:-1], old).complete == frozenset()
    # the time still needed, at each strategy's seconds a question, hops included: 2 × 300 s (a) + 2 × 200 s (b)
    timed = [{**r, "wall_s": 100.0 if r["strategy"] == "a" else 50.0 * (1 + ("::" not in r["qid"]))} for r in recs]
    assert progress(timed, _manifest(3, gap=True, tasks=18, hops={"q1": 2})).text() == (
        "1 of 3 questions answered by all 2 strategies (6 of 18 tasks); "
        "the rest takes about 0.3 h at each strategy's recorded seconds a question"
    )
    # a gap question without any hop answered yet is in progress, not complete
    assert progress([_rec(s, "q2", 1.0) for s in "ab"], old).complete == frozenset()


def test_without_a_manifest_every_strategy_present_counts() -> None:
    recs = [_rec("a", "q1", 1.0), _rec("b", "q1", 1.0), _rec("b", "q2", 1.0)]
    prog = progress(recs, None)
    assert prog.complete == {"q1"} and prog.text() == "1 question answered by all 2 strategies (3 tasks)"


def test_the_report_says_which_commit_made_which_records() -> None:
    recs = [{**_rec("a", f"q{i}", 1.0), "commit": "aaaaaaaaaaaa"} for i in range(3)]
    recs += [{**_rec("b", "q0", 0.0), "commit": "bbbbbbbbbbbb+dirty", "cached": True}]
    recs += [{**_rec("b", "q1", 0.0), "commit": "aaaaaaaaaaaa"}, {**_rec("b", "q2", 0.0), "code": "0123456789ab"}]
    report = render(recs, _manifest(3))
    line = next(ln for ln in report.splitlines() if ln.startswith("| code |"))
    assert line == (
        "| code | records from 2 commits: `aaaaaaaaaaaa`: a 3, b 1; "
        "`bbbbbbbbbbbb+dirty`: b 1; 1 re-made from the response cache, timings kept; "
        "and 1 made before records named their commit: b 1 |"
    )
    assert "| code | records from 1 commit: `aaaaaaaaaaaa`: a 3 |" in render(recs[:3], _manifest(3))
    old = [{**_rec("a", "q0", 1.0), "code": "x"}, {**_rec("a", "q1", 1.0), "code": "y"}, _rec("b", "q0", 1.0)]
    assert "| code | 3 made before records named their commit: a 2, b 1 |" in render(old, _manifest(2))


def test_a_draft_is_paired_with_the_final_answer_of_its_own_records() -> None:
    recs = [_rec("a", f"q{i}", s) for i, s in enumerate([1.0, 1.0, 0.0])] + [_rec("b", f"q{i}", 0.0) for i in range(3)]
    recs[0]["scores"]["draft_score"] = 0.0  # the final answer fixed the draft
    recs[1]["scores"]["draft_score"] = 1.0  # both right
    # q2 of "a" was made before drafts had a short answer: not counted
    report = render(recs, _manifest(3))
    assert "## Draft and final answer" in report
    assert "| a | 2 | 3 | 0.500 | 1.000 | +0.500 [" in report
    assert "| 1 | 0 | 1 |" in report
    assert "| b |" not in report.split("## Draft and final answer")[1].split("##")[0]
    for r in recs:
        r["scores"].pop("draft_score", None)
    assert "## Draft and final answer" not in render(recs, _manifest(3))


def test_answers_of_several_parts_get_their_own_table() -> None:
    recs = [_rec("a", f"q{i}", s) for i, s in enumerate([1.0, 0.0])] + [_rec("b", f"q{i}", 0.0) for i in range(2)]
    for r, rate, recall in zip(recs, [1.0, 0.5, 0.0, 0.5], [1.0, 1.0, 0.5, None], strict=True):
        r["scores"].update(parts=r["scores"]["score"], part_rate=rate, **({"part_recall": recall} if recall else {}))
    report = render(recs, _manifest(2))
    assert "## Answer parts" in report
    assert "| a | 2 | 0.500 | 0.750 | 1.000 |" in report
    assert "| b | 2 | 0.000 | 0.250 | 0.500 |" in report
    for r in recs:
        for k in ("parts", "part_rate", "part_recall"):
            r["scores"].pop(k, None)
    assert "## Answer parts" not in render(recs, _manifest(2))


def test_policy_questions_get_their_conclusions_and_what_decided_them() -> None:
    recs = [_rec("a", f"q{i}", s) for i, s in enumerate([1.0, 0.0, 1.0])] + [_rec("b", f"q{i}", 0.0) for i in range(3)]
    for r, kind in zip(recs, ["yes/no", "yes/no", "lookup"] * 2, strict=True):
        r["kind"] = kind
        r["scores"].update(conclusion=r["scores"]["score"], terms=1.0, contradiction=0.0, scope_violation=0.0)
    recs[1]["scores"]["contradiction"] = 1.0
    recs[4]["scores"].update(terms=0.0, scope_violation=1.0)
    report = render(recs, _manifest(3))
    assert "## Policy conclusions" in report
    assert "| a | 3 | 0.667 | 1.000 | 1 | 0 |" in report
    assert "| b | 3 | 0.000 | 0.667 | 0 | 1 |" in report
    # the conclusion by kind of question is the primary score's table by kind
    assert "| a | 1.000 (1) | 0.500 (2) |" in report.split("## Score by question kind")[1]
    for r in recs:
        del r["scores"]["conclusion"]
    assert "## Policy conclusions" not in render(recs, _manifest(3))
