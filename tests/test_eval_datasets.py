"""Dataset loaders on the real files in ../shared/data, format detection, bad input."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from sleuth.eval.datasets import MC, OPEN, YESNO, DatasetError, load_dataset
from sleuth.search.base import Filters


def test_hotpotqa(data_dir: Path) -> None:
    ds = load_dataset(data_dir / "hotpotqa/test.jsonl")
    assert ds.format == "hotpotqa" and len(ds) == 500
    it = ds.items[0]
    assert it.id == "5a7d5c175542991319bc93b1"
    assert it.answers == ["Denise Levertov"] and it.type == OPEN
    assert it.gold_titles == ["Harvey Pekar", "Denise Levertov"]
    assert len(it.paragraphs) == 10 and {p.title for p in it.paragraphs} >= set(it.gold_titles)
    assert all(p.text for p in it.paragraphs)
    # yes/no comparison questions stay open questions: the prompt must not reveal the answer's kind
    yes_no = [x for x in ds.items if x.answers[0] in ("yes", "no")]
    assert yes_no and all(x.type == OPEN and x.prompt() == x.question for x in yes_no)
    assert len(load_dataset(data_dir / "hotpotqa/train.jsonl")) == 300


def test_musique_decomposition_and_aliases(data_dir: Path) -> None:
    ds = load_dataset(data_dir / "musique/train.json")
    assert ds.format == "musique" and len(ds) == 100
    it = ds.items[0]
    assert it.id == "2hop__150763_14904"
    assert it.answers == ["G. Stanley Hall", "Stanley Hall"]
    assert [h.answer for h in it.decomposition] == ["American Psychological Association", "G. Stanley Hall"]
    assert it.decomposition[1].question == "Who was the first president of #1 ?"
    assert len(it.paragraphs) == 20 and len(it.gold_ids) == 2
    # each hop points at its supporting paragraph, which is one of the gold ones
    assert [h.support_id for h in it.decomposition] == it.gold_ids
    assert it.gold_ids[0].startswith("Journal of Psychotherapy Integration~")
    assert {len(x.decomposition) for x in ds.items} == {2, 3, 4}


def test_timeqa_gzip(data_dir: Path) -> None:
    ds = load_dataset(data_dir / "timeqa/train_hard.json.gz")
    assert ds.format == "timeqa" and len(ds) == 1171
    it = ds.items[0]
    assert it.question.startswith("Who owned the Newton D. Baker House")
    assert it.answers == ["George Peter"]
    assert it.gold_titles == ["Newton D . Baker House"] and len(it.paragraphs) > 5
    unanswerable = [x for x in ds.items if not x.answerable]
    assert unanswerable and all(x.answers == [] for x in unanswerable)


def test_mmlu_csv(data_dir: Path) -> None:
    ds = load_dataset(data_dir / "mmlu/college_physics_dev.csv")
    assert ds.format == "mmlu" and len(ds) == 5
    it = ds.items[0]
    assert it.type == MC and it.answers == ["A"] and it.choices == ["4", "5", "6", "20"]
    assert "A. 4" in it.prompt() and "D. 20" in it.prompt()
    assert it.metadata["subject"] == "college_physics"
    for f in sorted((data_dir / "mmlu").glob("*.csv")):
        assert all(x.answers[0] in "ABCD" and len(x.choices) == 4 for x in load_dataset(f).items)


def test_strategyqa(data_dir: Path) -> None:
    ds = load_dataset(data_dir / "strategyqa/train.json")
    assert ds.format == "strategyqa" and len(ds) == 2290
    it = ds.items[0]
    assert it.type == YESNO and it.answers == ["yes"]
    assert len(it.paragraphs) == 3 and "Genghis Khan had sixteen children." in [p.text for p in it.paragraphs]
    assert it.decomposition[2].question == "Is #2 greater than #1?"
    assert {x.answers[0] for x in ds.items} == {"yes", "no"}


def test_flashrag_with_companion_corpus(data_dir: Path) -> None:
    ds = load_dataset(data_dir / "quickstart/nq_questions.jsonl")
    assert ds.format == "flashrag" and len(ds) >= 16
    assert ds.items[0].answers == ["Wilhelm Conrad Röntgen"]
    assert ds.corpus_path == data_dir / "quickstart/wiki_passages.jsonl"


def test_policy_zh_scope_and_checks(data_dir: Path) -> None:
    ds = load_dataset(data_dir / "policy_zh/questions.jsonl")
    assert ds.format == "policy_zh" and len(ds) == 8
    assert ds.corpus_path == data_dir / "policy_zh/corpus.jsonl"
    by = {x.id: x for x in ds.items}
    assert by["q1"].filters == Filters.make(equals={"version": "2025", "region": "境内"}, acl=["all"])
    assert by["q1"].must_mention == ["15"] and by["q1"].gold_ids == ["trv-2025-02", "trv-2025-01"]
    assert by["q4"].filters is not None and dict(by["q4"].filters.equals) == {"version": ("2025",)}
    assert by["q5"].must_not_mention == ["5%"] and not by["q5"].answerable
    assert by["q6"].filters is not None and by["q6"].filters.acl == frozenset({"all", "finance"})


def test_detect_format_on_every_shared_file(data_dir: Path) -> None:
    expect = {
        "hotpotqa/test.jsonl": "hotpotqa",
        "musique/train.json": "musique",
        "timeqa/train_hard.json.gz": "timeqa",
        "mmlu/high_school_chemistry_val.csv": "mmlu",
        "strategyqa/train.json": "strategyqa",
        "quickstart/nq_questions.jsonl": "flashrag",
        "policy_zh/questions.jsonl": "policy_zh",
    }
    for rel, fmt in expect.items():
        assert load_dataset(data_dir / rel).format == fmt, rel


def test_any_file_by_path_and_format(tmp_path: Path, data_dir: Path) -> None:
    # a HotpotQA-format file that is not one of the bundled ones, compressed differently
    lines = (data_dir / "hotpotqa/train.jsonl").read_text(encoding="utf-8").splitlines()[:3]
    p = tmp_path / "mine.data"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    ds = load_dataset(p, "hotpotqa")
    assert len(ds) == 3 and ds.items[0].answers == ["October 1922"]
    # TimeQA as plain (not gzipped) JSONL
    with gzip.open(data_dir / "timeqa/train_hard.json.gz", "rt", encoding="utf-8") as f:
        raw = [next(f).rstrip("\n") for _ in range(2)]
    t = tmp_path / "t.jsonl"
    t.write_text("\n".join(raw) + "\n", encoding="utf-8")
    assert load_dataset(t).format == "timeqa"


def test_generic_jsonl(tmp_path: Path) -> None:
    p = tmp_path / "g.jsonl"
    recs = [
        {
            "id": "a",
            "question": "Capital of France?",
            "answers": ["Paris"],
            "paragraphs": [{"title": "France", "text": "Paris is the capital of France."}],
            "gold_titles": ["France"],
        },
        {"id": "b", "question": "Pick one", "answers": ["B"], "type": "mc", "choices": ["x", "y", "z", "w"]},
        {"id": "c", "question": "Is ice cold?", "answers": "yes", "type": "yesno", "filters": ["acl=all"]},
    ]
    p.write_text("\n".join(json.dumps(r) for r in recs) + "\n", encoding="utf-8")
    ds = load_dataset(p)
    assert ds.format == "jsonl"
    a, b, c = ds.items
    assert a.paragraphs[0].title == "France" and a.gold_titles == ["France"]
    assert b.type == MC and "B. y" in b.prompt()
    assert c.answers == ["yes"] and c.filters == Filters.make(acl=["all"])


def test_sample_is_fixed_by_seed(data_dir: Path) -> None:
    ds = load_dataset(data_dir / "hotpotqa/test.jsonl")
    a = [x.id for x in ds.sample(20, 7).items]
    b = [x.id for x in ds.sample(20, 7).items]
    c = [x.id for x in ds.sample(20, 8).items]
    assert a == b and a != c and len(set(a)) == 20
    order = [x.id for x in ds.items]
    assert a == sorted(a, key=order.index)  # file order kept
    assert [x.id for x in ds.sample(3, None).items] == order[:3]


@pytest.mark.parametrize(
    ("content", "fmt", "msg"),
    [
        ("not json\n", "hotpotqa", "not valid JSON"),
        ('{"foo": 1}\n', "hotpotqa", "lacks"),
        ("q,a,b\n", "mmlu", "row 1"),
        (
            '{"id": "x", "question": "q", "answers": []}\n{"id": "x", "question": "q2", "answers": []}\n',
            "jsonl",
            "twice",
        ),
        ("", "jsonl", "no questions"),
    ],
)
def test_bad_files_give_one_sentence(tmp_path: Path, content: str, fmt: str, msg: str) -> None:
    p = tmp_path / "bad.txt"
    p.write_text(content, encoding="utf-8")
    with pytest.raises(DatasetError, match=msg):
        load_dataset(p, fmt)


def test_unknown_format_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="does not exist"):
        load_dataset(tmp_path / "nope.jsonl")
    p = tmp_path / "x.jsonl"
    p.write_text('{"foo": 1}\n', encoding="utf-8")
    with pytest.raises(DatasetError, match="cannot tell the format"):
        load_dataset(p)
    with pytest.raises(DatasetError, match="unknown format"):
        load_dataset(p, "csv2")
