"""Citation precision and recall against gold supporting passages, on hand-made records and
on records scored from real HotpotQA and MuSiQue items; the report's Citations section."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sleuth.eval.datasets import Item, load_dataset
from sleuth.eval.metrics import citation_precision, cited_documents, score
from sleuth.eval.report import render
from sleuth.eval.summary import citation_rows


def _p(doc: str, chunk: int = 0, title: str | None = None) -> dict[str, Any]:
    return {"id": f"{doc}#{chunk}", "doc_id": doc, "title": title if title is not None else doc, "text": "…"}


def test_two_chunks_of_one_document_are_one_citation() -> None:
    docs = cited_documents([_p("A", 0), _p("A", 1), _p("B"), {"id": "C#3"}])
    assert len(docs) == 3
    assert {"A", "A#0", "A#1"} in docs and {"C", "C#3"} in docs


def test_precision_defined_and_undefined() -> None:
    gold = ["A", "B"]
    assert citation_precision(gold, [_p("A"), _p("X")]) == 0.5
    assert citation_precision(gold, [_p("A", 0), _p("A", 1)]) == 1.0  # one document, gold
    assert citation_precision(gold, [_p("X"), _p("Y"), _p("Z")]) == 0.0  # cites, none gold: 0
    assert citation_precision(gold, []) is None  # cites nothing: undefined, not 0
    assert citation_precision([], [_p("A")]) is None  # no gold: undefined


def test_score_hotpotqa_titles_are_the_pooled_passage_ids(data_dir: Path) -> None:
    """HotpotQA: each supporting title is the id of that title's paragraph in the pooled corpus."""
    item = load_dataset(data_dir / "hotpotqa/train.jsonl", "hotpotqa").items[0]
    gold = item.gold_ids
    assert len(gold) == 2 and gold == item.gold_titles
    assert all(any(p.id == g and p.title == g for p in item.paragraphs) for g in gold)
    other = next(p.id for p in item.paragraphs if p.id not in gold)
    cites = [_p(gold[0], 0), _p(gold[0], 1), _p(other)]
    s = score(item, {"answer": "x", "citations": cites})
    assert s["cite_precision"] == 0.5 and s["cited_recall_id"] == 0.5
    s = score(item, {"answer": "x", "citations": [_p(g) for g in gold]})
    assert s["cite_precision"] == 1.0 and s["cited_recall_id"] == 1.0
    s = score(item, {"answer": "x"})
    assert s["cite_precision"] is None and s["cited_recall_id"] == 0.0


def test_score_musique_is_supporting_by_paragraph_id(data_dir: Path) -> None:
    """MuSiQue: the gold are the is_supporting paragraphs, matched by their id (a title may repeat)."""
    item = load_dataset(data_dir / "musique/train.json", "musique").items[0]
    sup = [p for p in item.paragraphs if p.metadata["is_supporting"]]
    assert sup and item.gold_ids == [p.id for p in sup]
    non = [p for p in item.paragraphs if not p.metadata["is_supporting"]]
    cites = [_p(sup[0].id, title=sup[0].title), _p(non[0].id, title=non[0].title), _p(non[1].id)]
    s = score(item, {"answer": "x", "citations": cites})
    assert s["cite_precision"] == pytest.approx(1 / 3)
    assert s["cited_recall_id"] == pytest.approx(1 / len(sup))
    # a passage with the gold title but another paragraph's id is not the gold passage
    same_title = {"id": "elsewhere#0", "doc_id": "elsewhere", "title": sup[0].title}
    assert score(item, {"answer": "x", "citations": [same_title]})["cite_precision"] == 0.0


def test_no_gold_passages_no_citation_scores() -> None:
    s = score(Item("q", "Who?", ["Bob"]), {"answer": "Bob", "citations": [_p("A")]})
    assert "cite_precision" not in s and "cited_recall_id" not in s


def _rec(strategy: str, qid: str, cites: list[dict[str, Any]], item: Item) -> dict[str, Any]:
    result = {"answer": "x", "citations": cites}
    return {"strategy": strategy, "qid": qid, "status": "ok", "reason": "finished", "scores": score(item, result)}


def test_citation_rows_and_report_section() -> None:
    item = Item("q", "Who?", ["Bob"], gold_ids=["A", "B"])
    records = [
        _rec("rag", "1", [_p("A"), _p("X")], item),  # precision 0.5, recall 0.5
        _rec("rag", "2", [], item),  # cites nothing: no precision, recall 0
        _rec("direct", "1", [], item),
        _rec("direct", "2", [], item),
    ]
    rows = {r["strategy"]: r for r in citation_rows(records, ["direct", "rag"])}
    assert (rows["rag"]["n"], rows["rag"]["citing"]) == (2, 1)
    assert rows["rag"]["precision"] == 0.5 and rows["rag"]["recall"] == 0.25 and rows["rag"]["recall_citing"] == 0.5
    assert rows["direct"]["citing"] == 0 and rows["direct"]["recall"] == 0.0
    text = render(records, {"settings": {"strategies": ["direct", "rag"]}})
    assert "## Citations" in text
    assert "| rag | 2 | 1 | 0.500 | 0.250 | 0.500 |" in text and "| direct | 2 | 0 | – | 0.000 | – |" in text
    # data without gold passages: no section
    plain = [{**r, "scores": score(Item("q", "Who?", ["Bob"]), {"answer": "x"})} for r in records]
    assert citation_rows(plain) == [] and "## Citations" not in render(plain, None)


def test_published_reports_show_the_citations() -> None:
    """The committed HotpotQA and MuSiQue runs were rescored: every record with gold carries both scores."""
    from sleuth.eval.store import read_records

    root = Path(__file__).resolve().parents[1] / "docs/results"
    for run in ("hotpotqa-open", "musique-open"):
        recs = read_records(root / run)
        assert all("cite_precision" in r["scores"] and "cited_recall_id" in r["scores"] for r in recs)
        assert "## Citations" in (root / run / "report.md").read_text(encoding="utf-8")
        manifest = json.loads((root / run / "run.json").read_text(encoding="utf-8"))
        assert manifest["settings"]["format"] in ("hotpotqa", "musique")
