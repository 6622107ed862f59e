"""``sleuth eval tune``: the tuning slice (fixed by its seed, disjoint from the published
questions), the budget estimate, and one end-to-end run on a fake OpenAI-compatible server."""

from __future__ import annotations

import gzip
import json
import math
import re
from pathlib import Path

import pytest

from sleuth.eval.datasets import load_dataset
from sleuth.eval.store import read_records
from sleuth.eval.tune import (
    SOURCES,
    Published,
    TuneError,
    TuneSource,
    build_slice,
    default_published,
    estimate,
    measured_pace,
)
from sleuth.llm.models import file_sha256

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "docs" / "results"


def test_the_slice_is_fixed_by_its_seed_and_never_holds_a_published_question(data_dir: Path) -> None:
    published = Published.read(PUBLISHED)
    one = build_slice(5, 0, data_root=data_dir, published=published)
    again = build_slice(5, 0, data_root=data_dir, published=published)
    other = build_slice(5, 1, data_root=data_dir, published=published)
    assert [(e.source.name, e.questions) for e in one.entries] == [(e.source.name, e.questions) for e in again.entries]
    assert [e.questions for e in one.entries] != [e.questions for e in other.entries]
    names = {e.source.name for e in one.entries}
    assert {"hotpotqa", "strategyqa", "timeqa"} <= names and all(len(e.questions) == 5 for e in one.entries)
    # never HotpotQA's test file, by path or by question text
    assert all(not e.path.as_posix().endswith("hotpotqa/test.jsonl") for e in one.entries)
    test_questions = {it.question for it in load_dataset(data_dir / "hotpotqa/test.jsonl", "hotpotqa").items}
    asked = {it.question for e in one.entries for it in e.dataset.items}
    assert not asked & test_questions
    # MuSiQue's 100 questions are all in the published comparison: skipped, and said why
    skipped = dict(one.skipped)
    assert "musique" not in names and re.search(r"published run musique-(?:open|hybrid)$", skipped["musique"])
    assert all(not published.overlap(e.dataset)[1] for e in one.entries)
    assert "rgb_zh" in names or "rgb_zh" in skipped


def test_the_published_test_file_is_refused(data_dir: Path) -> None:
    with pytest.raises(TuneError, match="never tuned on"):
        build_slice(
            2,
            0,
            data_root=data_dir,
            published=Published.read(PUBLISHED),
            sources=[TuneSource("test", "hotpotqa/test.jsonl", "hotpotqa")],
        )
    assert all("test" not in s.path for s in SOURCES) and default_published() == PUBLISHED


def test_budget_estimate_from_the_published_pace() -> None:
    pace = measured_pace(PUBLISHED)
    assert {"rag", "self-ask", "search-o1"} <= set(pace) and 15 < pace["rag"] < 40
    est = estimate(["rag", "self-ask", "search-o1"], pace, 4)
    per_round = (pace["rag"] + pace["self-ask"] + pace["search-o1"]) * 4
    assert est.seconds_per_round == pytest.approx(per_round)
    assert est.questions_for(3600) == math.floor(3600 / per_round) >= 1
    assert "about" in est.text(est.questions_for(3600), 3600) and "budget 60 min" in est.text(1, 3600)
    with pytest.raises(TuneError, match="fits no question"):
        est.questions_for(60)
    unknown = estimate(["rag", "my-new"], pace, 1)
    assert unknown.guessed == ("my-new",) and unknown.per_question["my-new"] == max(pace.values())
    with pytest.raises(TuneError, match="no records"):
        estimate(["rag"], {}, 1)


def _tiny_data(data_dir: Path, root: Path, published: Path) -> None:
    """A data folder with 6 HotpotQA train questions and 3 MuSiQue ones, the latter all published."""
    (root / "hotpotqa").mkdir(parents=True)
    lines = (data_dir / "hotpotqa/train.jsonl").read_text(encoding="utf-8").splitlines()[:6]
    (root / "hotpotqa/train.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (root / "musique").mkdir()
    mus = json.loads((data_dir / "musique/train.json").read_text(encoding="utf-8"))[:3]
    (root / "musique/train.json").write_text(json.dumps(mus), encoding="utf-8")
    run = published / "musique-open"
    run.mkdir(parents=True)
    manifest = {
        "data": {"sha256": file_sha256(root / "musique/train.json"), "question_ids": [m["id"] for m in mus]},
        "settings": {"strategies": ["direct", "rag"]},
    }
    (run / "run.json").write_text(json.dumps(manifest), encoding="utf-8")
    recs = [{"strategy": s, "qid": "q", "scores": {"seconds": sec}} for s, sec in (("direct", 2.0), ("rag", 6.0))]
    with gzip.open(run / "results.jsonl.gz", "wt", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in recs)


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    from sleuth.cli import main

    try:
        main(argv)
        code = 0
    except SystemExit as e:
        code = int(e.code or 0)
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_tune_end_to_end_on_a_fake_server(
    tmp_path: Path, data_dir: Path, fake_server, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    monkeypatch.setenv("SLEUTH_CACHE_DIR", str(tmp_path / "cache"))
    root, published, out = tmp_path / "data", tmp_path / "published", tmp_path / "tune"
    _tiny_data(data_dir, root, published)
    argv = ["eval", "tune", "--strategies", "direct", "--budget", "1m", "--out", str(out)]
    argv += ["--data-root", str(root), "--published", str(published), "--no-progress"]
    argv += ["--model", "fake-model", "--base-url", fake_server.base_url]
    code, text, err = _cli(argv, capsys)
    assert code == 0, err
    # budget 1 min at 2 + 6 s per question over one usable dataset: 7 questions asked, 6 in the file
    assert "estimate: 7 questions × 1 dataset;" in text and "rag 6 s, direct 2 s" in text
    assert "skipped musique: all 3 of its questions (and their hops) are in the published run musique-open" in text
    assert "skipped strategyqa:" in text and "skipped timeqa:" in text and "skipped rgb_zh:" in text
    recs = read_records(out / "hotpotqa")
    assert len(recs) == 12 and {r["strategy"] for r in recs} == {"rag", "direct"}
    assert re.search(r"^hotpotqa +direct +6 +[+-]\d\.\d{3} \[", text, re.M) and "overall" not in text
    assert re.search(r"^mean primary score \(hotpotqa\): rag \d\.\d{3} \(n=6\), direct \d\.\d{3} \(n=6\)$", text, re.M)
    assert re.search(
        r"^citations \(hotpotqa;.*: rag \d\.\d{3} / \d\.\d{3} \(6 of 6 cite\), direct – / 0\.000 \(0 of 6", text, re.M
    )
    assert (out / "hotpotqa" / "report.md").is_file()
    requests = fake_server.stats.requests
    # the same command again: every task is made again, each prompt answered by the response cache (no
    # change, so no request reaches the model), and the same comparison is printed
    code, again, err = _cli(argv, capsys)
    assert code == 0, err
    assert fake_server.stats.requests == requests
    assert all(r["cached"] for r in read_records(out / "hotpotqa") if r["strategy"] == "rag")
    assert again.split("paired differences")[1] == text.split("paired differences")[1]
    # an unknown strategy or a bad budget is one sentence, before anything is loaded
    code, _, err = _cli([*argv[:3], "no-such-strategy", *argv[4:]], capsys)
    assert code != 0 and "no-such-strategy" in err and "Traceback" not in err
    code, _, err = _cli(["eval", "tune", "--strategies", "direct", "--budget", "soon"], capsys)
    assert code != 0 and "--budget 'soon'" in err
