"""Where a sitting's seconds were measured: its machine and the model's speed on it.

Seconds per question compare rows answered on the same machine.  A long comparison runs in
sittings, each maybe on another machine (a fresh one each session), so every sitting first
measures the model it runs on (:func:`sleuth.llm.bench.measure_rates`: a fixed prompt with the
prompt cache off, then a fixed number of decoded tokens) and appends that to
``<work-dir>/sittings.jsonl``; every answer line of the sitting carries its id (``"sitting"``).
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import httpx
from benchmarks.peers.adapters.common import append_line

from sleuth.llm.bench import measure_rates

__all__ = ["CALIBRATION", "ENGINE_FRESH", "ENGINE_SHARED", "cpu_name", "read_sittings", "start_sitting"]

#: how the rows of a sitting shared the model server; sittings recorded before this was (stop 49)
#: all ran their rows on one engine
ENGINE_SHARED = "one for all rows"
#: each row of the sitting ran on a freshly started engine (its prompt cache empty)
ENGINE_FRESH = "fresh per row"

#: the calibration request: prompt tokens, decoded tokens, repeats (best of)
CALIBRATION = {"prompt_tokens": 256, "decode_tokens": 32, "repeats": 2}


def cpu_name() -> str:
    """The processor's model name (``/proc/cpuinfo``), else what ``platform`` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def start_sitting(work: Path, upstream: str, model: str, engine: str = ENGINE_SHARED) -> dict[str, Any]:
    """Measure the model at ``upstream`` (a llama.cpp server's base URL, no ``/v1``), record the
    sitting in ``work/sittings.jsonl`` and return that entry (its id is ``entry["sitting"]``).  A server that is not llama.cpp is
    recorded as not measured, with why; the sitting still runs.  ``engine`` says whether each row
    ran on a freshly started engine (``"fresh per row"``) or all rows on one (``"one for all rows"``:
    a row may then reuse prompts an earlier row left in the engine's prompt cache)."""
    sid = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    entry: dict[str, Any] = {
        "sitting": sid,
        "cpu": cpu_name(),
        "cores": os.cpu_count(),
        "model": model,
        "engine": engine,
    }
    try:
        n_p, p, n_d, d = measure_rates(upstream, **CALIBRATION)
        entry.update(prompt_tokens=n_p, prompt_tok_s=round(p, 1), decode_tokens=n_d, decode_tok_s=round(d, 1))
    except (httpx.HTTPError, KeyError, TypeError, ValueError) as e:
        entry["not_measured"] = f"{type(e).__name__}: {e}"[:300]
    work.mkdir(parents=True, exist_ok=True)
    append_line(work / "sittings.jsonl", entry)
    return entry


def read_sittings(work: Path) -> dict[str, dict[str, Any]]:
    """The recorded sittings by id (a line cut short by a kill is skipped)."""
    path = work / "sittings.jsonl"
    out: dict[str, dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                entry = json.loads(line)
                out[str(entry["sitting"])] = entry
            except (json.JSONDecodeError, KeyError, TypeError):
                continue
    return out
