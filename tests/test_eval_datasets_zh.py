"""The rgb_zh loader on a small file written here (RGB's data is never shipped): parts and
variants, per-part supporting passages, pooled open-setting corpus, format detection, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sleuth.eval.corpus import plan_retrieval, pooled_paragraphs
from sleuth.eval.datasets import DatasetError, load_dataset, passage_id

RECORDS = [
    {
        "id": 0,
        "query": "2022年G20峰会的时间和地点？",
        "answer": ["11月15日", "16日", ["巴厘岛", "Bali"]],
        # one list per source document, not per part (as in some RGB records)
        "positive": [["峰会将于11月15日至16日举行。", "峰会为期两天。"], ["峰会在印尼巴厘岛举行。"]],
        "negative": ["2021年峰会在罗马举行。", "峰会为期两天。"],
    },
    {
        "id": 2,
        "query": "两部电影的票房冠军？",
        "answer": ["长津湖之水门桥", "流浪地球2"],
        "positive": [["2022年春节档冠军是长津湖之水门桥。"], ["2023年春节档冠军是流浪地球2。"]],
        "negative": ["2021年春节档冠军是你好李焕英。"],
    },
]


def _write(tmp_path: Path, records: list[dict]) -> Path:
    path = tmp_path / "int_dev.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def test_loads_parts_variants_and_supporting_passages(tmp_path: Path) -> None:
    path = _write(tmp_path, RECORDS)
    assert load_dataset(path).format == "rgb_zh"
    ds = load_dataset(path)
    assert ds.format == "rgb_zh" and [it.id for it in ds.items] == ["0", "2"]
    it = ds.items[0]
    assert it.question == "2022年G20峰会的时间和地点？"
    assert it.metadata["answer_parts"] == [["11月15日"], ["16日"], ["巴厘岛", "Bali"]]
    assert it.answers == ["11月15日、16日、巴厘岛"]
    first = passage_id("峰会将于11月15日至16日举行。")
    # parts map to the positive passages that mention them
    assert it.metadata["part_ids"] == [[first], [first], [passage_id("峰会在印尼巴厘岛举行。")]]
    # a passage listed twice (positive and negative) is one paragraph
    assert len(it.paragraphs) == 4 and len({p.id for p in it.paragraphs}) == 4
    two = ds.items[1]
    assert two.metadata["part_ids"] == [
        [passage_id("2022年春节档冠军是长津湖之水门桥。")],
        [passage_id("2023年春节档冠军是流浪地球2。")],
    ]


def test_open_setting_pools_every_question_passages(tmp_path: Path) -> None:
    ds = load_dataset(_write(tmp_path, RECORDS), "rgb_zh")
    plan = plan_retrieval(ds, None)
    assert plan.setting == "open" and plan.passages == 7
    assert len(pooled_paragraphs(ds)) == 7


def test_bad_records_get_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="lacks positive"):
        load_dataset(_write(tmp_path, [{"query": "问", "answer": ["答"]}]), "rgb_zh")
    with pytest.raises(DatasetError, match="no answer parts"):
        load_dataset(_write(tmp_path, [{"query": "问", "answer": [], "positive": []}]), "rgb_zh")
    with pytest.raises(DatasetError, match="list of passage lists"):
        load_dataset(_write(tmp_path, [{"query": "问", "answer": ["答"], "positive": "答"}]), "rgb_zh")
