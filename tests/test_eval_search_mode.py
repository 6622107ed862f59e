"""How ``sleuth eval`` searches its open-setting pool: hybrid by default (chosen by measured
recall, docs/knowledge.md "Retrieval quality"), ``--search-mode`` to choose, the mode recorded in
run.json and shown in report.md, a resumed run keeping the mode it was started with.

Real indexes (BM25 and the real all-MiniLM-L6-v2 embedder) over the 40 paragraphs of four
HotpotQA tuning questions; the strategy is a real :class:`Strategy` that searches without an LLM.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sleuth.eval.corpus import DEFAULT_SEARCH_MODE, search_mode
from sleuth.eval.manifest import config_from_manifest
from sleuth.eval.runner import EvalConfig, EvalError, run_eval
from sleuth.eval.store import ManifestMismatch, read_records
from sleuth.search import Index
from sleuth.strategies.base import RunState, Strategy

MOD = Path(__file__).stem


class Searcher(Strategy):
    """Searches the question once and answers with the first title."""

    name = "searcher"
    needs_retriever = True

    def solve(self, question: str, st: RunState) -> None:
        hits = self.retrieve(st, question)
        st.cite(hits[:2])
        st.result.answer = st.result.short_answer = hits[0].title if hits else "unknown"


@pytest.fixture()
def hotpot4(tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SLEUTH_EVAL_CACHE", str(tmp_path / "cache"))
    lines = (data_dir / "hotpotqa/train.jsonl").read_text(encoding="utf-8").splitlines()[:4]
    path = tmp_path / "hotpot4.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _cfg(data: Path, out: Path, **kw) -> EvalConfig:
    base = dict(data=str(data), out=str(out), setting="open", strategies=[f"{MOD}:Searcher"], k=3, seed=0)
    return EvalConfig(**(base | kw))


def _searched(out: Path) -> dict[str, list[str]]:
    """The passage ids each question's search returned, from the records' traces."""
    got = {}
    for rec in read_records(out):
        ev = next(e for e in rec["result"]["trace"] if e["kind"] == "search")
        got[rec["qid"]] = [p["id"] for p in ev["data"]["passages"]]
    return got


def _index_fact(out: Path) -> str:
    """The report's run fact on the index."""
    line = next(ln for ln in (out / "report.md").read_text(encoding="utf-8").splitlines() if ln.startswith("| index |"))
    return line.removeprefix("| index |").removesuffix("|").strip().replace(out.parent.name, "tmp")


def _questions(data: Path) -> dict[str, str]:
    from sleuth.eval.datasets import load_dataset

    return {it.id: it.question for it in load_dataset(data).items}


def test_the_open_setting_searches_hybrid_by_default_and_says_so(hotpot4: Path, tmp_path: Path) -> None:
    assert DEFAULT_SEARCH_MODE == "hybrid"
    out = tmp_path / "run"
    run_eval(_cfg(hotpot4, out), progress=False)
    manifest = json.loads((out / "run.json").read_text(encoding="utf-8"))
    assert manifest["settings"]["index"]["mode"] == "hybrid"  # what a resume must match
    assert manifest["index"]["mode"] == "hybrid" and manifest["index"]["passages"] == 40
    idx = Index.open(manifest["index"]["spec"])
    assert idx.has_vectors and idx.manifest["embedder"] == "all-MiniLM-L6-v2"
    # every search of the run is the index's hybrid ranking (and not its BM25 one, for some question)
    qs = _questions(hotpot4)
    searched = _searched(out)
    hybrid = {q: [p.id for p in idx.search(qs[q], 3, mode="hybrid")] for q in searched}
    lexical = {q: [p.id for p in idx.search(qs[q], 3, mode="lexical")] for q in searched}
    assert searched == hybrid and searched != lexical
    assert _index_fact(out) == "all 40 paragraphs of tmp/hotpot4.jsonl pooled; hybrid search"


def test_a_lexical_run_is_recorded_as_before_and_resumes_lexically(hotpot4: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    run_eval(_cfg(hotpot4, out, search_mode="lexical", limit=2), progress=False)
    manifest = json.loads((out / "run.json").read_text(encoding="utf-8"))
    # described as runs were before the mode could be chosen, so those resume unchanged
    assert set(manifest["settings"]["index"]) == {"setting", "source", "key"}
    assert manifest["index"]["mode"] == "lexical"
    assert _index_fact(out).endswith("pooled; lexical search")  # new runs name their mode, lexical too
    idx = Index.open(manifest["index"]["spec"])
    assert not idx.has_vectors  # a lexical run embeds nothing
    qs = _questions(hotpot4)
    first = _searched(out)
    assert first == {q: [p.id for p in idx.search(qs[q], 3)] for q in first}
    # the same command without --search-mode continues the run in its own mode: nothing is run again
    summary = run_eval(_cfg(hotpot4, out, limit=2), progress=False)
    assert summary.skipped == 2 and summary.ran == 0
    # a run of the bigger sample in the same directory would mismatch anyway; another mode is refused by name
    with pytest.raises(ManifestMismatch, match="mode"):
        run_eval(_cfg(hotpot4, out, limit=2, search_mode="dense"), progress=False)
    assert config_from_manifest(manifest, out).search_mode == "lexical"


def test_a_pool_too_big_to_embed_in_a_sitting_is_searched_lexically_unless_asked(
    hotpot4: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sleuth.eval import corpus
    from sleuth.eval.datasets import load_dataset

    ds = load_dataset(hotpot4)
    chars = sum(len(p.title) + len(p.text) for p in corpus.pooled_paragraphs(ds))
    assert corpus.plan_retrieval(ds, "open").mode == "hybrid"
    assert corpus.default_mode(corpus.DENSE_DEFAULT_MAX_CHARS) == "hybrid"
    assert corpus.default_mode(corpus.DENSE_DEFAULT_MAX_CHARS + 1) == "lexical"
    monkeypatch.setattr(corpus, "DENSE_DEFAULT_MAX_CHARS", chars - 1)
    assert corpus.plan_retrieval(ds, "open").mode == "lexical"
    assert corpus.plan_retrieval(ds, "open", mode="hybrid").mode == "hybrid"  # asked for: embedded anyway


def test_the_recorded_mode_is_what_verify_and_resume_read() -> None:
    pooled = {"setting": "open", "index": {"setting": "open", "source": "all 40 paragraphs", "key": "p-1"}}
    assert search_mode(None, pooled) == "lexical"  # recorded before the mode existed: BM25
    assert search_mode(None, {**pooled, "index": {**pooled["index"], "mode": "dense"}}) == "dense"
    assert search_mode("hybrid", pooled) == "hybrid"  # given wins
    user = {"setting": "open", "index": {"setting": "open", "source": "index /x", "key": "k"}}
    assert search_mode(None, user) is None  # a user's index: its own default, as then
    assert search_mode(None, None) is None and search_mode(None, {"setting": "distractor"}) is None
    manifest = {"settings": {**pooled, "strategies": ["rag"], "index": {**pooled["index"], "mode": "hybrid"}}}
    assert config_from_manifest(manifest, "o").search_mode == "hybrid"


def test_modes_that_cannot_be_served_are_refused_before_anything_runs(
    hotpot4: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(EvalError, match="--search-mode must be one of lexical, dense, hybrid"):
        run_eval(_cfg(hotpot4, tmp_path / "a", search_mode="bm25"), progress=False)
    with pytest.raises(EvalError, match="open setting only"):
        run_eval(_cfg(hotpot4, tmp_path / "b", setting="distractor", search_mode="dense"), progress=False)
    # a user's index without vectors cannot search densely
    lex = Index.build([_pool_file(hotpot4, tmp_path)], tmp_path / "lex-index")
    with pytest.raises(EvalError, match="no vectors"):
        run_eval(_cfg(hotpot4, tmp_path / "c", index=str(lex.root), search_mode="hybrid"), progress=False)
    assert not read_records(tmp_path / "c")
    # and its own default (lexical here) is used when no mode is given
    run_eval(_cfg(hotpot4, tmp_path / "d", index=str(lex.root), limit=1), progress=False)
    assert json.loads((tmp_path / "d" / "run.json").read_text(encoding="utf-8"))["index"]["mode"] == "index default"
    from sleuth.cli import main

    with pytest.raises(SystemExit) as e:
        main(["eval", "--data", str(hotpot4), "--out", str(tmp_path / "e"), "--search-mode", "bm25", "--no-progress"])
    assert e.value.code == 2 and "--search-mode must be one of" in capsys.readouterr().err


def _pool_file(data: Path, tmp_path: Path) -> Path:
    from sleuth.eval.corpus import corpus_records, pooled_paragraphs
    from sleuth.eval.datasets import load_dataset

    path = tmp_path / "pool.jsonl"
    records = corpus_records(pooled_paragraphs(load_dataset(data)))
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path
