"""Scoring the rows' JSON lines with Sleuth's metrics and writing ``docs/results/peers.md``."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.peers.sittings import ENGINE_SHARED

from sleuth.eval.items import Item
from sleuth.eval.metrics import score
from sleuth.eval.summary import paired_differences, summarise

__all__ = ["FAILURE_KINDS", "read_lines", "render", "scored_records"]

FAILURE_KINDS = ("parse_error", "loop", "step_limit", "exception")


def read_lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line cut short by a kill: that question runs again on resume
    return out


def scored_records(row: str, dataset: str, lines: Sequence[Mapping[str, Any]], items: Mapping[str, Item]) -> list[dict]:
    """Sleuth-eval-shaped records (``strategy``, ``qid``, ``status``, ``scores``) for one row on one dataset."""
    recs = []
    for ln in lines:
        item = items.get(str(ln["qid"]))
        if item is None:
            continue  # a question not in this selection (another seed or --limit)
        s = score(item, {"answer": ln.get("answer", ""), "short_answer": ln.get("short_answer", "")})
        for key in ("llm_calls", "prompt_tokens", "processed_prompt_tokens"):
            s[key] = int(ln.get(key) or 0)
        s["seconds"] = float(ln.get("seconds") or 0.0)
        failure = str(ln.get("failure") or "")
        recs.append(
            {
                "strategy": row,
                "qid": f"{dataset}:{ln['qid']}",
                "status": "failed" if failure else "ok",
                "reason": failure or "finished",
                "sitting": str(ln.get("sitting") or ""),
                "scores": s,
            }
        )
    return recs


def _f(x: float | None, digits: int = 3) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _row_table(records: Sequence[Mapping[str, Any]], rows: Sequence[Mapping[str, Any]]) -> list[str]:
    table = {r["strategy"]: r for r in summarise(records, [r["name"] for r in rows])}
    out = [
        "| row | pipeline | n | EM | F1 | cover-EM | LLM calls | processed prompt tokens | s/question | "
        + " | ".join(FAILURE_KINDS)
        + " |",
        "|---" * (9 + len(FAILURE_KINDS)) + "|",
    ]
    for r in rows:
        t = table.get(r["name"])
        if t is None:
            continue
        fails = Counter(rec["reason"] for rec in records if rec["strategy"] == r["name"])
        out.append(
            f"| {r['name']} | {r['pipeline']} | {t['n']} | {_f(t['em'])} | {_f(t['f1'])} | {_f(t['cover_em'])} | "
            f"{_f(t['llm_calls'], 1)} | {_f(t['processed_prompt_tokens'], 0)} | {_f(t['seconds'], 1)} | "
            + " | ".join(str(fails.get(k, 0)) for k in FAILURE_KINDS)
            + " |"
        )
    return out


def _sittings_section(
    records: Sequence[Mapping[str, Any]], rows: Sequence[Mapping[str, Any]], sittings: Mapping[str, Mapping[str, Any]]
) -> list[str]:
    """Which sitting (machine) answered which questions, with each machine's measured model speed."""
    seconds: dict[str, dict[str, list[float]]] = {}
    for r in records:
        seconds.setdefault(str(r.get("sitting") or ""), {}).setdefault(r["strategy"], []).append(r["scores"]["seconds"])
    if not seconds or (list(seconds) == [""] and not sittings):
        return []  # nothing says where: no section rather than one row of "not recorded"
    out = [
        "",
        "## Sittings: where the seconds were measured",
        "",
        "Seconds per question compare rows answered on the same machine. Each sitting first measures the "
        "model on its machine (a fixed prompt with the prompt cache off, then a fixed number of decoded "
        "tokens, best of two: `benchmarks/peers/sittings.py`). *Engine*: whether each row started on a freshly "
        "started model server (its prompt cache empty) or all the sitting's rows shared one, where a row can "
        "reuse prompts an earlier row left in the cache and process fewer tokens.",
        "",
        "| sitting | CPU (cores) | prompt tok/s | decode tok/s | engine | answered: row questions (s/question) |",
        "|---|---|---|---|---|---|",
    ]
    order = [r["name"] for r in rows]
    for sid in sorted(seconds, key=lambda x: (x != "", x)):
        meta = sittings.get(sid, {})
        answered = "; ".join(
            f"{name} {len(v)} ({sum(v) / len(v):.1f})" for name in order if (v := seconds[sid].get(name))
        )
        if not sid:
            out.append(f"| not recorded | – | – | – | – | {answered} |")
            continue
        cpu = f"{meta.get('cpu', '?')} ({meta.get('cores', '?')})"
        if "prompt_tok_s" in meta:
            rates = f"{meta['prompt_tok_s']:.1f} | {meta['decode_tok_s']:.1f}"
        else:
            rates = f"not measured: {meta.get('not_measured', 'no record of this sitting')} | –"
        engine = meta.get("engine", ENGINE_SHARED) if meta else "–"
        out.append(f"| {sid} | {cpu} | {rates} | {engine} | {answered} |")
    return out


def _of(records: Sequence[Mapping[str, Any]], dataset: str) -> list[Mapping[str, Any]]:
    return [r for r in records if str(r["qid"]).startswith(dataset + ":")]


def render(
    records: Sequence[Mapping[str, Any]],
    rows: Sequence[Mapping[str, Any]],
    *,
    header: str,
    command: str,
    versions: Sequence[str],
    pairs: Mapping[str, str],
    not_run: Mapping[str, str],
    datasets: Mapping[str, int] | None = None,
    optional: Mapping[str, str] | None = None,
    sittings: Mapping[str, Mapping[str, Any]] | None = None,
) -> str:
    """The markdown report.  ``rows``: ``{name, system, pipeline}`` in display order; ``pairs``: row ->
    Sleuth's row of the same method (the baseline of its paired difference); ``datasets``: each
    dataset's number of questions, for a table per dataset and to name the rows not yet complete
    (records' ``qid`` is ``"<dataset>:<id>"``); ``optional``: row -> why the comparison is complete
    without it (such a row is not counted as in progress, and its state is named in the last section);
    ``sittings``: id -> the sitting's machine and calibration (:mod:`benchmarks.peers.sittings`), for
    the section saying where each row's seconds were measured."""
    datasets = dict(datasets or {})
    optional = {r["name"]: optional[r["name"]] for r in rows if optional and r["name"] in optional}
    answered = Counter(r["strategy"] for r in records)
    total = sum(datasets.values())
    required = [r["name"] for r in rows if r["name"] not in optional]
    complete = [name for name in required if total and answered[name] >= total]
    short_optional = [name for name in optional if total and answered[name] < total]
    out = [header, ""]
    if total and len(complete) < len(required):
        out += [
            f"**In progress: {len(complete)} of {len(required)} rows have answered all {total} questions**; "
            "the others' figures are partial (last section). The same command resumes the run.",
            "",
        ]
    elif short_optional:
        out += [
            f"All {len(required)} rows have answered all {total} questions; the optional "
            + ", ".join(short_optional)
            + " has not (last section).",
            "",
        ]
    out += [f"Command: `{command}`", "", "Versions: " + "; ".join(versions), ""]
    per_dataset = {name: _of(records, name) for name in datasets} if len(datasets) > 1 else {}
    if per_dataset:
        out += [f"## All {total} questions", ""]
    out += _row_table(records, rows)
    for name, subset in per_dataset.items():
        out += ["", f"## {name} ({datasets[name]} questions)", "", *_row_table(subset, rows)]
    out += ["", "## Paired differences against Sleuth's row of the same method", ""]
    out += ["Primary score (F1) per question, peer minus Sleuth, mean with a 95 % paired bootstrap interval.", ""]
    out += [
        "| row | against | questions | n | difference [95 % CI] | wins / losses / ties |",
        "|---|---|---|---|---|---|",
    ]
    scopes = [("all", records), *per_dataset.items()]
    for r in rows:
        base = pairs.get(r["name"])
        if not base or base == r["name"]:
            continue
        for scope, subset in scopes:
            _, diffs = paired_differences(subset, [base, r["name"]], baseline=base)
            for d in diffs:
                mean, lo, hi = d["diff"]
                out.append(
                    f"| {r['name']} | {base} | {scope} | {d['n']} | {mean:+.3f} [{lo:+.3f}, {hi:+.3f}] | "
                    f"{d['wins']} / {d['losses']} / {d['ties']} |"
                )
    out += _sittings_section(records, rows, sittings or {})
    listed = set(not_run) | set(optional)
    missing = [r["name"] for r in rows if not answered[r["name"]] and r["name"] not in listed]
    short = [r["name"] for r in rows if total and 0 < answered[r["name"]] < total and r["name"] not in listed]
    if not_run or missing or short or short_optional:
        out += ["", "## Rows that did not run, or stopped early", ""]
        out += [f"- {name}: {why}" for name, why in not_run.items()]
        out += [f"- {name}: {answered[name]} of {total} questions answered so far" for name in short]
        out += [f"- {name}: no answers recorded" for name in missing]
        for name in (n for n in short_optional if n not in not_run):
            state = f"{answered[name]} of {total} questions answered" if answered[name] else "not run"
            out.append(f"- {name} (optional): {state}; {optional[name]}")
    return "\n".join(out) + "\n"
