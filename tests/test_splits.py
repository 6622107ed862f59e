"""Data discipline: the reporting splits' questions never appear in the code or the tests, and the
MuSiQue halves are fixed, disjoint and hold the peers comparison's questions."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import reporting_questions
from sleuth.eval.config import EvalConfig, EvalError, load_sample, validate
from sleuth.eval.datasets import load_dataset
from sleuth.eval.manifest import config_from_manifest
from sleuth.eval.splits import MUSIQUE, musique_reporting_ids, musique_split

ROOT = Path(__file__).resolve().parents[1]
SUFFIXES = {".py", ".txt", ".json", ".jsonl", ".md", ".toml", ".html", ".js", ".css"}


# a string literal continued on the next line ("… a band whose "\n    "members include …"), so that a copy
# split over implicitly concatenated literals is read whole
_CONTINUED = re.compile(r"([\"'])[ \t]*\n\s*[rbfRBF]?\1")


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().casefold()


def _sources() -> dict[str, str]:
    files = [p for d in ("src", "tests") for p in (ROOT / d).rglob("*") if p.is_file() and p.suffix in SUFFIXES]
    return {
        str(p.relative_to(ROOT)): _norm(_CONTINUED.sub("", p.read_text(encoding="utf-8", errors="ignore")))
        for p in files
    }


def test_no_reporting_question_in_code_or_tests(data_dir: Path) -> None:
    questions = reporting_questions(data_dir)
    assert len(questions) >= 500, "the reporting splits were not found"
    texts = _sources()
    found = []
    for q in questions:
        # the whole question, or its first 60 characters (a copy that was cut or edited at its end)
        probes = {_norm(q), _norm(q)[:60]}
        found += [f"{path}: {q}" for path, text in texts.items() if any(p in text for p in probes)]
    assert not found, "reporting-split questions in src/ or tests/ (use a tuning split):\n" + "\n".join(found)


def test_no_question_of_our_own_reporting_halves_in_code_or_tests() -> None:
    """The benchmarks written for the project keep a reporting half too (policy_zh, its follow-up
    conversations): their questions stay out of src/ and tests/ as well."""
    questions = [
        json.loads(line)["question"]
        for line in (ROOT / "benchmarks/data/policy_zh/reporting.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    for line in (ROOT / "benchmarks/conversations/policy_zh.jsonl").read_text(encoding="utf-8").splitlines():
        conv = json.loads(line)
        if (conv.get("split") or conv.get("metadata", {}).get("split")) == "reporting":
            questions += [m["content"] for m in conv["messages"] if m["role"] == "user"]
    assert len(questions) >= 40
    texts = _sources()
    found = [f"{path}: {q}" for q in questions for path, text in texts.items() if _norm(q) in text]
    assert not found, "reporting-half questions in src/ or tests/ (use the tuning half):\n" + "\n".join(found)


def test_musique_halves(data_dir: Path) -> None:
    ds = load_dataset(data_dir / MUSIQUE, "musique")
    tune, report = musique_split(ds, "tuning"), musique_split(ds, "reporting")
    assert len(report.items) == 50 and len(tune.items) == len(ds.items) - 50
    assert not {it.id for it in tune.items} & {it.id for it in report.items}
    # the peers comparison draws its 30 with the same seed: they are reporting questions
    assert {it.id for it in ds.sample(30, 0).items} <= musique_reporting_ids(ds)


def test_a_run_can_draw_from_one_musique_half_and_its_manifest_keeps_it(data_dir: Path) -> None:
    cfg = EvalConfig(data=str(data_dir / MUSIQUE), out="", format="musique", split="tuning", limit=5, seed=3)
    report = musique_reporting_ids(load_dataset(data_dir / MUSIQUE, "musique"))
    drawn = {it.id for it in load_sample(cfg).items}
    assert len(drawn) == 5 and not drawn & report
    assert {it.id for it in load_sample(replace(cfg, split="reporting")).items} <= report
    manifest = {"settings": {"format": "musique", "split": "tuning", "strategies": ["rag"]}}
    assert config_from_manifest(manifest, "out").split == "tuning"  # a re-run and verify draw the same half
    with pytest.raises(EvalError, match="MuSiQue only"):
        load_sample(EvalConfig(data=str(data_dir / "hotpotqa/train.jsonl"), out="", split="tuning", limit=1))
    with pytest.raises(EvalError, match="split must be one of tuning, reporting"):
        validate(replace(cfg, split="train"))
