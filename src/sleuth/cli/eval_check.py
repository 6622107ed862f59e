"""``sleuth eval verify DIR``: a sample of a run's stored records run again and compared step by step."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from sleuth.cli.common import UserError, comma_list, console, console_err
from sleuth.cli.eval import eval_app


@eval_app.command("verify")
def verify_cmd(
    run_dir: Path = typer.Argument(
        ..., help="A run directory holding run.json and results.jsonl (or results.jsonl.gz)."
    ),
    sample: int = typer.Option(3, "--sample", "-n", help="How many records to run again (drawn with --seed)."),
    all_records: bool = typer.Option(False, "--all", help="Run every comparable record again, not a sample."),
    seed: int = typer.Option(0, "--seed", help="Seed of the sample."),
    strategies: str = typer.Option(None, "--strategies", help="Only records of these strategies (comma-separated)."),
    qids: str = typer.Option(None, "--qid", help="Only records of these question ids (comma-separated)."),
    data: Path = typer.Option(None, "--data", help="The run's data file, when it is not where run.json says."),
    corpus: Path = typer.Option(None, "--corpus", help="The corpus file the run used (if it passed --corpus)."),
    index: str = typer.Option(None, "--index", help="The index the run used (if it passed --index)."),
    base_url: str = typer.Option(None, "--base-url", help="The OpenAI-compatible server the run used."),
    json_out: bool = typer.Option(False, "--json", help="Print the verification as JSON."),
) -> None:
    """Run a sample of DIR's records again and compare them step by step (writes nothing to DIR).

    Exit code 0 when every re-run record is the same as the stored one, 1 when one differs.
    """
    from sleuth.eval.runner import EvalError
    from sleuth.eval.verify import SAME, Check, verify_run

    # progress goes to stderr even with --json (stdout then holds only the JSON document)
    def starting(strategy: str, qid: str, i: int, n: int) -> None:
        console_err.print(f"[dim]({i}/{n}) running {strategy} {qid} again …[/]", highlight=False)

    def show(c: Check) -> None:
        mark = "[green]same[/]" if c.verdict == SAME else "[red]differs[/]"
        console_err.print(
            f"{mark}  {c.strategy} {c.qid} (made by {c.commit or 'an unrecorded commit'}): {c.steps} steps, {c.seconds_then:.0f} s then, {c.seconds_now:.0f} s now"
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
            on_check=show,
            on_start=starting,
        )
    except EvalError as e:
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
            f"{same} of {len(ver.checks)} re-run records are the same as stored "
            f"(every LLM completion, search, answer and finish reason); "
            f"drawn from {ver.candidates} comparable records" + (f"; left out: {left}" if left else ""),
            highlight=False,
        )
        for name, change in ver.score_changes().items():
            console.print(f"  {name}: {change}", highlight=False)
    if not ver.ok:
        raise typer.Exit(1)
