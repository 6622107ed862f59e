"""Chinese retrieval on policy_zh (written for this project): the title/section field for
Chinese queries, every question's evidence in the top 5 within its scope in lexical and in
hybrid mode (multilingual-e5-small, what ``embedder="auto"`` picks for a Chinese corpus),
English corpora keeping all-MiniLM-L6-v2, indexes from before the ``head`` field still read,
and jieba's loading chatter kept off stderr."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import tantivy

from sleuth.search import Filters, Index, SearchError
from sleuth.search.lexical import LexicalIndex, _schema
from sleuth.search.multilingual import MULTILINGUAL_EMBEDDER, choose_embedder
from sleuth.search.tokenize import tokenize

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "policy_zh"
pytestmark = pytest.mark.skipif(not DATA.is_dir(), reason="needs ../shared/data/policy_zh")


def _questions() -> list[dict]:
    return [json.loads(ln) for ln in (DATA / "questions.jsonl").read_text(encoding="utf-8").splitlines() if ln]


def _scope(q: dict) -> Filters:
    s = q["scope"]
    return Filters.make(equals={k: v for k, v in s.items() if k != "acl"}, acl=s["acl"])


@pytest.fixture(scope="module")
def lexical(tmp_path_factory: pytest.TempPathFactory) -> Index:
    return Index.build([DATA / "corpus.jsonl"], tmp_path_factory.mktemp("zh") / "ix")


def test_the_clause_that_answers_ranks_first(lexical: Index) -> None:
    hits = lexical.search("取消行程 退票费用 报销期限", 5)
    assert hits[0].doc_id == "trv-2025-02"


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
def test_every_question_finds_its_evidence_in_scope(lexical: Index, tmp_path: Path, mode: str) -> None:
    idx = lexical if mode == "lexical" else Index.build([DATA / "corpus.jsonl"], tmp_path / "ix", dense=True)
    if mode == "hybrid":
        assert idx.manifest["embedder"] == MULTILINGUAL_EMBEDDER and idx.default_mode == "hybrid"
    for q in _questions():
        got = {p.doc_id for p in idx.search(q["question"], 5, _scope(q), mode=mode)}
        assert set(q["evidence"]) <= got, (q["id"], got)


def test_auto_embedder_follows_the_corpus_language() -> None:
    assert choose_embedder(["The cat sat.", "Volcanoes erupt."], "all-MiniLM-L6-v2") == "all-MiniLM-L6-v2"
    assert choose_embedder(["差旅费用管理办法", "The cat sat."], "all-MiniLM-L6-v2") == MULTILINGUAL_EMBEDDER
    assert choose_embedder([], "all-MiniLM-L6-v2") == "all-MiniLM-L6-v2"


def test_an_index_from_before_the_head_field_still_reads(tmp_path: Path) -> None:
    path = tmp_path / "lexical"
    path.mkdir()
    old = tantivy.Index(_schema(head=False), path=str(path))
    w = old.writer(heap_size=15_000_000, num_threads=1)
    for row, text in enumerate(["退票费用 报销期限", "the refund deadline"]):
        w.add_document(tantivy.Document(body=" ".join(tokenize(text)), row=row, doc=f"d{row}", acl=["all"]))
    w.commit()
    w.wait_merging_threads()
    lex = LexicalIndex(path)
    assert not lex.has_head
    assert [r for r, _ in lex.search("退票费用", 5)] == [0]
    assert [r for r, _ in lex.search("refund deadline", 5)] == [1]


def test_jieba_says_nothing_on_stderr() -> None:
    code = "from sleuth.search.tokenize import tokenize; print(tokenize('取消行程 退票费用'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "取消" in out.stdout and out.stderr == ""


def test_an_unknown_embedder_is_refused_before_any_work(tmp_path: Path) -> None:
    with pytest.raises(SearchError, match="unknown embedder 'bogus'"):
        Index.build([DATA / "corpus.jsonl"], tmp_path / "ix", dense=True, embedder="bogus")
    assert not (tmp_path / "ix").exists()
