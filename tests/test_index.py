"""The embedded index on disk: build, open, search, add, stats, atomic replacement,
kill -9 during a build, and the CLI on every corpus in ../shared/data."""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from sleuth.cli import main as cli_main
from sleuth.search import EmptyBuild, Filters, Index, IndexError_, IndexNotFound, open_retriever
from sleuth.search.base import Retriever

ROOT = Path(__file__).resolve().parents[1]


def _jsonl(path: Path, recs: list[dict]) -> Path:
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in recs) + "\n", encoding="utf-8")
    return path


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = 0
    try:
        cli_main(list(args))
    except SystemExit as e:
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_build_open_search_provenance(tmp_path: Path, data_dir: Path) -> None:
    idx = Index.build([data_dir / "hotpotqa/test.jsonl"], tmp_path / "hp")
    assert isinstance(idx, Retriever)
    assert idx.manifest["passages"] == idx.count() > 4900
    hits = idx.search("Harvey Pekar American Splendor comic", k=5)
    assert len(hits) == 5 and "Harvey Pekar" in {p.title for p in hits}
    assert [p.score for p in hits] == sorted((p.score for p in hits), reverse=True)
    p = hits[0]
    assert p.id.startswith(p.doc_id + "#") and p.source.endswith("test.jsonl") and p.acl == ["all"]
    again = Index.open(tmp_path / "hp")
    assert [q.id for q in again.search("Harvey Pekar American Splendor comic", k=5)] == [q.id for q in hits]
    batch = again.search_batch(["Denise Levertov poet", "Harvey Pekar"], k=3)
    assert batch[0][0].title == "Denise Levertov" and len(batch[1]) == 3
    assert again.search("the of and", k=5) == [], "a query of stopwords only finds nothing"
    st = again.stats()
    assert st["passages"] == idx.manifest["passages"] and st["dense"] is False and st["disk_bytes"] > 0
    clone = pickle.loads(pickle.dumps(again))
    assert [q.id for q in clone.search("Harvey Pekar American Splendor comic", k=5)] == [q.id for q in hits]


def test_chunk_ids_stable_across_rebuilds(tmp_path: Path, data_dir: Path) -> None:
    src = data_dir / "musique/train.json"
    a = Index.build([src], tmp_path / "a", max_chars=200)
    b = Index.build([src], tmp_path / "b", max_chars=200)
    rows_a = [(p.id, p.text) for _, p in a.store.iter_live()]
    rows_b = [(p.id, p.text) for _, p in b.store.iter_live()]
    assert rows_a == rows_b and len(rows_a) > 1890, len(rows_a)
    assert len({i for i, _ in rows_a}) == len(rows_a), "chunk ids are unique"


def test_duplicates_stored_once(tmp_path: Path) -> None:
    recs = [
        {"id": "a", "title": "T", "text": "Identical passage text."},
        {"id": "b", "title": "T", "text": "Identical  passage text."},
        {"id": "c", "title": "T", "text": "Identical passage text.", "acl": "hr"},
        {"id": "a", "title": "T", "text": "A different document reusing id a."},
    ]
    idx = Index.build([_jsonl(tmp_path / "c.jsonl", recs)], tmp_path / "ix")
    assert idx.last_report is not None
    assert idx.last_report.duplicate_passages == 1
    ids = sorted(p.doc_id for _, p in idx.store.iter_live())
    assert len(ids) == 3 and ids[:2] == ["a", "a~" + ids[1][2:]] and ids[2] == "c", ids
    assert idx.manifest["duplicates_skipped"] == 1


def test_add_updates_incrementally(tmp_path: Path) -> None:
    first = _jsonl(
        tmp_path / "1.jsonl", [{"id": "a", "text": "apples grow on trees"}, {"id": "b", "text": "bananas are yellow"}]
    )
    idx = Index.build([first], tmp_path / "ix")
    gen0 = idx.gen
    reader = Index.open(tmp_path / "ix")  # e.g. a server's handle, opened before the update
    second = _jsonl(
        tmp_path / "2.jsonl",
        [
            {"id": "b", "text": "bananas are yellow"},
            {"id": "a", "text": "apricots are orange"},
            {"id": "c", "text": "cherries are red"},
        ],
    )
    rep = idx.add([second])
    assert (rep.docs_added, rep.docs_replaced, rep.docs_unchanged) == (1, 1, 1)
    assert idx.gen != gen0 and not gen0.exists(), "the old generation is gone after the swap"
    assert idx.manifest["passages"] == 3 == idx.count()
    assert idx.search("apples trees", 5) == [], "replaced text is no longer found"
    assert [p.doc_id for p in idx.search("apricots", 5)] == ["a"]
    assert [p.doc_id for p in Index.open(tmp_path / "ix").search("cherries", 5)] == ["c"]
    assert len(idx.manifest["sources"]) == 2
    # the old handle still answers from its own (now removed) generation, from any thread
    with ThreadPoolExecutor(2) as pool:
        old = list(pool.map(lambda q: [p.doc_id for p in reader.search(q, 5)], ["apples trees", "cherries"]))
    assert old == [["a"], []]
    assert reader.reload().search("cherries", 5)[0].doc_id == "c"


def test_empty_build_publishes_nothing(tmp_path: Path) -> None:
    good = _jsonl(tmp_path / "g.jsonl", [{"id": "a", "text": "kept text"}])
    Index.build([good], tmp_path / "ix")
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"\x00\x00binary")
    with pytest.raises(EmptyBuild) as ei:
        Index.build([bad], tmp_path / "ix")
    assert ei.value.report.ingest.skipped[0][0] == str(bad)
    assert [p.doc_id for p in Index.open(tmp_path / "ix").search("kept", 3)] == ["a"]


def test_refuses_foreign_folders_and_missing_indexes(tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "precious.txt").write_text("do not overwrite")
    src = _jsonl(tmp_path / "g.jsonl", [{"id": "a", "text": "text"}])
    with pytest.raises(IndexError_, match="not a Sleuth index"):
        Index.build([src], other)
    assert (other / "precious.txt").read_text() == "do not overwrite"
    with pytest.raises(IndexNotFound):
        Index.open(tmp_path / "nothing-here")


_BUILDER = """
import sys
from sleuth.search import Index
Index.build([sys.argv[1]], sys.argv[2])
"""


def test_kill_9_during_build_leaves_old_index_intact(tmp_path: Path, data_dir: Path) -> None:
    target = tmp_path / "ix"
    old = Index.build([data_dir / "policy_zh/corpus.jsonl"], target)
    before = [p.id for p in old.search("差旅 报销 期限", 5, Filters.parse(["acl=all"]))]
    assert before
    # a big corpus so the writer is still busy when killed
    big = tmp_path / "big.jsonl"
    with big.open("w", encoding="utf-8") as f:
        for i in range(60_000):
            f.write(
                json.dumps(
                    {"id": f"d{i}", "text": f"filler passage number {i} about subject {i % 97} and topic {i % 13}"}
                )
                + "\n"
            )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen([sys.executable, "-c", _BUILDER, str(big), str(target)], env=env)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            tmps = [p for p in target.iterdir() if p.name.endswith(".tmp") and (p / "passages.sqlite").exists()]
            if tmps:
                break
            assert proc.poll() is None, "the builder finished before it could be killed"
            time.sleep(0.05)
        else:
            pytest.fail("the builder never started writing")
        time.sleep(0.5)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert any(p.name.endswith(".tmp") for p in target.iterdir()), "the killed writer left its scratch folder"
    reopened = Index.open(target)
    assert reopened.gen == old.gen and reopened.manifest["passages"] == 12
    assert [p.id for p in reopened.search("差旅 报销 期限", 5, Filters.parse(["acl=all"]))] == before
    # the next writer cleans up and replaces atomically
    newer = Index.build([data_dir / "quickstart/wiki_passages.jsonl"], target)
    assert not any(p.name.endswith(".tmp") for p in target.iterdir())
    assert [p.name for p in target.iterdir() if p.name.startswith("gen-")] == [newer.gen.name]
    assert newer.manifest["passages"] > 900


def test_open_retriever_corpus_is_cached_by_content(tmp_path: Path) -> None:
    src = _jsonl(tmp_path / "c.jsonl", [{"id": "a", "text": "first version of the text"}])
    r1 = open_retriever(src, cache_dir=tmp_path / "cache")
    assert isinstance(r1, Index) and [p.doc_id for p in r1.search("first", 2)] == ["a"]
    r2 = open_retriever(str(src), cache_dir=tmp_path / "cache")
    assert isinstance(r2, Index) and r2.root == r1.root, "same content: same cached index"
    _jsonl(src, [{"id": "a", "text": "second edition of the text"}])
    r3 = open_retriever(src, cache_dir=tmp_path / "cache")
    assert isinstance(r3, Index) and r3.root != r1.root
    assert [p.doc_id for p in r3.search("edition", 2)] == ["a"]
    idx_dir = r3.root
    assert open_retriever(idx_dir).search("edition", 1)[0].doc_id == "a"  # an index folder opens directly
    with pytest.raises(Exception, match="neither an index folder"):
        open_retriever(tmp_path / "nope")


CORPORA = [
    ("quickstart/wiki_passages.jsonl", "Evan Morris lobbyist Genentech", "Evan Morris"),
    ("hotpotqa/train.jsonl", "Socialist Revolutionary Party", "Socialist Revolutionary Party"),
    ("musique/train.json", "Journal of Mathematical Physics editor", "Journal of Mathematical Physics"),
    ("musique/train_corpus.json", "Person-centered therapy Carl Rogers", "Person-centered therapy"),
    ("timeqa/train_hard.json.gz", "Newton Baker House Georgetown", "Newton D . Baker House"),
    ("strategyqa/train.json", "Genghis Khan sixteen children", "Genghis Khan"),
    ("policy_zh/corpus.jsonl", "境外差旅报销期限", "境外差旅费用管理细则（2025版）"),
]


@pytest.mark.parametrize(("rel", "query", "title"), CORPORA)
def test_cli_build_and_search_every_corpus(
    tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str], rel: str, query: str, title: str
) -> None:
    out = tmp_path / "ix"
    code, _, err = _cli(capsys, "index", "build", "--input", str(data_dir / rel), "--out", str(out), "--json")
    assert code == 0, err
    code, stdout, err = _cli(capsys, "search", query, "--index", str(out), "--k", "5", "--filter", "acl=all", "--json")
    assert code == 0, err
    res = json.loads(stdout)
    assert res["passages"] and title in [p["title"] for p in res["passages"]]
    assert all(p["acl"] and "all" in p["acl"] for p in res["passages"])


def test_cli_add_stats_corpus_and_user_errors(
    tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLEUTH_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "ix"
    assert (
        _cli(capsys, "index", "build", "--input", str(data_dir / "policy_zh/corpus.jsonl"), "--out", str(out))[0] == 0
    )
    extra = _jsonl(
        tmp_path / "extra.jsonl", [{"id": "new-1", "title": "新规", "text": "新增的差旅补充规定。", "acl": "all"}]
    )
    code, stdout, _ = _cli(capsys, "index", "add", "--index", str(out), "--input", str(extra), "--json")
    assert code == 0 and json.loads(stdout)["passages"] == 13
    code, stdout, _ = _cli(capsys, "index", "stats", "--index", str(out), "--filter", "acl=finance", "--json")
    assert code == 0
    st = json.loads(stdout)
    assert st["passages_visible"] == 1 and "passages" not in st and "sources" not in st
    code, stdout, _ = _cli(
        capsys,
        "search",
        "抽查比例",
        "--corpus",
        str(data_dir / "policy_zh/corpus.jsonl"),
        "--filter",
        "acl=all",
        "--json",
    )
    assert code == 0 and "fin-audit-2025" not in stdout
    for args, msg in [
        (("search", "x", "--index", str(tmp_path / "missing")), "does not exist"),
        (("search", "x", "--index", str(out), "--filter", "acl"), "key=value"),
        (("search", "x", "--index", str(out), "--mode", "dense"), "no vectors"),
        (("search", "x", "--index", str(out), "--corpus", str(extra)), "exactly one"),
        (("index", "build", "--input", str(tmp_path / "nope"), "--out", str(tmp_path / "o")), "not found"),
        (("index", "build", "--input", str(data_dir / "mmlu"), "--out", str(tmp_path / "o")), "no passages"),
        (("index", "build", "--input", str(extra), "--out", str(tmp_path / "o"), "--format", "xml"), "--format"),
        (("index", "stats", "--index", str(tmp_path)), "not a Sleuth index"),
    ]:
        code, _, err = _cli(capsys, *args)
        assert code == 2 and msg in " ".join(err.split()), (args, err)
        assert "Traceback" not in err
