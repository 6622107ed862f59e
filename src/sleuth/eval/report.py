"""``report.md`` and its PNG plots, regenerated from ``results.jsonl`` (+ ``run.json``) alone: the numbers
come from :mod:`sleuth.eval.summary` (fixed bootstrap seed, sorted inputs) and the PNGs carry no software or
time stamp, so the same records give byte-identical files. This module writes the header (what made the run,
which code made its records, how far it is) and the plots; :mod:`sleuth.eval.sections` the sections.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sleuth.eval.metrics import PRIMARY
from sleuth.eval.sections import body
from sleuth.eval.store import RESULTS, in_order, read_manifest, read_records, results_files, resume_command
from sleuth.eval.summary import comparable, heading, progress, summarise

REPORT = "report.md"
PLOTS = ("scores.png", "cost.png", "accuracy_vs_tokens.png")


def code_line(records: Sequence[Mapping[str, Any]], order: Sequence[str]) -> str:
    """Which code made the records, in one line: each commit with its records per strategy (those
    re-made from the response cache counted apart), then the records made before records named their commit."""
    by: dict[str, Counter[str]] = defaultdict(Counter)
    cached: Counter[str] = Counter()
    for r in records:
        made = str(r.get("commit") or "")
        by[made][r["strategy"]] += 1
        cached[made] += bool(r.get("cached"))
    before = by.pop("", None)

    def each(n: Counter[str]) -> str:
        return ", ".join(f"{s} {n[s]}" for s in in_order(n, order))

    again = {made: f"; {k} re-made from the response cache, timings kept" for made, k in cached.items() if k}
    by_size = sorted(by.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))
    parts = [f"`{made}`: {each(n)}{again.get(made, '')}" for made, n in by_size]
    line = f"records from {len(by)} {'commit' if len(by) == 1 else 'commits'}: " + "; ".join(parts) if by else ""
    if before:
        line += "; and " if line else ""
        line += f"{sum(before.values())} made before records named their commit: {each(before)}"
    return line


def render(records: Sequence[Mapping[str, Any]], manifest: Mapping[str, Any] | None, plots: Sequence[str] = ()) -> str:
    """The report's Markdown."""
    manifest = manifest or {}
    settings = manifest.get("settings") or {}
    order = settings.get("strategies") or []
    every = records
    prog = progress(records, manifest)
    records = comparable(records, prog)
    data, idx = manifest.get("data") or {}, manifest.get("index") or {}
    # how the open setting searched (runs recorded before the mode could be chosen name none: BM25)
    mode = f"; {idx['mode']} search" if idx.get("mode") and idx.get("setting") == "open" else ""
    models = sorted({str((r.get("result") or {}).get("model") or "") for r in records} - {""})
    lines = [
        f"# Evaluation: {data.get('name', '?')}",
        "",
        "| | |",
        "|---|---|",
        f"| command | `{resume_command(str(manifest.get('command', '?')))}` (DIR: this folder) |",
        f"| data | `{data.get('path', '?')}` (sha256 `{str(data.get('sha256', ''))[:16]}…`, {data.get('questions', '?')} questions) |",
        f"| format / setting | {settings.get('format', '?')} / {settings.get('setting', '?')} |",
        f"| model | {settings.get('model', '?')}" + (f" (served as: {', '.join(models)})" if models else "") + " |",
        f"| index | {idx.get('source', '–')}{mode} |",
        f"| seed / limit / k | {settings.get('seed')} / {settings.get('limit')} / {settings.get('k')} |",
        f"| results | {len(every)} records |",
        f"| code | {code_line(every, order) if every else '–'} |",
        f"| progress | {prog.text()} |",
    ]
    lines += body(every, records, prog, order)
    if plots:
        lines += heading("Plots") + [f"![{p}]({p})" for p in plots]
    lines += ["", "Regenerate with `sleuth eval report DIR` (reads only `results.jsonl` and `run.json`).", ""]
    return "\n".join(lines)


def write_report(out: str | Path, *, plots: bool = True) -> Path:
    """Write ``report.md`` (and the PNGs) into ``out`` from its JSONL and manifest."""
    out = Path(out)
    if not results_files(out):
        raise FileNotFoundError(f"{out / RESULTS} does not exist")
    records = sorted(read_records(out), key=lambda r: (r["strategy"], str(r["qid"])))
    manifest = read_manifest(out)
    order = ((manifest or {}).get("settings") or {}).get("strategies") or []
    rows = summarise(comparable(records, progress(records, manifest)), order) if plots else []
    written = write_plots(rows, out) if rows else []
    path = out / REPORT
    path.write_text(render(records, manifest, written), encoding="utf-8")
    return path


def write_plots(rows: Sequence[Mapping[str, Any]], out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = np.arange(len(rows))

    def col(key: str) -> list[float]:
        return [r[key] for r in rows]

    def err(r: Mapping[str, Any]) -> np.ndarray:  # the CI's reach below and above the mean
        return np.array([[r["score"][0] - r["score"][1]], [r["score"][2] - r["score"][0]]])

    def save(fig: Any, name: str, *bars: Any) -> str:  # bars: the axes with a bar per strategy
        for ax in bars:
            ax.set_xticks(x, col("strategy"), rotation=20)
        fig.tight_layout()
        fig.savefig(out / name, dpi=100, metadata={"Software": None})
        plt.close(fig)
        return name

    fig, ax = plt.subplots(figsize=(max(4, 1.1 * len(rows) + 2), 3.6))
    ax.bar(x, [r["score"][0] for r in rows], yerr=np.hstack([err(r) for r in rows]), capsize=4, color="#4C72B0")
    ax.set_ylim(0, 1.03)
    ax.set_ylabel(PRIMARY.get(rows[0]["primary"], rows[0]["primary"]))
    ax.set_title("Score per strategy (95% bootstrap CI)")
    written = [save(fig, PLOTS[0], ax)]

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(max(6, 2 * len(rows) + 2), 3.6))
    a1.bar(x, col("prompt_tokens"), label="prompt", color="#55A868")
    a1.bar(x, col("completion_tokens"), bottom=col("prompt_tokens"), label="completion", color="#C44E52")
    a1.set_title("Tokens per question")
    a1.legend(fontsize=8)
    a2.bar(x, col("seconds"), color="#8172B2")
    a2.set_title("Seconds per question")
    written.append(save(fig, PLOTS[1], a1, a2))

    fig, ax = plt.subplots(figsize=(5, 3.8))
    for r in rows:
        ax.errorbar(r["tokens"], r["score"][0], yerr=err(r), fmt="o", capsize=3)
        ax.annotate(r["strategy"], (r["tokens"], r["score"][0]), textcoords="offset points", xytext=(5, 4), fontsize=8)
    ax.set_xlabel("tokens per question (prompt + completion)")
    ax.set_ylabel("score")
    ax.set_ylim(-0.03, 1.03)
    ax.margins(x=0.15)
    ax.set_title("Accuracy vs cost")
    return [*written, save(fig, PLOTS[2])]
