"""Every way an index folder can be damaged, made on real indexes: one sentence that names the
folder and the command that rebuilds it, exit status 2, no traceback - from the Python API,
the CLI, ``sleuth serve`` (a start-up error) and ``sleuth mcp``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from sleuth.search import Index, IndexDamaged, open_retriever

ROOT = Path(__file__).resolve().parents[1]


def _gen(ix: Path) -> Path:
    return ix / (ix / "CURRENT").read_text().strip()


def _truncate(path: Path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def _scribble(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[100:4096] = b"\xff" * (min(len(data), 4096) - 100)
    path.write_bytes(bytes(data))


def _half_written(ix: Path) -> None:
    """A generation that was never finished, made live by hand (a copy cut short)."""
    gen = _gen(ix)
    half = ix / "gen-0000000000001-1"
    half.mkdir()
    shutil.copy(gen / "passages.sqlite", half / "passages.sqlite")
    (ix / "CURRENT").write_text(half.name + "\n")


def _never_finished(ix: Path) -> None:
    """A first build killed before it published: a ``gen-….tmp`` folder and no CURRENT."""
    gen = _gen(ix)
    gen.rename(gen.with_name(gen.name + ".tmp"))
    (ix / "CURRENT").unlink()


def _mark_dense(ix: Path) -> None:
    """The manifest says the index has vectors, but vectors.npy is gone."""
    m = _gen(ix) / "manifest.json"
    d = json.loads(m.read_text())
    d.update(dense=True, embedder="all-MiniLM-L6-v2")
    m.write_text(json.dumps(d))


DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "manifest-truncated": (lambda ix: _truncate(_gen(ix) / "manifest.json"), "manifest.json is not valid JSON"),
    "manifest-not-json": (lambda ix: (_gen(ix) / "manifest.json").write_text("<html>oops</html>"), "not valid JSON"),
    "manifest-wrong-shape": (lambda ix: (_gen(ix) / "manifest.json").write_text("[1, 2]"), "not an index manifest"),
    "sqlite-missing": (lambda ix: (_gen(ix) / "passages.sqlite").unlink(), "passages.sqlite is missing"),
    "sqlite-corrupt": (lambda ix: _scribble(_gen(ix) / "passages.sqlite"), "passages.sqlite is not a readable SQLite"),
    "sqlite-truncated": (lambda ix: _truncate(_gen(ix) / "passages.sqlite"), "passages.sqlite"),
    "lexical-missing": (lambda ix: shutil.rmtree(_gen(ix) / "lexical"), "lexical/ is missing"),
    "lexical-segment-missing": (
        lambda ix: [p.unlink() for p in (_gen(ix) / "lexical").glob("*.idx")],
        "lexical/ cannot be read",
    ),
    "lexical-meta-corrupt": (
        lambda ix: (_gen(ix) / "lexical" / "meta.json").write_text("{}"),
        "lexical/ cannot be read",
    ),
    "vectors-missing": (_mark_dense, "vectors.npy is missing"),
    "current-missing": (lambda ix: (ix / "CURRENT").unlink(), "CURRENT file is missing"),
    "current-garbage": (lambda ix: (ix / "CURRENT").write_text("\x00\x01 garbage"), "CURRENT file names no generation"),
    "current-points-nowhere": (lambda ix: (ix / "CURRENT").write_text("gen-9999999999999-1\n"), "is missing"),
    "generation-half-written": (_half_written, "has no manifest.json"),
    "build-never-finished": (_never_finished, "only a half-written generation"),
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("damage-docs")
    for i in range(30):
        (d / f"note{i}.md").write_text(f"# Note {i}\n\nThe owl number {i} hunts at night in forest {i % 7}.\n")
    return d


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory, corpus: Path) -> Path:
    ix = tmp_path_factory.mktemp("damage-ix") / "ix"
    Index.build([corpus], ix)
    return ix


def _damaged_copy(pristine: Path, tmp_path: Path, kind: str) -> Path:
    ix = tmp_path / "ix"
    shutil.copytree(pristine, ix)
    DAMAGE[kind][0](ix)
    return ix


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_python_api_names_the_folder_and_the_fix(pristine: Path, corpus: Path, tmp_path: Path, kind: str) -> None:
    ix = _damaged_copy(pristine, tmp_path, kind)
    with pytest.raises(IndexDamaged) as ei:
        open_retriever(ix).search("owl", 3)
    msg = str(ei.value)
    assert "\n" not in msg
    assert msg.startswith(f"the index {ix.resolve()} is damaged (")
    assert DAMAGE[kind][1] in msg
    assert f"--out {ix.resolve()}" in msg and "sleuth index build --input" in msg
    if not any(w in kind for w in ("manifest", "current", "half", "never")):
        assert f"--input {corpus.resolve()}" in msg, "the rebuild command names the index's own inputs"
    # the fix works: rebuilding into the same folder gives a good index again
    Index.build([corpus], ix)
    assert Index.open(ix).search("owl 3", 1)


def test_leftover_of_a_killed_writer_is_no_damage(pristine: Path, tmp_path: Path) -> None:
    ix = tmp_path / "ix"
    shutil.copytree(pristine, ix)
    left = ix / "gen-0000000000002-2.tmp"
    shutil.copytree(_gen(ix), left)
    (left / "manifest.json").unlink()
    assert Index.open(ix).search("owl", 2)


def test_a_page_damaged_after_opening_is_explained_at_search(pristine: Path, tmp_path: Path) -> None:
    ix = tmp_path / "ix"
    shutil.copytree(pristine, ix)
    idx = Index.open(ix)
    idx.store.conn.close()
    import sqlite3

    idx.store.conn = sqlite3.connect(":memory:", check_same_thread=False)  # a store with no table: as if wiped
    with pytest.raises(IndexDamaged, match=r"passages\.sqlite"):
        idx.search("owl", 3)


def _sleuth(args: list[str], tmp_path: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), SLEUTH_CACHE_DIR=str(tmp_path / "cache"), COLUMNS="80")
    env["OMP_WAIT_POLICY"] = "PASSIVE"
    return subprocess.run(
        [sys.executable, "-m", "sleuth", *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=tmp_path
    )


def _one_sentence(p: subprocess.CompletedProcess[str], ix: Path, needle: str) -> str:
    assert p.returncode == 2, (p.returncode, p.stderr[-2000:])
    assert "Traceback" not in p.stderr + p.stdout
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, p.stderr
    assert f"the index {ix.resolve()} is damaged" in errors[0] and needle in errors[0]
    assert "sleuth index build --input" in errors[0] and f"--out {ix.resolve()}" in errors[0]
    return errors[0]


# the API test above covers every kind; the commands share Index.open, so a few kinds suffice here
CLI_KINDS = ["manifest-truncated", "sqlite-corrupt", "lexical-missing", "current-missing", "vectors-missing"]


@pytest.mark.parametrize("kind", CLI_KINDS)
def test_cli_commands_explain_a_damaged_index(pristine: Path, tmp_path: Path, kind: str) -> None:
    ix = _damaged_copy(pristine, tmp_path, kind)
    needle = DAMAGE[kind][1]
    _one_sentence(_sleuth(["index", "stats", "--index", str(ix)], tmp_path), ix, needle)
    _one_sentence(_sleuth(["search", "owl", "--index", str(ix)], tmp_path), ix, needle)
    if kind == "sqlite-corrupt":  # the other readers and writers share the check
        _one_sentence(_sleuth(["index", "list", "--index", str(ix)], tmp_path), ix, needle)
        _one_sentence(_sleuth(["index", "remove", "note1.md", "--index", str(ix)], tmp_path), ix, needle)
        _one_sentence(
            _sleuth(
                ["ask", "Which owl?", "-s", "rag", "--index", str(ix), "--base-url", "http://127.0.0.1:9/v1"], tmp_path
            ),
            ix,
            needle,
        )


@pytest.mark.parametrize("kind", ["sqlite-corrupt", "current-garbage"])
def test_serve_and_mcp_refuse_to_start_on_a_damaged_index(pristine: Path, tmp_path: Path, kind: str) -> None:
    pytest.importorskip("uvicorn")
    pytest.importorskip("mcp")
    ix = _damaged_copy(pristine, tmp_path, kind)
    llm = ["--base-url", "http://127.0.0.1:9/v1", "--model", "m"]
    for cmd in (["serve", "--port", "0"], ["mcp"]):
        p = _sleuth([*cmd, "--index", str(ix), *llm], tmp_path)
        line = _one_sentence(p, ix, DAMAGE[kind][1])
        assert line.startswith("error: could not start: ")
