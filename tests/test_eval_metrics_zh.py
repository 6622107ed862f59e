"""Chinese answer scoring: normalisation, character-level EM/F1, 万/亿 numerals, the per-language
choice inside ``score``, and RGB's every-part-mentioned check."""

from __future__ import annotations

import pytest

from sleuth.eval.datasets import Item
from sleuth.eval.metrics import cover_zh, em_zh, f1_zh, is_chinese, normalize_zh, part_hits, score, tokens_zh


def test_normalisation_folds_width_punctuation_and_numerals() -> None:
    assert normalize_zh("１３１万人，约合 1,310,000。") == "1310000人约合1310000"
    assert normalize_zh("3182万吨") == "31820000吨"
    assert normalize_zh("1.5亿") == "150000000"
    assert normalize_zh("2.5万亿元") == "2500000000000元"
    assert normalize_zh("《流浪地球2》！") == "流浪地球2"
    assert normalize_zh("增长8.1%。") == "增长8.1"
    # more decimals than the unit has zeros: left as written (no invented precision)
    assert normalize_zh("1.23456万") == "1.23456万"


def test_tokens_are_characters_and_latin_runs() -> None:
    assert tokens_zh("G20峰会 8.1%") == ["g20", "峰", "会", "8.1"]
    assert tokens_zh("") == []


def test_character_level_em_and_f1() -> None:
    assert em_zh("１３１万", ["1310000"]) == 1.0
    assert em_zh("巴厘岛。", ["巴厘岛"]) == 1.0
    assert em_zh("印尼巴厘岛", ["巴厘岛"]) == 0.0
    assert f1_zh("印尼巴厘岛", ["巴厘岛"]) == pytest.approx(2 * 0.6 * 1.0 / 1.6)
    assert f1_zh("北京", ["巴厘岛"]) == 0.0
    assert f1_zh("巴厘岛", ["北京", "巴厘岛"]) == 1.0
    assert cover_zh("峰会在印尼巴厘岛举行。", ["巴厘岛"]) == 1.0


def test_numbers_are_not_found_inside_longer_numbers() -> None:
    assert cover_zh("共计300天", ["30天"]) == 0.0
    assert cover_zh("增长了15.7%", ["5.7"]) == 0.0
    assert cover_zh("增长了5.7%", ["5.7"]) == 1.0
    assert cover_zh("产量为3182万吨", ["31820000吨"]) == 1.0


def test_part_hits_accept_any_variant() -> None:
    parts = [["11月15日"], ["16日"], ["巴厘岛", "Bali"]]
    assert part_hits("峰会于11月15日至16日在印尼巴厘岛举行", parts) == [True, True, True]
    assert part_hits("The summit met in Bali on 11月15日", parts) == [True, False, True]
    assert part_hits("", parts) == [False, False, False]


def test_score_picks_the_metric_by_answer_language() -> None:
    zh = Item(id="z", question="问", answers=["巴厘岛"])
    s = score(zh, {"answer": "印尼巴厘岛"})
    assert s["em"] == 0.0 and s["f1"] == pytest.approx(0.75) and s["cover_em"] == 1.0
    assert is_chinese("巴厘岛") and not is_chinese("Bali")
    en = Item(id="e", question="q", answers=["Bali"])
    s = score(en, {"answer": "in Bali, Indonesia"})
    assert s["em"] == 0.0 and s["cover_em"] == 1.0 and s["f1"] == pytest.approx(0.5)


def test_score_all_parts_rate_and_part_recall() -> None:
    item = Item(
        id="r",
        question="2022年G20峰会的时间和地点？",
        answers=["11月15日、16日、巴厘岛"],
        metadata={"answer_parts": [["11月15日"], ["16日"], ["巴厘岛"]], "part_ids": [["rgb-a"], ["rgb-a"], ["rgb-b"]]},
    )
    seen = {"trace": [{"kind": "search", "data": {"passages": [{"id": "rgb-a#0", "doc_id": "rgb-a"}]}}]}
    s = score(item, {"answer": "2022年G20峰会于11月15日至16日在印度尼西亚巴厘岛举行。", **seen})
    assert s["primary"] == "parts" and s["score"] == 1.0 and s["part_rate"] == 1.0
    assert s["part_recall"] == pytest.approx(2 / 3)
    s = score(item, {"answer": "11月15日在巴厘岛"})
    assert s["parts"] == 0.0 and s["part_rate"] == pytest.approx(2 / 3) and s["part_recall"] == 0.0
