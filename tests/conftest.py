"""Shared fixtures: the data folder beside the checkout, temporary homes."""

from __future__ import annotations

import os
from pathlib import Path

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
