"""``report.md`` and PNG plots, regenerated from ``results.jsonl`` (+ ``run.json``) alone.

Everything here is deterministic (fixed bootstrap seed, sorted inputs, no
timestamps from the clock, PNG metadata stripped), so regenerating a report
from the same JSONL gives byte-identical files.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sleuth.eval.diagnose import answer_form_section, diagnosis_section
from sleuth.eval.gap import compositionality_gap, question_of
from sleuth.eval.metrics import PRIMARY
from sleuth.eval.store import RESULTS, in_order, is_composed, primary_score, read_manifest, read_records, results_files

REPORT = "report.md"
PLOTS = ("scores.png", "cost.png", "accuracy_vs_tokens.png")
BOOTSTRAP = 2000
BOOT_SEED = 12345


def bootstrap_ci(
    values: Sequence[float], n: int = BOOTSTRAP, seed: int = BOOT_SEED, level: float = 0.95
) -> tuple[float, float, float]:
    """Mean and percentile-bootstrap confidence interval (deterministic for a given seed)."""
    a = np.asarray(values, dtype=float)
    if a.size == 0:
        return (math.nan, math.nan, math.nan)
    if a.size == 1:
        return (float(a[0]), float(a[0]), float(a[0]))
    rng = np.random.default_rng(seed)
    means = a[rng.integers(0, a.size, size=(n, a.size))].mean(axis=1)
    lo, hi = np.quantile(means, [(1 - level) / 2, 1 - (1 - level) / 2])
    return (float(a.mean()), float(lo), float(hi))


@dataclass(frozen=True)
class Progress:
    """How far a run is: which questions every strategy has finished (the comparable set)."""

    strategies: tuple[str, ...]
    questions: int | None  # in the run's sample (None without a manifest)
    complete: frozenset[str]  # question ids answered by every strategy (every hop too, with --gap)
    tasks_done: int
    tasks_total: int | None
    seconds_per_question: float | None = None  # wall time of a complete question, all strategies, as recorded

    @property
    def finished(self) -> bool:
        return self.questions is not None and len(self.complete) >= self.questions

    def text(self) -> str:
        tasks = f"{self.tasks_done} of {self.tasks_total} tasks" if self.tasks_total else f"{self.tasks_done} tasks"
        ns = len(self.strategies)
        if self.finished:
            return f"complete: {_n(self.questions or 0, 'question')} × {_n(ns, 'strategy')} ({tasks})"
        done = len(self.complete)
        if self.questions is None:
            return f"{_n(done, 'question')} answered by all {_n(ns, 'strategy')} ({tasks})"
        text = f"{done} of {_n(self.questions, 'question')} answered by all {_n(ns, 'strategy')} ({tasks})"
        if self.seconds_per_question:
            left = (self.questions - done) * self.seconds_per_question / 3600
            text += (
                f"; the rest takes about {left:.1f} h at the recorded {self.seconds_per_question:.0f} s per question"
            )
        return text


def _n(k: int, noun: str) -> str:
    plural = noun[:-1] + "ies" if noun.endswith("y") else noun + "s"
    return f"{k} {noun if k == 1 else plural}"


def progress(records: Sequence[Mapping[str, Any]], manifest: Mapping[str, Any] | None) -> Progress:
    """The questions every strategy of the run has finished, so that tables compare like with like.

    A question is complete when each strategy has a record for it (failed ones count: they
    score 0) and, in a ``--gap`` run, for each of its decomposition hops.  The hop count comes
    from the manifest (written by the runner) or, for older runs, from the hop records.
    """
    manifest = manifest or {}
    settings = manifest.get("settings") or {}
    strategies = tuple(settings.get("strategies") or sorted({r["strategy"] for r in records}))
    gap = bool(settings.get("gap"))
    mains: dict[str, set[str]] = defaultdict(set)
    subs: dict[tuple[str, str], set[int]] = defaultdict(set)
    seen_hops: dict[str, int] = {}
    for r in records:
        task = r.get("task") or {}
        if is_composed(r):
            mains[str(r["qid"])].add(r["strategy"])
        elif task.get("parent") is not None and task.get("hop") is not None:
            parent = str(task["parent"])
            subs[(parent, r["strategy"])].add(int(task["hop"]))
            seen_hops[parent] = max(seen_hops.get(parent, 0), int(task.get("hops") or 0))
    hops = {str(k): int(v) for k, v in (manifest.get("hops") or {}).items()}
    complete = set()
    for qid, done in mains.items():
        if not all(s in done for s in strategies):
            continue
        if gap:
            n = hops.get(qid, seen_hops.get(qid))
            if n is None or any(subs.get((qid, s), set()) != set(range(1, n + 1)) for s in strategies):
                continue
        complete.add(qid)
    data = manifest.get("data") or {}
    questions = data.get("questions")
    total = manifest.get("tasks")
    if total is None and questions is not None and not gap:
        total = int(questions) * len(strategies)
    per_question = None
    if complete:
        spent = sum(float(r.get("wall_s") or 0.0) for r in records if question_of(str(r["qid"])) in complete)
        per_question = spent / len(complete) or None
    return Progress(strategies, questions, frozenset(complete), len(records), total, per_question)


def _mean(xs: Sequence[float]) -> float:
    return float(np.mean(xs)) if len(xs) else math.nan


def summarise(records: Sequence[Mapping[str, Any]], order: Sequence[str] = ()) -> list[dict[str, Any]]:
    """One row per strategy over the composed (main) questions."""
    by: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for r in records:
        if is_composed(r):
            by[r["strategy"]].append(r)
    names = in_order(by, order)
    rows = []
    for s in names:
        rs = sorted(by[s], key=lambda r: str(r["qid"]))
        sc = [r.get("scores") or {} for r in rs]
        primaries = Counter(x.get("primary", "f1") for x in sc)
        primary = primaries.most_common(1)[0][0]
        row: dict[str, Any] = {"strategy": s, "n": len(rs), "primary": primary}
        row["score"] = bootstrap_ci([primary_score(r) for r in rs])
        for m in ("em", "f1", "cover_em", "acc", "mention", "recall_title", "recall_id"):
            vals = [float(x[m]) for x in sc if x.get(m) is not None]
            row[m] = _mean(vals) if vals else None
        for m in ("llm_calls", "searches", "prompt_tokens", "processed_prompt_tokens", "completion_tokens", "seconds"):
            row[m] = _mean([float(x.get(m) or 0.0) for x in sc])
        row["cached_llm_calls"] = int(sum(int(x.get("cached_llm_calls") or 0) for x in sc))
        row["tokens"] = row["prompt_tokens"] + row["completion_tokens"]
        costs = [float(x["cost_usd"]) for x in sc if x.get("cost_usd") is not None]
        row["cost_usd"] = _mean(costs) if costs else None
        row["failed"] = sum(r.get("status") == "failed" for r in rs)
        row["reasons"] = dict(sorted(Counter(r.get("reason") or "?" for r in rs).items()))
        rows.append(row)
    return rows


def _f(x: Any, nd: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if isinstance(x, float):
        return f"{x:.{nd}f}"
    return str(x)


def _plots(rows: Sequence[Mapping[str, Any]], out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    meta = {"Software": None}
    names = [r["strategy"] for r in rows]
    x = np.arange(len(rows))
    written = []

    fig, ax = plt.subplots(figsize=(max(4, 1.1 * len(rows) + 2), 3.6))
    means = [r["score"][0] for r in rows]
    err = np.array([[r["score"][0] - r["score"][1] for r in rows], [r["score"][2] - r["score"][0] for r in rows]])
    ax.bar(x, means, yerr=err, capsize=4, color="#4C72B0")
    ax.set_xticks(x, names, rotation=20)
    ax.set_ylim(0, 1.03)
    ax.set_ylabel(PRIMARY.get(rows[0]["primary"], rows[0]["primary"]) if rows else "score")
    ax.set_title("Score per strategy (95% bootstrap CI)")
    fig.tight_layout()
    fig.savefig(out / PLOTS[0], dpi=100, metadata=meta)
    plt.close(fig)
    written.append(PLOTS[0])

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
    fig.tight_layout()
    fig.savefig(out / PLOTS[1], dpi=100, metadata=meta)
    plt.close(fig)
    written.append(PLOTS[1])

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
    fig.tight_layout()
    fig.savefig(out / PLOTS[2], dpi=100, metadata=meta)
    plt.close(fig)
    written.append(PLOTS[2])
    return written


def _kind_table(records: Sequence[Mapping[str, Any]], order: Sequence[str]) -> list[str]:
    """Primary score per question kind (bridge/comparison, n-hop, subject) when the data has kinds."""
    cells: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in records:
        if is_composed(r) and r.get("kind"):
            cells[(r["strategy"], r["kind"])].append(primary_score(r))
    kinds = sorted({k for _, k in cells})
    if len(kinds) < 2:
        return []
    out = [
        "",
        "## Score by question kind",
        "",
        "| strategy | " + " | ".join(f"{k} (n)" for k in kinds) + " |",
        "|---|" + "---|" * len(kinds),
    ]
    for s in order:
        vals = [cells.get((s, k), []) for k in kinds]
        out.append(f"| {s} | " + " | ".join(f"{_f(_mean(v))} ({len(v)})" if v else "–" for v in vals) + " |")
    return out


def paired_differences(
    records: Sequence[Mapping[str, Any]], order: Sequence[str], baseline: str | None = None
) -> tuple[str | None, list[dict[str, Any]]]:
    """Each strategy against a baseline on the questions both answered (composed questions only).

    The difference of primary scores per question, its mean with a 95 % paired bootstrap CI,
    and how many questions each side won.  Pairing removes the question-to-question variance
    that makes the per-strategy intervals overlap, so it is the fairer test of "is A better
    than B on this data".  Baseline: ``rag`` when present, else the first strategy.
    """
    scores: dict[str, dict[str, float]] = defaultdict(dict)
    for r in records:
        if is_composed(r):
            scores[r["strategy"]][str(r["qid"])] = primary_score(r)
    names = in_order(scores, order)
    if baseline is None:
        baseline = "rag" if "rag" in scores else (names[0] if names else None)
    if baseline is None or baseline not in scores:
        return None, []
    base = scores[baseline]
    rows = []
    for s in names:
        if s == baseline:
            continue
        common = sorted(set(scores[s]) & set(base))
        if not common:
            continue
        d = [scores[s][q] - base[q] for q in common]
        mean, lo, hi = bootstrap_ci(d)
        rows.append(
            {
                "strategy": s,
                "n": len(common),
                "diff": (mean, lo, hi),
                "wins": sum(x > 0 for x in d),
                "losses": sum(x < 0 for x in d),
                "ties": sum(x == 0 for x in d),
            }
        )
    return baseline, rows


def _paired_section(records: Sequence[Mapping[str, Any]], order: Sequence[str]) -> list[str]:
    baseline, rows = paired_differences(records, order)
    if not rows:
        return []
    out = [
        "",
        f"## Paired differences against {baseline}",
        "",
        f"Primary score minus {baseline}'s on the same questions: mean with a 95% paired bootstrap CI "
        f"({BOOTSTRAP} resamples), and the questions each side won. An interval that excludes 0 is a "
        "difference this sample supports; one that includes 0 is not."
        + (
            " **Fewer than 20 paired questions: the percentile bootstrap understates the uncertainty "
            "at this size; read these rows as description, not evidence.**"
            if min(r["n"] for r in rows) < 20
            else ""
        ),
        "",
        f"| strategy | questions | difference [95% CI] | better than {baseline} | worse | same |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        m, lo, hi = r["diff"]
        out.append(
            f"| {r['strategy']} | {r['n']} | {m:+.3f} [{lo:+.3f}, {hi:+.3f}] | {r['wins']} | {r['losses']} | {r['ties']} |"
        )
    return out


def _code_table(records: Sequence[Mapping[str, Any]], order: Sequence[str], current: Mapping[str, str]) -> list[str]:
    """Which code produced the records: one line per strategy, with a warning when versions are mixed."""
    by: dict[str, Counter[str]] = defaultdict(Counter)
    for r in records:
        by[r["strategy"]][str(r.get("code") or "") or "not recorded"] += 1
    if not by:
        return []
    names = in_order(by, order)
    mixed = [s for s in names if len(by[s]) > 1]
    out = [
        "",
        "## Code versions",
        "",
        "Each record carries the fingerprint of the code that produced it: a hash of what the strategy does "
        "on a fixed probe (requests to a scripted model, searches, answers, its prompts and defaults; "
        "`sleuth.eval.fingerprint`).",
        "",
    ]
    if mixed:
        out += [
            f"**Mixed versions:** {', '.join(mixed)} hold records from more than one version of the code; "
            "`sleuth eval ... --redo-stale` reruns those that differ from the current code.",
            "",
        ]
    out += ["| strategy | fingerprint: records | latest run's code |", "|---|---|---|"]
    for s in names:
        fps = ", ".join(f"`{fp}`: {n}" if fp != "not recorded" else f"not recorded: {n}" for fp, n in by[s].items())
        out.append(f"| {s} | {fps} | {'`' + current[s] + '`' if current.get(s) else '–'} |")
    return out


def comparable(records: Sequence[Mapping[str, Any]], prog: Progress) -> list[Mapping[str, Any]]:
    """The records of complete questions (composed and hops): what the tables compare."""
    return [r for r in records if question_of(str(r["qid"])) in prog.complete]


def render(records: Sequence[Mapping[str, Any]], manifest: Mapping[str, Any] | None, plots: Sequence[str] = ()) -> str:
    manifest = manifest or {}
    settings = manifest.get("settings") or {}
    order = settings.get("strategies") or []
    every = records
    prog = progress(records, manifest)
    records = comparable(records, prog)
    left_out = len(every) - len(records)
    rows = summarise(records, order)
    data = manifest.get("data") or {}
    idx = manifest.get("index") or {}
    models = sorted({str((r.get("result") or {}).get("model") or "") for r in records} - {""})
    lines = [f"# Evaluation: {data.get('name', '?')}", ""]
    lines += [
        "| | |",
        "|---|---|",
        f"| command | `{manifest.get('command', '?')}` |",
        f"| data | `{data.get('path', '?')}` (sha256 `{str(data.get('sha256', ''))[:16]}…`, {data.get('questions', '?')} questions) |",
        f"| format / setting | {settings.get('format', '?')} / {settings.get('setting', '?')} |",
        f"| model | {settings.get('model', '?')}" + (f" (served as: {', '.join(models)})" if models else "") + " |",
        f"| index | {idx.get('source', settings.get('index', {}).get('source', '–')) if isinstance(settings.get('index'), dict) else '–'} |",
        f"| seed / limit / k | {settings.get('seed')} / {settings.get('limit')} / {settings.get('k')} |",
        f"| results | {len(every)} records |",
        f"| progress | {prog.text()} |",
        "",
        "## Scores",
        "",
    ]
    if left_out:
        lines += [
            f"The tables compare the {len(prog.complete)} questions that every strategy has finished; "
            f"{left_out} record{'s' if left_out != 1 else ''} of questions still in progress "
            f"{'are' if left_out != 1 else 'is'} left out until their question is complete "
            "(they are in `results.jsonl`).",
            "",
        ]
    if not rows:
        lines.append("No results yet.")
    else:
        prim = PRIMARY.get(rows[0]["primary"], rows[0]["primary"])
        lines += [
            f"Primary score: **{prim}** (mean with 95% percentile-bootstrap CI, {BOOTSTRAP} resamples). "
            "Failed questions count as wrong.",
            "",
            "| strategy | n | score [95% CI] | EM | F1 | cover-EM | acc | mention | recall (title) | recall (id) | failed |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            m, lo, hi = r["score"]
            lines.append(
                f"| {r['strategy']} | {r['n']} | {_f(m)} [{_f(lo)}, {_f(hi)}] | {_f(r['em'])} | {_f(r['f1'])} | "
                f"{_f(r['cover_em'])} | {_f(r['acc'])} | {_f(r['mention'])} | {_f(r['recall_title'])} | "
                f"{_f(r['recall_id'])} | {r['failed']} |"
            )
        lines += [
            "",
            "## Cost per question",
            "",
            "| strategy | LLM calls | searches | prompt tokens | processed prompt tokens | completion tokens | seconds | cost (USD) | calls served from cache |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            lines.append(
                f"| {r['strategy']} | {_f(r['llm_calls'], 2)} | {_f(r['searches'], 2)} | {_f(r['prompt_tokens'], 1)} | "
                f"{_f(r['processed_prompt_tokens'], 1)} | {_f(r['completion_tokens'], 1)} | {_f(r['seconds'], 2)} | "
                f"{_f(r['cost_usd'], 5)} | {r['cached_llm_calls']} |"
            )
        lines += ["", "## Finish reasons", "", "| strategy | reasons |", "|---|---|"]
        for r in rows:
            lines.append(f"| {r['strategy']} | " + ", ".join(f"{k}: {v}" for k, v in r["reasons"].items()) + " |")
    lines += _paired_section(records, [r["strategy"] for r in rows])
    lines += _kind_table(records, [r["strategy"] for r in rows])
    gaps = {m: compositionality_gap(records, m) for m in ("em", "cover_em")}
    if any(gaps.values()):
        lines += [
            "",
            "## Compositionality gap",
            "",
            "Among composed questions whose every sub-question (decomposition hops, earlier answers substituted) "
            "the strategy answered correctly, the share whose composed question it got wrong (Press et al.).",
            "",
            "| strategy | correct by | questions | composed right | sub-questions right | all sub-questions right | of those, composed wrong | gap |",
            "|---|---|---|---|---|---|---|---|",
        ]
        names = [s for s in order if any(s in g for g in gaps.values())]
        names += sorted({s for g in gaps.values() for s in g} - set(names))
        for s in names:
            for m, g in gaps.items():
                row = g.get(s)
                if row is not None:
                    lines.append(
                        f"| {s} | {m} | {row.questions} | {row.composed_right_overall} | "
                        f"{row.hops_right}/{row.hops} | {row.subs_all_right} | {row.composed_wrong} | {_f(row.gap)} |"
                    )
    lines += diagnosis_section(records, [r["strategy"] for r in rows])
    lines += answer_form_section(records, [r["strategy"] for r in rows])
    lines += _code_table(every, order, manifest.get("code") or {})
    failures = [r for r in every if r.get("status") == "failed"]
    if failures:
        lines += ["", "## Failures (first 20)", "", "| strategy | question id | reason | error |", "|---|---|---|---|"]
        for r in sorted(failures, key=lambda r: (r["strategy"], str(r["qid"])))[:20]:
            err = str(r.get("error") or "").replace("|", "\\|").replace("\n", " ")[:160]
            lines.append(f"| {r['strategy']} | {r['qid']} | {r.get('reason', '')} | {err} |")
    if plots:
        lines += ["", "## Plots", ""] + [f"![{p}]({p})" for p in plots]
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
    written: list[str] = []
    if plots:
        rows = summarise(comparable(records, progress(records, manifest)), order)
        if rows:
            written = _plots(rows, out)
    path = out / REPORT
    path.write_text(render(records, manifest, written), encoding="utf-8")
    return path
