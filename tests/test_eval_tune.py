"""``sleuth eval tune``: the tuning slice (fixed by its seed, tuning splits only), the budget estimate, and one end-to-end run on a fake OpenAI-compatible server."""

from __future__ import annotations

import gzip
import json
import math
import re
from pathlib import Path

import pytest

from conftest import reporting_questions
from sleuth.eval.config import EvalConfig, load_sample
from sleuth.eval.store import read_records
from sleuth.eval.tune import SOURCES, TuneError, TuneSource, default_published, estimate, measured_pace, slice_configs

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "docs" / "results"


def _slice(data_dir: Path, n: int, seed: int) -> dict[str, list[str]]:
    configs, _ = slice_configs(EvalConfig(data="", out="out", strategies=["rag"], seed=seed), n, data_dir)
    return {Path(c.out).name: [it.question for it in load_sample(c).items] for c in configs}


def test_the_slice_is_fixed_by_its_seed_and_holds_tuning_questions_only(data_dir: Path) -> None:
    one, again, other = _slice(data_dir, 5, 0), _slice(data_dir, 5, 0), _slice(data_dir, 5, 1)
    assert one == again and one != other
    assert {"hotpotqa", "musique", "strategyqa", "timeqa"} <= set(one) and all(len(q) == 5 for q in one.values())
    # never a reporting split's question: HotpotQA's test file, MuSiQue's reporting half
    asked = {q for qs in [*one.values(), *other.values()] for q in qs}
    assert not asked & set(reporting_questions(data_dir))


def test_a_reporting_split_is_refused(data_dir: Path) -> None:
    base = EvalConfig(data="", out="out", strategies=["rag"])
    for src in (
        TuneSource("test", "hotpotqa/test.jsonl", "hotpotqa"),
        TuneSource("m", "musique/train.json", "musique"),
    ):
        with pytest.raises(TuneError, match="never tuned on"):
            slice_configs(base, 2, data_dir, [src])
    assert all("test" not in s.path for s in SOURCES) and default_published() == PUBLISHED


def test_budget_estimate_from_the_published_pace() -> None:
    pace = measured_pace(PUBLISHED)
    assert {"rag", "self-ask", "search-o1"} <= set(pace) and 15 < pace["rag"] < 40
    per_round = (pace["rag"] + pace["self-ask"] + pace["search-o1"]) * 4
    n, text = estimate(["rag", "self-ask", "search-o1"], pace, 4, budget_s=3600)
    assert n == math.floor(3600 / per_round) >= 1
    assert f"about {per_round * n / 60:.0f} min" in text and "budget 60 min" in text
    n, text = estimate(["rag"], pace, 1, budget_s=3600, per_dataset=3)
    assert n == 3 and "budget" not in text
    with pytest.raises(TuneError, match="fits no question"):
        estimate(["rag", "self-ask", "search-o1"], pace, 4, budget_s=60)
    _, text = estimate(["rag", "my-new"], pace, 1, per_dataset=1)
    assert f"my-new {max(pace.values()):.0f} s (no published pace: the slowest assumed)" in text
    with pytest.raises(TuneError, match="no records"):
        estimate(["rag"], {}, 1, per_dataset=1)


def _tiny_data(data_dir: Path, root: Path, published: Path) -> None:
    """A data folder with 6 HotpotQA train questions and 3 MuSiQue ones (all in its reporting half),
    and one published run whose records give the pace."""
    (root / "hotpotqa").mkdir(parents=True)
    lines = (data_dir / "hotpotqa/train.jsonl").read_text(encoding="utf-8").splitlines()[:6]
    (root / "hotpotqa/train.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (root / "musique").mkdir()
    mus = json.loads((data_dir / "musique/train.json").read_text(encoding="utf-8"))[:3]
    (root / "musique/train.json").write_text(json.dumps(mus), encoding="utf-8")
    run = published / "musique-open"
    run.mkdir(parents=True)
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
    assert "skipped musique: it holds no tuning question" in text
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
