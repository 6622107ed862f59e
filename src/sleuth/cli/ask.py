"""``sleuth ask``: answer one question with one strategy, streaming its steps.

    sleuth ask "QUESTION" --strategy self-ask [--index DIR | --corpus FILE]
               [--filter key=value ...] [--model NAME] [--base-url URL]
               [--lang en|zh] [--k 5] [--max-steps N] [--mode default|paper] [--opt key=value ...] [--json]

``--opt`` sets any option of the strategy (see :mod:`sleuth.strategies.options`),
read by :func:`~sleuth.strategies.options.parse_opts` as ``sleuth eval`` reads it;
an unknown one ends the command with the valid ones before the model starts.

The steps stream to stderr while the strategy runs (through the strategy's
listeners; ``--quiet`` drops them); the answer and its citations go to stdout,
so ``sleuth ask ... > answer.txt`` keeps just the answer.  ``--json`` prints the
full result with its trace on stdout and nothing else there.  With no
``--index``/``--corpus``, a strategy that searches uses the bundled quick-start
corpus (``$SLEUTH_DATA_DIR`` or ``../shared/data`` beside the checkout) and
says so.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from sleuth.cli import flags
from sleuth.cli.common import UserError, app, checked, console, console_err, require_llm, rerank_option, source_options
from sleuth.config import settings
from sleuth.strategies.result import FINISHED, REPEAT_LIMIT, STEP_LIMIT, Event
from sleuth.strategies.text import clip

QUICKSTART = Path("quickstart") / "wiki_passages.jsonl"
OK_REASONS = {FINISHED, STEP_LIMIT, REPEAT_LIMIT}


def data_dir() -> Path:
    """``$SLEUTH_DATA_DIR``, else ``shared/data`` beside the checkout."""
    own = settings.data_dir()
    if own is not None:
        return own
    return Path(__file__).resolve().parents[3].parent / "shared" / "data"


def quickstart_corpus() -> Path | None:
    p = data_dir() / QUICKSTART
    return p if p.is_file() else None


def open_source(
    index: Path | None, corpus: Path | None, needs: bool, err: Console, opts: dict[str, Any] | None = None
) -> Any:
    """The retriever for ``--index``/``--corpus``, the quick-start corpus, or None (``opts``: for
    :func:`~sleuth.search.open_retriever`)."""
    if index is not None and corpus is not None:
        raise UserError("give either --index or --corpus, not both")
    spec: Path | None = index or corpus
    if spec is None:
        if not needs:
            return None
        spec = quickstart_corpus()
        if spec is None:
            raise UserError(
                "this strategy searches, but no --index or --corpus was given and the quick-start corpus "
                f"was not found at {data_dir() / QUICKSTART} (set SLEUTH_DATA_DIR)"
            )
        err.print(f"[dim]no --index/--corpus given: using the bundled quick-start corpus {escape(str(spec))}[/]")
    elif not needs:
        err.print("[dim]note: this strategy does not search; the knowledge source is ignored[/]")
        return None
    if index is not None and not index.is_dir():
        raise UserError(f"the index folder {index} does not exist")
    if corpus is not None and not corpus.exists():
        raise UserError(f"the corpus {corpus} does not exist")
    if corpus is not None:
        from sleuth.cli.index import require_readers

        require_readers([corpus])
    from sleuth.search import IndexError_, open_retriever

    try:
        return open_retriever(str(spec), **(opts or {}))
    except IndexError_ as e:  # names the folder and the fix itself
        raise UserError(str(e)) from None
    except ImportError:
        raise  # a missing extra: main() names it
    except Exception as e:
        raise UserError(f"cannot open {spec}: {e}") from None


class StepPrinter:
    """A strategy listener that prints each step as it happens."""

    def __init__(self, out: Console, verbose: bool = False) -> None:
        self.out = out
        self.verbose = verbose

    def __call__(self, ev: Event) -> None:
        d, p = ev.data, self.out.print
        t = f"[dim]{ev.t:6.1f}s[/]"
        if ev.kind == "start":
            mode = f" · mode {d['mode']}" if d.get("mode") else ""
            p(
                f"{t} [bold]{escape(d['strategy'])}[/]{mode} · lang {d['lang']} · filters {escape(json.dumps(d['filters'], ensure_ascii=False))}"
            )
        elif ev.kind == "llm":
            u = d.get("usage", {})
            cached = " cached" if d.get("from_cache") else ""
            p(
                f"{t} [dim]llm {escape(d['step'])}: {u.get('prompt_tokens', 0)}+{u.get('completion_tokens', 0)} tok"
                f" ({u.get('cached_prompt_tokens', 0)} from prompt cache), {ev.duration_s:.1f}s{cached}[/]"
            )
            if self.verbose:
                p("[dim]" + escape(clip(d.get("completion", ""), 400)) + "[/]")
        elif ev.kind == "rewrite":
            dropped = d.get("dropped_turns") or 0
            more = f" [dim]({dropped} older turns left out)[/]" if dropped else ""
            p(f"{t} [bold magenta]follow-up read as[/] {escape(str(d.get('question', '')))}{more}")
        elif ev.kind == "search":
            ids = ", ".join(x["id"] for x in d["passages"][:8])
            p(
                f"{t} [cyan]search[/] ({escape(d['route'])}) {escape(clip(d['query'], 120))} → {len(d['passages'])} passages [dim]{escape(ids)}[/]"
            )
        elif ev.kind == "follow_up":
            extra = (
                " [yellow](repeat)[/]"
                if d.get("repeat_of")
                else " [yellow](restates the question)[/]"
                if d.get("restates_question")
                else ""
            )
            p(f"{t} [bold magenta]follow up[/] {escape(d['question'])}{extra}")
        elif ev.kind == "intermediate_answer":
            src = d.get("source", "")
            style = "green" if src == "search" else "yellow"
            p(f"{t} [{style}]answer ({src})[/] {escape(clip(d['answer'], 200))}")
        elif ev.kind == "step_back":
            fb = " [yellow](fallback)[/]" if d.get("fallback") else ""
            p(f"{t} [bold magenta]step back[/] {escape(d['question'])}{fb}")
        elif ev.kind == "repair" and d.get("name") == "rerank":
            top = ", ".join(f"{x['id']}<{'+'.join(x['found_by'])}>" for x in d["ranking"] if x.get("in_context"))
            p(f"{t} [cyan]repair rerank[/] context: {escape(top)}")
        elif ev.kind == "repair":
            what = d.get("message") or d.get("repeat_of") or d.get("refused") or ""
            p(f"{t} [yellow]repair {escape(str(d.get('name', '')))}[/] {escape(clip(what, 200))}")
        elif ev.kind == "draft" and d.get("stage") == "scaffold":  # Self-Ask, before its final reading pass
            p(f"{t} [bold magenta]scaffold's answer[/] {escape(clip(d.get('short_answer') or '', 120))}")
        elif ev.kind == "draft":
            short = f" · its answer: {escape(clip(d['short_answer'], 120))}" if d.get("short_answer") else ""
            p(f"{t} [bold magenta]draft[/] {len(d.get('paragraphs', []))} paragraphs{short}")
            if self.verbose:
                p("[dim]" + escape(clip(d.get("text", ""), 600)) + "[/]")
        elif ev.kind == "revision":
            if d.get("skipped"):
                p(f"{t} [yellow]revision {d['step']} skipped[/] ({escape(str(d.get('reason', '')))})")
            else:
                changed = sum(
                    1 for ln in d.get("diff", "").splitlines() if ln[:1] in "+-" and ln[:3] not in ("+++", "---")
                )
                p(
                    f"{t} [magenta]revision {d['step']}[/] query {escape(clip(d.get('query', ''), 80))!s} · {changed} lines changed"
                )
        elif ev.kind == "reason_in_documents":
            p(f"{t} [green]facts[/] {escape(clip(d['info'], 240))}")
        elif ev.kind == "note":
            if d.get("type") in ("scaffold", "reasoning") and not self.verbose:
                return
            p(
                f"{t} [yellow]note[/] {escape(str(d.get('type', '')))}: {escape(clip(d.get('message', d.get('text', '')), 200))}"
            )
        elif ev.kind == "error":
            p(f"{t} [bold red]{escape(d['reason'])}[/] {escape(d['message'])}")


def print_result(result: Any, out: Console) -> None:
    out.print(Panel(escape(result.answer or "(no answer)"), title="answer", expand=False))
    if result.short_answer and result.short_answer != result.answer:
        out.print(f"[bold]short answer:[/] {escape(result.short_answer)}")
    if result.citations:
        tab = Table(title="citations", show_lines=False)
        for col in ("id", "title", "section", "version", "found by", "source"):
            tab.add_column(col, overflow="fold")
        for p in result.citations:
            tab.add_row(
                p.id, p.title, p.section, p.version, ", ".join(p.found_by), Path(p.source).name if p.source else ""
            )
        out.print(tab)
    u = result.usage
    out.print(
        f"[dim]finish: {result.finish_reason} · {result.llm_calls} llm calls · {result.searches} searches · "
        f"{u.prompt_tokens} prompt tok ({u.cached_prompt_tokens} cached) + {u.completion_tokens} completion tok · "
        f"{result.elapsed_s:.1f}s · model {escape(result.model)}[/]"
    )


@app.command("ask")
def ask(
    question: str = typer.Argument(..., help="The question (quote it)."),
    strategy: str = typer.Option("self-ask", "--strategy", "-s", help=flags.STRATEGY_HELP),
    index: flags.IndexDir = None,
    corpus: flags.CorpusPath = None,
    filter_: list[str] = typer.Option(
        [], "--filter", "-f", help="Scope: key=value, key>=value, acl=LABEL (repeatable)."
    ),
    model: flags.Model = None,
    base_url: flags.BaseURL = None,
    lang: flags.Lang = "auto",
    k: flags.K = 5,
    max_steps: flags.MaxSteps = 6,
    max_tokens: flags.MaxTokens = None,
    mode: flags.Mode = "default",
    opt: flags.Opts = [],  # noqa: B006  (typer copies it)
    embed_model: flags.EmbedModel = None,
    embed_base_url: flags.EmbedURL = None,
    rerank: flags.Rerank = None,
    rerank_base_url: flags.RerankURL = None,
    rerank_model: flags.RerankModel = None,
    rerank_depth: flags.RerankDepth = 20,
    json_out: bool = typer.Option(False, "--json", help="Print the full result with its trace as JSON on stdout."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Also print each completion."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Do not print the live steps (on stderr)."),
) -> None:
    """Answer QUESTION with one reasoning strategy, streaming its steps."""
    from sleuth.search.base import FilterError, Filters
    from sleuth.strategies import STRATEGIES, OptionsError, UnknownStrategy, parse_opts, resolve_name
    from sleuth.strategies.base import BadQuestion, validate_question

    if lang not in ("auto", "en", "zh"):
        raise UserError(f"--lang must be auto, en or zh, not {lang!r}")
    options = {"lang": lang, "k": k, "max_steps": max_steps, "max_tokens": max_tokens, "mode": mode}
    try:
        name = resolve_name(strategy)
        validate_question(question)
        filters = Filters.parse([checked(f, "--filter") for f in filter_])
        options.update(parse_opts(opt))  # an --opt overrides the flag of the same option
        STRATEGIES[name].Options.parse(options, strategy=name)  # before the model starts
    except (UnknownStrategy, BadQuestion, FilterError, OptionsError) as e:
        raise UserError(str(e)) from None
    require_llm(model, base_url, "sleuth ask")
    choice = rerank_option(rerank, rerank_base_url)
    src_opts = source_options(embed_model, embed_base_url, choice, rerank_model, rerank_depth)
    retriever = open_source(index, corpus, STRATEGIES[name].needs_retriever, console_err, src_opts)
    llm = open_llm(model, base_url)
    retriever = llm_reranked(retriever, llm, choice, rerank_depth)
    try:
        strat = STRATEGIES[name](llm, retriever, **options)
        result = strat.run(question, filters=filters, listeners=[] if quiet else [StepPrinter(console_err, verbose)])
    except BadQuestion as e:
        raise UserError(str(e)) from None
    finally:
        # only the model this command opened: a program calling the command in-process keeps its own models
        # (the embedded engine of a CLI process ends with the process)
        with contextlib.suppress(Exception):
            llm.close()
    if json_out:
        sys.stdout.write(json.dumps(result.to_dict(), ensure_ascii=False, indent=2) + "\n")
        sys.stdout.flush()
    else:
        print_result(result, console)
    if result.finish_reason not in OK_REASONS:
        raise typer.Exit(1)


def open_llm(model: str | None, base_url: str | None) -> Any:
    """The model of ``--model``/``--base-url`` (a bad setting: one sentence)."""
    from sleuth.llm import LLMError, get_llm

    try:
        return get_llm(model, base_url=base_url)
    except (LLMError, ValueError) as e:  # ValueError: a malformed SLEUTH_LLM_* setting
        raise UserError(str(e)) from None


def llm_reranked(retriever: Any, llm: Any, choice: str | None, depth: int) -> Any:
    """``retriever`` behind the LLM reranker when ``--rerank llm`` asked for it."""
    if choice != "llm" or retriever is None:
        return retriever
    from sleuth.search.rerank import LLMReranker, RerankedRetriever

    return RerankedRetriever(retriever, LLMReranker(llm), depth=depth)
