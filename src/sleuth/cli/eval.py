"""``sleuth eval``: run strategies side by side on a benchmark; ``sleuth eval report DIR``."""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import typer

from sleuth.cli.common import UserError, app, comma_list, console, console_err

eval_app = typer.Typer(
    help="Evaluate strategies on a dataset (resumable; writes DIR/results.jsonl and DIR/report.md).",
    no_args_is_help=True,
    invoke_without_command=True,
)
app.add_typer(eval_app, name="eval")


_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?")


def parse_duration(text: str, option: str = "--time-limit") -> float:
    """Seconds in ``"2h"``, ``"90m"``, ``"1h30m"``, ``"45s"``, ``"1.5h"``; a bare number has no unit and is refused."""
    t = text.strip().lower().replace(" ", "")
    m = _DURATION.fullmatch(t)
    if not t or m is None or not any(m.groups()):
        raise UserError(f"{option} {text!r}: give a duration with its unit, e.g. 90m, 2h, 1h30m or 45s")
    h, mi, se = (float(g) if g else 0.0 for g in m.groups())
    seconds = h * 3600 + mi * 60 + se
    if seconds <= 0:
        raise UserError(f"{option} {text!r} must be longer than 0")
    return seconds


@eval_app.callback()
def eval_cmd(
    ctx: typer.Context,
    data: Path = typer.Option(None, "--data", help="Questions file (any supported format)."),
    fmt: str = typer.Option(
        "auto",
        "--format",
        help="hotpotqa, musique, timeqa, mmlu, strategyqa, flashrag, policy_zh, rgb_zh, jsonl or auto.",
    ),
    setting: str = typer.Option(
        None,
        "--setting",
        help="open (pooled index), distractor (each question's own "
        "paragraphs) or closed (no retrieval). Default: open when a corpus exists.",
    ),
    strategies: str = typer.Option(
        "direct", "--strategies", help="Comma-separated names (or module:Class); self-ask[mode=paper]: own options."
    ),
    limit: int = typer.Option(None, "--limit", help="Evaluate a fixed sample of N questions."),
    seed: int = typer.Option(0, "--seed", help="Sampling seed (the sample is fixed by it)."),
    concurrency: int = typer.Option(1, "--concurrency", "-c", help="Questions in flight at once."),
    out: Path = typer.Option(None, "--out", help="Run directory (created; an existing one is resumed)."),
    model: str = typer.Option(None, "--model", help="Model name (default: the configured / embedded default)."),
    base_url: str = typer.Option(None, "--base-url", help="OpenAI-compatible server URL."),
    k: int = typer.Option(5, "--k", help="Passages per search."),
    max_steps: int = typer.Option(None, "--max-steps", help="Step limit passed to the strategies."),
    max_tokens: int = typer.Option(None, "--max-tokens", help="Max tokens per LLM call."),
    index: str = typer.Option(None, "--index", help="Use this index / retriever spec for the open setting."),
    corpus: Path = typer.Option(
        None,
        "--corpus",
        help="Corpus file for the open setting (default: the dataset's own paragraphs, or its companion corpus file).",
    ),
    search_mode: str = typer.Option(
        None,
        "--search-mode",
        help="How the open setting searches: lexical (BM25), dense (vectors) or hybrid (both, fused). Default: "
        "hybrid (the pool is embedded once, cached; a pool over 4M characters: lexical); a resumed run keeps its "
        "mode; an --index its own default.",
    ),
    gap: bool = typer.Option(False, "--gap", help="Also answer every decomposition hop (compositionality gap)."),
    split: str = typer.Option(
        None,
        "--split",
        help="MuSiQue only: its tuning or reporting half (sleuth.eval.splits; default: the whole file).",
    ),
    opt: list[str] = typer.Option(
        [],
        "--opt",
        help="A strategy option key=value, repeatable, read as `sleuth ask --opt` reads it; every strategy of the "
        "run gets the options it has, and one that none of them has is refused before anything runs.",
    ),
    prices: str = typer.Option(None, "--prices", help="USD per 1M tokens: PROMPT,COMPLETION[,CACHED]."),
    executor: str = typer.Option("local", "--executor", help="local, or a registered scheme like dask://ADDR."),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="Run failed questions again on resume."),
    rerun: bool = typer.Option(
        False,
        "--rerun",
        help="Make every record of the run again with the running code (a re-run under way goes on; the "
        "response cache answers every prompt that did not change). Also: sleuth eval rerun DIR.",
    ),
    only: str = typer.Option(
        None,
        "--only",
        help="Run only these of --strategies in this sitting (comma-separated); the run, its manifest and its "
        "report keep all of them, and the same command without --only runs the rest.",
    ),
    isolate: bool = typer.Option(
        True,
        "--isolate/--no-isolate",
        help="Wipe the embedded model's KV cache before each task (one task at a time), so an answer does not "
        "depend on the tasks run before it; --no-isolate lets tasks reuse each other's prompt prefixes (faster).",
    ),
    no_llm_cache: bool = typer.Option(False, "--no-llm-cache", help="Bypass the LLM response cache (fresh timings)."),
    time_limit: str = typer.Option(
        None,
        "--time-limit",
        help="A sitting: after this long (90m, 2h, 1h30m) start no new question, finish the one in progress "
        "(with its hops) and stop; the same command continues.",
    ),
    no_progress: bool = typer.Option(False, "--no-progress", help="No progress bar."),
    json_out: bool = typer.Option(False, "--json", help="Print the run summary as JSON."),
) -> None:
    """Run strategies over a dataset: `sleuth eval --data PATH --strategies direct,rag --out DIR`."""
    if ctx.invoked_subcommand is not None:
        return
    if data is None or out is None:
        raise UserError("sleuth eval needs --data PATH and --out DIR (or: sleuth eval report DIR)")
    from sleuth.cli.common import require_llm
    from sleuth.extras import missing, require

    require("eval", "sleuth eval (its report's charts)")
    if executor.startswith("dask://"):
        require("cluster", "--executor dask://")
    if setting in (None, "open") and index is None and search_mode in (None, "dense", "hybrid") and missing("dense"):
        require("dense", f"--search-mode {search_mode or 'hybrid'} (the default; --search-mode lexical needs none)")
    require_llm(model, base_url, "sleuth eval")
    from sleuth.eval.runner import EvalConfig, run_eval
    from sleuth.strategies.options import OptionsError, parse_opts

    try:
        strategy_options = parse_opts(opt)
    except OptionsError as e:
        raise UserError(str(e)) from None
    cfg = EvalConfig(
        data=str(data),
        out=str(out),
        format=None if fmt == "auto" else fmt,
        setting=setting,
        strategies=comma_list(strategies),
        limit=limit,
        seed=seed,
        k=k,
        max_steps=max_steps,
        max_tokens=max_tokens,
        model=model,
        base_url=base_url,
        index=index,
        corpus=str(corpus) if corpus else None,
        search_mode=search_mode,
        gap=gap,
        split=split,
        strategy_options=strategy_options,
        prices=prices,
        concurrency=concurrency,
        executor=executor,
        retry_failed=retry_failed,
        rerun=rerun,
        only=comma_list(only) if only is not None else None,
        isolate=isolate,
        llm_cache=not no_llm_cache,
        time_limit=parse_duration(time_limit) if time_limit is not None else None,
        command="sleuth eval " + " ".join(shlex.quote(a) for a in sys.argv[sys.argv.index("eval") + 1 :])
        if "eval" in sys.argv
        else "",
    )
    try:
        summary = run_eval(cfg, progress=not no_progress, console=console_err)
    except ValueError as e:  # an EvalError, or e.g. an unknown executor scheme
        raise UserError(str(e)) from e
    _say(summary, json_out, "run the same command")


def _say(summary: Any, json_out: bool, again: str) -> None:
    if json_out:
        console.print_json(json.dumps(summary.to_dict()))
        return
    console.print(
        f"{summary.ran} run, {summary.skipped} already done, {summary.failed} failed "
        f"in {summary.seconds:.1f} s -> {Path(summary.out) / 'report.md'}"
    )
    if summary.stopped_before is not None:
        left = summary.total - summary.skipped - summary.ran
        console.print(
            f"stopped at the time limit before question {summary.stopped_before}: {left} of {summary.total} "
            f"tasks left; {again} to continue",
            highlight=False,
        )


@eval_app.command("rerun")
def rerun_cmd(
    run_dir: Path = typer.Argument(..., help="A run directory holding run.json."),
    data: Path = typer.Option(None, "--data", help="The run's data file, when it is not where run.json says."),
    corpus: Path = typer.Option(None, "--corpus", help="The corpus file the run used (if it passed --corpus)."),
    index: str = typer.Option(None, "--index", help="The index the run used (if it passed --index)."),
    base_url: str = typer.Option(
        None, "--base-url", help="The OpenAI-compatible server to run on (default: the one run.json names)."
    ),
    no_llm_cache: bool = typer.Option(False, "--no-llm-cache", help="Bypass the LLM response cache (fresh timings)."),
    time_limit: str = typer.Option(
        None, "--time-limit", help="A sitting: stop between questions after this long; run the command again to go on."
    ),
    no_progress: bool = typer.Option(False, "--no-progress", help="No progress bar."),
    json_out: bool = typer.Option(False, "--json", help="Print the run summary as JSON."),
) -> None:
    """Make every record of DIR again with the running code, as DIR's run.json says; each new record
    replaces its old one. The response cache answers every prompt that did not change, so only what
    a change touched costs model time; a record re-made wholly from the cache keeps its old timings."""
    from sleuth.eval.runner import rerun_eval

    try:
        summary = rerun_eval(
            run_dir,
            data=str(data) if data else None,
            corpus=str(corpus) if corpus else None,
            index=index,
            base_url=base_url,
            llm_cache=False if no_llm_cache else None,
            time_limit=parse_duration(time_limit) if time_limit is not None else None,
            progress=not no_progress,
            console=console_err,
        )
    except ValueError as e:  # an EvalError, or e.g. an unknown executor scheme
        raise UserError(str(e)) from e
    _say(summary, json_out, f"sleuth eval rerun {run_dir}")


@eval_app.command("report")
def report_cmd(
    run_dir: Path = typer.Argument(
        ..., help="A run directory holding results.jsonl (or the committed results.jsonl.gz)."
    ),
    rescore: bool = typer.Option(
        False, "--rescore", help="First recompute every record's scores against the data file named in run.json."
    ),
) -> None:
    """Regenerate report.md and the plots from DIR's results (results.jsonl, or the committed .gz) alone."""
    from sleuth.extras import require

    require("eval", "sleuth eval report (its charts)")
    from sleuth.eval.report import write_report
    from sleuth.eval.store import results_files

    if not results_files(run_dir):
        raise UserError(f"{run_dir} holds no results.jsonl or results.jsonl.gz")
    if rescore:
        from sleuth.eval.runner import EvalError, rescore_run

        try:
            n = rescore_run(run_dir)
        except EvalError as e:
            raise UserError(str(e)) from e
        console.print(f"rescored {n} records")
    path = write_report(run_dir)
    console.print(f"wrote {path}")


@eval_app.command("compact")
def compact_cmd(
    run_dir: Path = typer.Argument(
        ..., help="A run directory holding results.jsonl (or the committed results.jsonl.gz)."
    ),
) -> None:
    """Compress DIR's results for committing: the newest record of each task into results.jsonl.gz
    (report, verify, resume and rerun read it as they read results.jsonl)."""
    from sleuth.eval.store import RunDirBusy, compact_run, results_files

    if not results_files(run_dir):
        raise UserError(f"{run_dir} holds no results.jsonl or results.jsonl.gz")
    try:
        kept, moved = compact_run(run_dir)
    except RunDirBusy as e:
        raise UserError(str(e)) from e
    console.print(f"{kept} records in {run_dir / 'results.jsonl.gz'}; {moved} older ones of the same tasks dropped")


@eval_app.command("tune")
def tune_cmd(
    strategies: str = typer.Option(..., "--strategies", help="The strategies being changed (comma-separated)."),
    baseline: str = typer.Option("rag", "--baseline", help="The strategy every difference is measured against."),
    budget: str = typer.Option("60m", "--budget", help="Model time the slice is sized to (60m, 1h, 2m)."),
    questions: int = typer.Option(
        None, "--questions", help="Questions per dataset (instead of sizing the slice to --budget)."
    ),
    seed: int = typer.Option(0, "--seed", help="The slice's sampling seed (the slice is fixed by it)."),
    out: Path = typer.Option(Path("runs/tune"), "--out", help="Folder of the run directories, one per dataset."),
    model: str = typer.Option(None, "--model", help="Model name (default: the configured / embedded default)."),
    base_url: str = typer.Option(None, "--base-url", help="OpenAI-compatible server URL."),
    k: int = typer.Option(5, "--k", help="Passages per search."),
    data_root: Path = typer.Option(
        None, "--data-root", help="The data folder (default: $SLEUTH_DATA_DIR or shared/data)."
    ),
    published: Path = typer.Option(
        None, "--published", help="The published runs whose recorded seconds size the budget (default: docs/results)."
    ),
    no_llm_cache: bool = typer.Option(False, "--no-llm-cache", help="Bypass the LLM response cache."),
    no_progress: bool = typer.Option(False, "--no-progress", help="No progress bar."),
) -> None:
    """The quality loop: the changed strategies and a baseline on a fixed tuning slice, with paired
    differences: `sleuth eval tune --strategies self-ask,search-o1 --budget 60m`."""
    from sleuth.eval.runner import EvalConfig, EvalError
    from sleuth.eval.tune import comparison_lines, tune

    if questions is not None and questions < 1:
        raise UserError("--questions must be at least 1")
    base = EvalConfig(
        data="",
        out=str(out),
        strategies=comma_list(strategies),
        seed=seed,
        k=k,
        model=model,
        base_url=base_url,
        llm_cache=not no_llm_cache,
        command="sleuth eval tune " + " ".join(shlex.quote(a) for a in sys.argv[sys.argv.index("tune") + 1 :])
        if "tune" in sys.argv
        else "",
    )

    def say(line: str) -> None:
        console.print(line, highlight=False, markup=False, soft_wrap=True)

    try:
        comparisons = tune(
            base,
            baseline=baseline.strip(),
            budget_s=parse_duration(budget, "--budget"),
            per_dataset=questions,
            data_root=data_root,
            published_root=published,
            say=say,
            progress_bar=not no_progress,
            console=console_err,
        )
    except EvalError as e:
        raise UserError(str(e)) from e
    say("")
    say(f"paired differences against {base.strategies[0]} (primary score; 95% paired bootstrap CI):")
    for line in comparison_lines(comparisons):
        say(line)
    say(f"run directories and their report.md: {out}/<dataset>")


@eval_app.command("formats")
def formats_cmd() -> None:
    """List the dataset formats `--format` accepts."""
    from sleuth.eval.datasets import LOADERS

    for name in LOADERS:
        console.print(name)
