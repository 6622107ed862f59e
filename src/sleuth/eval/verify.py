"""``sleuth eval verify DIR``: a sample of a run's records run again as its ``run.json`` says (same data
sha256, sample and index key; response cache off, empty KV cache) and compared step by step with the
stored ones: every LLM completion, every search (query and passage ids), the answer and finish reason.
Nothing in the run directory is written (docs/eval.md, "What made a run").
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sleuth.eval.config import EvalError
from sleuth.eval.corpus import plan_retrieval
from sleuth.eval.items import Item
from sleuth.eval.manifest import code_state, commit_label, stored_run
from sleuth.eval.metrics import score
from sleuth.eval.runner import build_tasks
from sleuth.eval.store import primary_score, read_records
from sleuth.eval.worker import first_difference, run_task, worker_config
from sleuth.strategies.text import clip

SAME, DIFFERS = "same", "differs"


@dataclass
class Check:
    """One re-run record and how it compares with the stored one."""

    strategy: str
    qid: str
    verdict: str  # same | differs
    difference: str  # "" when the same; else the first difference, in words
    answer_then: str
    answer_now: str
    seconds_then: float
    seconds_now: float
    steps: int  # LLM calls + searches compared
    commit: str = ""  # the commit that made the record
    score_then: float | None = None  # the record's primary score, and the new result's (None: no result)
    score_now: float | None = None


@dataclass
class Verification:
    run_dir: str
    candidates: int  # records that could be compared (those of the run's sample)
    not_comparable: dict[str, int]  # reason -> count of records left out
    checks: list[Check] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    commit: str = ""  # the running code's commit

    @property
    def ok(self) -> bool:
        return all(c.verdict == SAME for c in self.checks)

    def score_changes(self) -> dict[str, str]:
        """Per strategy with a differing record, in words: how many differ, how the scored ones move
        the strategy's mean primary score over its checked records, and how many could not be scored."""
        out: dict[str, str] = {}
        for name in dict.fromkeys(c.strategy for c in self.checks if c.verdict == DIFFERS):
            mine = [c for c in self.checks if c.strategy == name]
            differ = [c for c in mine if c.verdict == DIFFERS]
            moves = [c.score_now - (c.score_then or 0.0) for c in differ if c.score_now is not None]
            delta, up, down = sum(moves), sum(m > 0 for m in moves), sum(m < 0 for m in moves)
            text = (
                f"{len(differ)} of {len(mine)} records differ; mean score {delta / len(mine):+.4f} over the {len(mine)} "
                f"({up} up, {down} down, {len(moves) - up - down} level)"
            )
            if len(moves) < len(differ):
                text += f"; {len(differ) - len(moves)} failed now (no score)"
            out[name] = text
        return out

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def _compare(rec: Mapping[str, Any], fresh: Mapping[str, Any], item: Item) -> Check:
    then, now = rec.get("result"), fresh.get("result")
    diff, steps = first_difference(then, now) if then is not None and now is not None else ("", 0)
    status = (rec.get("status"), rec.get("reason")), (fresh.get("status"), fresh.get("reason"))
    if (then is None or now is None) and status[0] != status[1]:  # a failure on either side: status and reason
        diff = f"then {rec.get('status')} ({rec.get('reason')}), now {fresh.get('status')} ({fresh.get('reason')})"
        diff += f": {clip(fresh['error'], 160)}" if fresh.get("error") else ""
    scored = bool(diff) and now is not None
    return Check(
        strategy=str(rec["strategy"]),
        qid=str(rec["qid"]),
        verdict=DIFFERS if diff else SAME,
        difference=diff,
        answer_then=str((then or {}).get("answer", "")),
        answer_now=str((now or {}).get("answer", "")),
        seconds_then=float(rec.get("wall_s") or 0.0),
        seconds_now=float(fresh.get("wall_s") or 0.0),
        steps=steps,
        commit=str(rec.get("commit") or rec.get("code") or ""),
        score_then=primary_score(rec) if scored else None,
        score_now=primary_score({"scores": score(item, now)}) if scored else None,
    )


def verify_run(
    out: str | Path,
    *,
    sample: int | None = 3,
    seed: int = 0,
    strategies: Sequence[str] | None = None,
    qids: Sequence[str] | None = None,
    on_check: Callable[[Check], None] | None = None,
    on_start: Callable[[str, str, int, int], None] | None = None,
    **moved: str | Path | None,
) -> Verification:
    """Re-run ``sample`` records of the run in ``out`` (None: all of its sample) and compare them.

    ``moved``: the run's ``data``, ``corpus``, ``index`` or ``base_url`` where they moved (as for
    :func:`sleuth.eval.manifest.config_from_manifest`). ``on_start(strategy, qid, i, n)`` is called
    before the i-th of n re-runs (a RAT task can take minutes), ``on_check(check)`` after each.
    """
    out = Path(out)
    if sample is not None and sample < 1:
        raise EvalError("--sample must be at least 1")
    fixed = {"concurrency": 1, "isolate": True, "llm_cache": False}  # one task at a time, each from scratch
    manifest, cfg, dataset = stored_run(out, **moved, **fixed)
    unknown = [s for s in strategies or () if s not in cfg.strategies]
    if unknown:
        raise EvalError(f"{', '.join(unknown)} not among the run's strategies ({', '.join(cfg.strategies)})")
    plan = plan_retrieval(dataset, cfg.setting, index=cfg.index, mode=cfg.search_mode)
    want = (manifest.get("settings") or {}).get("index") or {}
    now = plan.describe()
    if (now.get("setting"), now.get("key")) != (want.get("setting"), want.get("key")):  # content, not paths
        raise EvalError(
            f"the index built now ({now.get('source')}, key {now.get('key')}) is not the run's "
            f"({want.get('source')}, key {want.get('key')}); pass the run's --corpus or --index"
        )

    items_by_id = {it.id: it for _, it, _ in build_tasks(dataset, cfg.strategies[:1], cfg.gap)}
    asked = [r for r in read_records(out) if r["strategy"] in (strategies or [r["strategy"]])]
    asked = [r for r in asked if not qids or str(r["qid"]) in qids]
    pool = [r for r in asked if str(r["qid"]) in items_by_id]
    left_out = {"not in the run's sample": len(asked) - len(pool)} if len(asked) > len(pool) else {}
    chosen = pool if sample is None or sample >= len(pool) else random.Random(seed).sample(pool, sample)

    code = code_state(cfg)
    running = commit_label(code["commit"], code["dirty"])
    other = Counter(str(r.get("commit") or "an earlier version") for r in chosen if r.get("commit") != running)
    made = ", ".join(f"{n} by {c}" for c, n in sorted(other.items()))
    cached = sum(1 for r in chosen if int((r.get("scores") or {}).get("cached_llm_calls") or 0))
    warnings = [
        (
            not manifest.get("isolated_tasks", False),
            "the run did not isolate its tasks (concurrency > 1 or --no-isolate): its answers could depend "
            "on the tasks before them, so differences are expected",
        ),
        (other, f"of the chosen records {made}, not by the running code ({running}): a difference may be the code's"),
        (
            cached,
            f"{cached} of the chosen records took replies from Sleuth's response cache when they were made, so "
            "those replies may come from an earlier run with other settings (run with --no-llm-cache to avoid it)",
        ),
    ]
    report = Verification(str(out), len(pool), left_out, warnings=[w for due, w in warnings if due], commit=running)
    if not chosen:
        return report
    plan.prepare()
    task_cfg = worker_config(cfg, plan)
    for i, rec in enumerate(chosen, 1):
        if on_start is not None:
            on_start(rec["strategy"], str(rec["qid"]), i, len(chosen))
        item = items_by_id[str(rec["qid"])]
        check = _compare(rec, run_task({"strategy": rec["strategy"], "item": item, "config": task_cfg}), item)
        report.checks.append(check)
        if on_check is not None:
            on_check(check)
    return report
