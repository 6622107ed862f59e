"""A committed run directory's records and questions, for the benchmarks that measure on them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sleuth.eval.datasets import load_dataset
from sleuth.eval.items import Item
from sleuth.eval.store import read_records

ROOT = Path(__file__).resolve().parents[1]


def records(run: Path) -> Iterator[dict[str, Any]]:
    """The newest record of each task of ``run`` (``results.jsonl.gz`` and/or ``results.jsonl``)."""
    yield from read_records(run)


def items_of(run: Path) -> dict[str, Item]:
    """The questions of the data file named in ``run``'s ``run.json``, by id."""
    manifest = json.loads((run / "run.json").read_text())
    data = Path(manifest["data"]["path"])
    if not data.is_absolute():  # written relative to the directory the run was started in
        data = next((b / data for b in (ROOT, run, Path.cwd()) if (b / data).is_file()), ROOT / data)
    fmt = (manifest.get("settings") or {}).get("format")
    return {it.id: it for it in load_dataset(data, fmt).items}
