"""The PNG plots of a report: score per strategy, cost per question, accuracy against tokens.

PNG metadata is stripped (no software or time stamp), so the same rows give byte-identical files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sleuth.eval.metrics import PRIMARY

PLOTS = ("scores.png", "cost.png", "accuracy_vs_tokens.png")


def write_plots(rows: Sequence[Mapping[str, Any]], out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r["strategy"] for r in rows]
    x = np.arange(len(rows))

    def save(fig: Any, name: str) -> str:
        fig.tight_layout()
        fig.savefig(out / name, dpi=100, metadata={"Software": None})
        plt.close(fig)
        return name

    fig, ax = plt.subplots(figsize=(max(4, 1.1 * len(rows) + 2), 3.6))
    means = [r["score"][0] for r in rows]
    err = np.array([[r["score"][0] - r["score"][1] for r in rows], [r["score"][2] - r["score"][0] for r in rows]])
    ax.bar(x, means, yerr=err, capsize=4, color="#4C72B0")
    ax.set_xticks(x, names, rotation=20)
    ax.set_ylim(0, 1.03)
    ax.set_ylabel(PRIMARY.get(rows[0]["primary"], rows[0]["primary"]) if rows else "score")
    ax.set_title("Score per strategy (95% bootstrap CI)")
    written = [save(fig, PLOTS[0])]

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(max(6, 2 * len(rows) + 2), 3.6))
    a1.bar(x, [r["prompt_tokens"] for r in rows], label="prompt", color="#55A868")
    a1.bar(
        x,
        [r["completion_tokens"] for r in rows],
        bottom=[r["prompt_tokens"] for r in rows],
        label="completion",
        color="#C44E52",
    )
    a1.set_xticks(x, names, rotation=20)
    a1.set_title("Tokens per question")
    a1.legend(fontsize=8)
    a2.bar(x, [r["seconds"] for r in rows], color="#8172B2")
    a2.set_xticks(x, names, rotation=20)
    a2.set_title("Seconds per question")
    written.append(save(fig, PLOTS[1]))

    fig, ax = plt.subplots(figsize=(5, 3.8))
    for r in rows:
        ax.errorbar(
            r["tokens"],
            r["score"][0],
            yerr=[[r["score"][0] - r["score"][1]], [r["score"][2] - r["score"][0]]],
            fmt="o",
            capsize=3,
        )
        ax.annotate(r["strategy"], (r["tokens"], r["score"][0]), textcoords="offset points", xytext=(5, 4), fontsize=8)
    ax.set_xlabel("tokens per question (prompt + completion)")
    ax.set_ylabel("score")
    ax.set_ylim(-0.03, 1.03)
    ax.margins(x=0.15)
    ax.set_title("Accuracy vs cost")
    return [*written, save(fig, PLOTS[2])]
