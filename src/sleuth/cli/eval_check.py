"""``sleuth eval verify DIR`` and ``sleuth eval relabel DIR``: a run's stored records against the running code."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from sleuth.cli.common import UserError, comma_list, console, console_err
from sleuth.cli.eval import eval_app

# the options both commands take: which records, and where the run's inputs are when they moved
_STRATEGIES = typer.Option(None, "--strategies", help="Only records of these strategies (comma-separated).")
_DATA = typer.Option(None, "--data", help="The run's data file, when it is not where run.json says.")
_CORPUS = typer.Option(None, "--corpus", help="The corpus file the run used (if it passed --corpus).")
_INDEX = typer.Option(None, "--index", help="The index the run used (if it passed --index).")


@eval_app.command("verify")
def verify_cmd(
    run_dir: Path = typer.Argument(
        ..., help="A run directory holding run.json and results.jsonl (or results.jsonl.gz)."
    ),
    sample: int = typer.Option(3, "--sample", "-n", help="How many records to run again (drawn with --seed)."),
    all_records: bool = typer.Option(False, "--all", help="Run every comparable record again, not a sample."),
    seed: int = typer.Option(0, "--seed", help="Seed of the sample."),
    strategies: str = _STRATEGIES,
    qids: str = typer.Option(None, "--qid", help="Only records of these question ids (comma-separated)."),
    data: Path = _DATA,
    corpus: Path = _CORPUS,
    index: str = _INDEX,
    base_url: str = typer.Option(None, "--base-url", help="The OpenAI-compatible server the run used."),
    replay: bool = typer.Option(
        False,
        "--replay",
        help="No model: serve each record's own replies to the running code (seconds a record; use with --all) "
        "to find the records a change the fingerprint cannot see answers differently.",
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the verification as JSON."),
) -> None:
    """Run a sample of DIR's records again and compare them step by step (writes nothing to DIR).

    Exit code 0 when every re-run record is the same as the stored one, 1 when one differs.
    """
    from sleuth.eval.datasets import DatasetError
    from sleuth.eval.runner import EvalError
    from sleuth.eval.verify import SAME, Check, verify_run

    # progress goes to stderr even with --json (stdout then holds only the JSON document)
    def starting(strategy: str, qid: str, i: int, n: int) -> None:
        if not replay:  # a replay takes a fraction of a second a record
            console_err.print(f"[dim]({i}/{n}) running {strategy} {qid} again …[/]", highlight=False)

    def show(c: Check) -> None:
        if replay and c.verdict == SAME:  # a replay of a whole run lists only what changed
            return
        mark = "[green]same[/]" if c.verdict == SAME else "[red]differs[/]"
        console_err.print(
            f"{mark}  {c.strategy} {c.qid}: {c.steps} steps, {c.seconds_then:.0f} s then, {c.seconds_now:.0f} s now"
            + (f"\n    first difference: {c.difference}" if c.difference else "")
            + (f"\n    score then {c.score_then:.3f}, now {c.score_now:.3f}" if c.score_now is not None else ""),
            highlight=False,
        )

    def split(v: str | None) -> list[str] | None:
        return comma_list(v) if v else None

    from sleuth.eval.store import results_files

    if not results_files(run_dir):
        raise UserError(f"{run_dir} holds no results.jsonl or results.jsonl.gz")
    try:
        ver = verify_run(
            run_dir,
            sample=None if all_records else sample,
            seed=seed,
            strategies=split(strategies),
            qids=split(qids),
            data=data,
            corpus=corpus,
            index=index,
            base_url=base_url,
            replay=replay,
            on_check=show,
            on_start=starting,
        )
    except (DatasetError, EvalError) as e:
        raise UserError(str(e)) from e
    left = ", ".join(f"{n} {why}" for why, n in sorted(ver.not_comparable.items()))
    if not ver.checks:
        raise UserError(
            f"no record of {run_dir} can be run again and compared" + (f" (left out: {left})" if left else "")
        )
    if json_out:
        console.print_json(json.dumps(ver.to_dict(), ensure_ascii=False))
    else:
        for w in ver.warnings:
            console_err.print(f"[yellow]warning: {w}[/]")
        same = sum(c.verdict == SAME for c in ver.checks)
        console.print(
            f"{same} of {len(ver.checks)} {'replayed' if replay else 're-run'} records are the same as stored "
            f"(every LLM completion, search, answer and finish reason); "
            f"drawn from {ver.candidates} comparable records" + (f"; left out: {left}" if left else ""),
            highlight=False,
        )
        for name, change in ver.score_changes().items():
            console.print(f"  {name}: {change}", highlight=False)
    if not ver.ok:
        raise typer.Exit(1)


@eval_app.command("relabel")
def relabel_cmd(
    run_dir: Path = typer.Argument(
        ..., help="A run directory holding run.json and results.jsonl (or results.jsonl.gz)."
    ),
    strategies: str = _STRATEGIES,
    from_code: str = typer.Option(
        None, "--from", help="Only records of this fingerprint (the code before the change)."
    ),
    by_length: bool = typer.Option(
        False,
        "--by-length",
        help="Also relabel records made before prompts were recorded by digest, whose replay compares each "
        "prompt by its length only (for a change known to leave the prompt templates' text alone).",
    ),
    data: Path = _DATA,
    corpus: Path = _CORPUS,
    index: str = _INDEX,
) -> None:
    """Give the running code's fingerprint to DIR's stale records whose replay (no model) is the same
    step by step; the others stay stale for `sleuth eval ... --redo-stale`."""
    from sleuth.eval.datasets import DatasetError
    from sleuth.eval.relabel import relabel_run
    from sleuth.eval.runner import EvalError
    from sleuth.eval.store import RunDirBusy, results_files

    if not results_files(run_dir):
        raise UserError(f"{run_dir} holds no results.jsonl or results.jsonl.gz")
    try:
        done = relabel_run(
            run_dir,
            strategies=comma_list(strategies) if strategies else None,
            from_code=from_code,
            by_length=by_length,
            data=data,
            corpus=corpus,
            index=index,
        )
    except (DatasetError, EvalError, RunDirBusy) as e:
        raise UserError(str(e)) from e
    if not done.verification.checks:
        which = f"of fingerprint {from_code}" if from_code else "of another code version"
        console.print(f"no record {which} to replay: nothing to relabel")
        return
    for name in dict.fromkeys(c.strategy for c in done.verification.checks):
        n = sum(c.strategy == name for c in done.verification.checks)
        line = f"{name}: {done.relabelled.get(name, 0)} of {n} stale records relabelled (replay the same)"
        if done.differ.get(name):
            line += f"; {done.differ[name]} differ (run them again: --redo-stale)"
        if done.length_only.get(name):
            line += f"; {done.length_only[name]} the same by prompt length only, left stale (see --by-length)"
        console.print(line, highlight=False, soft_wrap=True)
