"""Check that a run directory's records are what its command produces: ``sleuth eval verify DIR``.

A committed comparison claims that re-running the command in ``run.json`` gives the same
answers (greedy decoding, the same model file and index, isolated tasks). ``report`` only
shows that the report is a function of the JSONL; this module re-runs a sample of the
records themselves and compares them with what the code produces now:

* the settings come from ``run.json`` (the data file must still hash the same, the
  rebuilt index must have the same content key and the sampled question ids must match);
* only records made by the running code (same fingerprint) for the question as it is
  worded now are compared: other records could legitimately differ;
* each chosen (strategy, question) task runs again with the run's own task config, with
  Sleuth's response cache off (a cached reply proves nothing) and from an empty KV cache;
* the new result is compared with the record step by step: every LLM completion and every
  search (query and passage ids), then the answer and finish reason; the first difference
  is reported.

Nothing in the run directory is written.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sleuth.eval.corpus import plan_retrieval, search_mode
from sleuth.eval.datasets import load_dataset
from sleuth.eval.metrics import score
from sleuth.eval.replay import Replay
from sleuth.eval.rundir import OTHER_CODE
from sleuth.eval.runner import (
    EvalConfig,
    EvalError,
    build_tasks,
    code_fingerprints,
    run_task,
    stale_reason,
    worker_config,
)
from sleuth.eval.store import MANIFEST, primary_score, read_manifest, read_records
from sleuth.llm.models import file_sha256

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
    score_then: float | None = None  # the record's primary score, and the new result's (None: no result)
    score_now: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Verification:
    run_dir: str
    candidates: int  # records that could be compared (current code, current wording)
    not_comparable: dict[str, int]  # reason -> count of records left out
    checks: list[Check] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    code: dict[str, str] = field(default_factory=dict)  # the running code's fingerprint of each strategy

    @property
    def ok(self) -> bool:
        return all(c.verdict == SAME for c in self.checks)

    def score_changes(self) -> dict[str, str]:
        """Per strategy with a differing record, in words: how many differ, how the scored ones move
        the strategy's mean primary score over its checked records, and how many could not be scored."""
        out: dict[str, str] = {}
        for name in dict.fromkeys(c.strategy for c in self.checks):
            mine = [c for c in self.checks if c.strategy == name]
            differ = [c for c in mine if c.verdict == DIFFERS]
            if not differ:
                continue
            moves = [c.score_now - c.score_then for c in differ if c.score_now is not None and c.score_then is not None]
            delta, up, down = sum(moves), sum(m > 0 for m in moves), sum(m < 0 for m in moves)
            text = (
                f"{len(differ)} of {len(mine)} records differ; mean score {delta / len(mine):+.4f} over the {len(mine)} "
                f"({up} up, {down} down, {len(moves) - up - down} level)"
            )
            if len(moves) < len(differ):
                text += f"; {len(differ) - len(moves)} cannot be scored without the model"
            out[name] = text
        return out

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ok"] = self.ok
        return d


def config_from_manifest(
    manifest: Mapping[str, Any],
    out: str | Path,
    *,
    data: str | Path | None = None,
    corpus: str | Path | None = None,
    index: str | None = None,
    base_url: str | None = None,
) -> EvalConfig:
    """The :class:`EvalConfig` that a run's ``run.json`` records (machine-specific parts overridable)."""
    s = manifest.get("settings") or {}
    model = s.get("model")
    return EvalConfig(
        data=str(data if data is not None else (manifest.get("data") or {}).get("path", "")),
        out=str(out),
        format=s.get("format"),
        setting=s.get("setting"),
        strategies=list(s.get("strategies") or []),
        limit=s.get("limit"),
        seed=s.get("seed"),
        k=int(s.get("k") or 5),
        max_steps=s.get("max_steps"),
        max_tokens=s.get("max_tokens"),
        model=None if model in (None, "default") else str(model),
        base_url=base_url,
        index=index,
        corpus=str(corpus) if corpus is not None else None,
        search_mode=search_mode(None, s),
        gap=bool(s.get("gap")),
        strategy_options=dict(s.get("strategy_options") or {}),
        concurrency=1,
        isolate=True,
        llm_cache=False,
    )


def steps_of(result: Mapping[str, Any] | None) -> list[tuple[str, Any]]:
    """The comparable steps of a result's trace: LLM completions and searches, in order."""
    steps: list[tuple[str, Any]] = []
    for ev in (result or {}).get("trace") or []:
        d = ev.get("data") or {}
        if ev.get("kind") == "llm":
            steps.append(("llm", (d.get("step", ""), d.get("completion", ""))))
        elif ev.get("kind") == "search":
            ids = [p.get("id") for p in d.get("passages") or []]
            steps.append(("search", (d.get("query", ""), ids)))
    return steps


def _clip(text: Any, n: int = 90) -> str:
    t = " ".join(str(text).split())
    return t if len(t) <= n else t[: n - 1] + "…"


def first_difference(then: Mapping[str, Any] | None, now: Mapping[str, Any] | None) -> tuple[str, int]:
    """The first way ``now`` differs from ``then`` ("" when none) and how many steps were compared."""
    a, b = steps_of(then), steps_of(now)
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x == y:
            continue
        n = i + 1
        if x[0] != y[0]:
            return f"step {n}: then {x[0]}, now {y[0]}", n
        if x[0] == "llm":
            label = f"LLM call at step {n} ({x[1][0] or 'unnamed'})"
            if x[1][0] != y[1][0]:
                return f"{label}: then step {x[1][0]!r}, now {y[1][0]!r}", n
            return f"{label}: then {_clip(x[1][1])!r}, now {_clip(y[1][1])!r}", n
        if x[1][0] != y[1][0]:
            return f"search at step {n}: then {_clip(x[1][0])!r}, now {_clip(y[1][0])!r}", n
        return f"search at step {n} ({_clip(x[1][0], 60)!r}): other passages {x[1][1]} then, {y[1][1]} now", n
    if len(a) != len(b):
        return f"then {len(a)} steps, now {len(b)}", min(len(a), len(b))
    ta, tb = then or {}, now or {}
    for key in ("answer", "short_answer", "finish_reason"):
        if ta.get(key) != tb.get(key):
            return f"{key}: then {_clip(ta.get(key))!r}, now {_clip(tb.get(key))!r}", len(a)
    return "", len(a)


def _compare(rec: Mapping[str, Any], fresh: Mapping[str, Any], parted: str = "") -> Check:
    then, now = rec.get("result"), fresh.get("result")
    if parted:  # a replay whose replies stopped answering the code's calls: that is the difference
        steps = len(steps_of(then))
        diff = f"the replay parted at {parted}; only the model can say what it answers now"
    elif then is None or now is None:  # a failure on either side: compare status and reason
        diff = ""
        if (rec.get("status"), rec.get("reason")) != (fresh.get("status"), fresh.get("reason")):
            diff = f"then {rec.get('status')} ({rec.get('reason')}), now {fresh.get('status')} ({fresh.get('reason')})"
            if fresh.get("error"):
                diff += f": {_clip(fresh['error'], 160)}"
        steps = 0
    else:
        diff, steps = first_difference(then, now)
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
    )


def verify_run(
    out: str | Path,
    *,
    sample: int | None = 3,
    seed: int = 0,
    strategies: Sequence[str] | None = None,
    qids: Sequence[str] | None = None,
    data: str | Path | None = None,
    corpus: str | Path | None = None,
    index: str | None = None,
    base_url: str | None = None,
    replay: bool = False,
    other_code: bool = False,
    from_code: str | None = None,
    on_check: Callable[[Check], None] | None = None,
    on_start: Callable[[str, str, int, int], None] | None = None,
) -> Verification:
    """Re-run ``sample`` records of the run in ``out`` (None: all that qualify) and compare them.

    With ``replay`` no model runs: each record's own replies are served to the running code
    (:mod:`sleuth.eval.replay`), which finds the records a change the fingerprint cannot see
    would answer differently; a record whose replies no longer answer the code's calls differs
    with where the replay parted. ``on_start(strategy, qid, i, n)`` is called before the i-th of
    n re-runs (a RAT task can take minutes), ``on_check(check)`` after each.  With ``other_code``
    the records compared are those another fingerprint made (for the question as it is worded
    now) instead: what :mod:`sleuth.eval.relabel` replays; ``from_code`` keeps only the records of
    that fingerprint.
    """
    out = Path(out)
    if sample is not None and sample < 1:
        raise EvalError("--sample must be at least 1")
    manifest = read_manifest(out)
    if manifest is None:
        raise EvalError(f"{out} has no {MANIFEST}: nothing says how its records were made")
    cfg = config_from_manifest(manifest, out, data=data, corpus=corpus, index=index, base_url=base_url)
    unknown = [s for s in strategies or () if s not in cfg.strategies]
    if unknown:
        raise EvalError(f"{', '.join(unknown)} not among the run's strategies ({', '.join(cfg.strategies)})")
    path = Path(cfg.data)
    if not path.is_file():
        raise EvalError(f"the data file {path} named in {out / MANIFEST} is missing; pass --data PATH")
    if file_sha256(path) != (manifest.get("data") or {}).get("sha256"):
        raise EvalError(f"{path} is not the file the run used (its sha256 differs)")
    dataset = load_dataset(path, cfg.format, cfg.corpus).sample(cfg.limit, cfg.seed)
    if [it.id for it in dataset.items] != list((manifest.get("data") or {}).get("question_ids") or []):
        raise EvalError("the sample drawn now is not the run's sample (question ids differ)")
    plan = plan_retrieval(dataset, cfg.setting, index=cfg.index, mode=cfg.search_mode)
    want = (manifest.get("settings") or {}).get("index") or {}
    now = plan.describe()
    if (now.get("setting"), now.get("key")) != (want.get("setting"), want.get("key")):  # content, not paths
        raise EvalError(
            f"the index built now ({now.get('source')}, key {now.get('key')}) is not the run's "
            f"({want.get('source')}, key {want.get('key')}); pass the run's --corpus or --index"
        )

    items_by_id = {it.id: (it, meta) for _, it, meta in build_tasks(dataset, cfg.strategies[:1], cfg.gap)}
    lang = manifest.get("code_lang")  # the language the run's records were fingerprinted in (absent: combined)
    code = code_fingerprints(cfg.strategies, lang)
    skipped: Counter[str] = Counter()
    pool: list[dict[str, Any]] = []
    for rec in read_records(out):
        name, qid = rec["strategy"], str(rec["qid"])
        if (strategies and name not in strategies) or (qids and qid not in qids):
            continue
        if from_code is not None and rec.get("code") != from_code:
            continue
        why = "not in the run's sample" if qid not in items_by_id else stale_reason(rec, code, items_by_id)
        if other_code and why in ("", OTHER_CODE):  # made by other code, for the question as it is worded now?
            why = stale_reason(rec, {**code, name: rec.get("code")}, items_by_id) if why else "made by the running code"
        if why:
            skipped[why] += 1
        else:
            pool.append(rec)
    chosen = pool if sample is None or sample >= len(pool) else random.Random(seed).sample(pool, sample)

    report = Verification(str(out), len(pool), dict(skipped), code=dict(code))
    if not manifest.get("isolated_tasks", False):
        report.warnings.append(
            "the run did not isolate its tasks (concurrency > 1 or --no-isolate): its answers could depend "
            "on the tasks before them, so differences are expected"
        )
    cached = sum(1 for r in chosen if int((r.get("scores") or {}).get("cached_llm_calls") or 0))
    if cached and not replay:
        report.warnings.append(
            f"{cached} of the chosen records took replies from Sleuth's response cache when they were made, "
            "so those replies may come from an earlier run with other settings (run with --no-llm-cache to avoid it)"
        )
    if not chosen:
        return report
    if replay and plan.setting == "open":
        plan.mode = "lexical"  # only to look passages up by id: the same corpus and chunks, no embedding model
    plan.prepare()
    task_cfg = worker_config(cfg, plan, lang)
    for i, rec in enumerate(chosen, 1):
        if on_start is not None:
            on_start(rec["strategy"], str(rec["qid"]), i, len(chosen))
        item = items_by_id[str(rec["qid"])][0]
        task = {"strategy": rec["strategy"], "item": item.to_dict(), "config": task_cfg}
        fresh = run_task(task, replay=Replay(rec) if replay else None)
        check = _compare(rec, fresh, parted=fresh.get("replay_parted", ""))
        if check.verdict == DIFFERS and fresh.get("result") is not None and not fresh.get("replay_parted"):
            check.score_then = primary_score(rec)
            check.score_now = primary_score({"scores": score(item, fresh["result"])})
        report.checks.append(check)
        if on_check is not None:
            on_check(check)
    return report
