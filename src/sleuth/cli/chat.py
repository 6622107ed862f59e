"""``sleuth chat``: a conversation in the terminal, with follow-up questions.

    sleuth chat [--strategy rag] [--index DIR | --corpus FILE] [--filter key=value ...]
                [--model NAME] [--base-url URL] [--lang en|zh] [--k 5] [--max-steps N] [--mode default|paper]
                [--opt key=value ...] [--embed-model M] [--rerank none|llm|URL] [--no-rewrite] [--verbose]

Each question is answered with the earlier turns of the conversation as its history: a
follow-up ("那出境的呢？", "and who founded it?") is first rewritten to stand alone (one short
LLM call, shown as the first step), then searched and answered as ``sleuth ask`` does.  The
scope (``--filter``) is the same for every turn.

Commands: ``/new`` starts a new conversation, ``/strategy NAME`` switches the strategy,
``/sources`` lists the last answer's sources in full, ``/help``, ``/quit``.  Ctrl-D or Ctrl-C
leaves (Ctrl-C during an answer stops it first); the model is stopped on the way out.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from sleuth.cli import flags
from sleuth.cli.ask import StepPrinter, llm_reranked, open_llm, open_source, print_result
from sleuth.cli.common import UserError, app, checked, console, console_err, require_llm, rerank_option, source_options

HELP = (
    "Ask a question; a follow-up may refer to earlier turns. Commands: /new (a new conversation), "
    "/strategy NAME, /sources (the last answer's sources), /help, /quit (or Ctrl-D / Ctrl-C)."
)
PROMPT = "[bold green]you>[/] "


class Chat:
    """The conversation's state: strategy, history, the last result (the loop is :func:`chat`)."""

    def __init__(self, llm: Any, retriever: Any, strategy: str, options: dict[str, Any], filters: Any) -> None:
        self.llm, self.retriever, self.options, self.filters = llm, retriever, options, filters
        self.strategy = strategy
        self.history: list[dict[str, str]] = []
        self.last: Any = None

    def command(self, line: str) -> bool:
        """Handle a ``/command``; False when the conversation should end."""
        from sleuth.strategies import STRATEGIES, OptionsError, UnknownStrategy, resolve_name

        cmd, _, arg = line[1:].strip().partition(" ")
        cmd, arg = cmd.lower(), arg.strip()
        if cmd in ("quit", "exit", "q"):
            return False
        if cmd == "new":
            self.history, self.last = [], None
            console.print("[dim]a new conversation: earlier turns are forgotten[/]")
        elif cmd == "strategy":
            if not arg:
                console.print(f"[dim]strategy: {self.strategy}; choose one of {', '.join(STRATEGIES)}[/]")
                return True
            try:
                name = resolve_name(arg)
                STRATEGIES[name].Options.parse(self.options, strategy=name)
            except (UnknownStrategy, OptionsError) as e:
                console.print(f"[red]{escape(str(e))}[/]")
                return True
            if STRATEGIES[name].needs_retriever and self.retriever is None:
                console.print(f"[red]{name} searches, and this chat has no index; start it with --index or --corpus[/]")
                return True
            self.strategy = name
            console.print(f"[dim]strategy: {name} (the conversation goes on)[/]")
        elif cmd == "sources":
            self.sources()
        elif cmd == "help":
            console.print(f"[dim]{escape(HELP)}[/]")
        else:
            console.print(f"[red]unknown command /{escape(cmd)}[/] [dim]{escape(HELP)}[/]")
        return True

    def sources(self) -> None:
        if self.last is None or not self.last.citations:
            console.print("[dim]no sources yet[/]")
            return
        for i, p in enumerate(self.last.citations, 1):
            where = " · ".join(x for x in (p.title, p.section, p.version, Path(p.source).name if p.source else "") if x)
            console.print(f"[bold][{i}][/] {escape(p.id)} [dim]{escape(where)}[/]")
            console.print(f"    {escape(' '.join(p.text.split())[:600])}")

    def ask(self, question: str, verbose: bool) -> None:
        from sleuth.strategies import STRATEGIES
        from sleuth.strategies.base import BadQuestion

        strat = STRATEGIES[self.strategy](self.llm, self.retriever, **self.options)
        try:
            result = strat.run(
                question, filters=self.filters, listeners=[StepPrinter(console, verbose)], history=self.history
            )
        except BadQuestion as e:
            console.print(f"[red]{escape(str(e))}[/]")
            return
        print_result(result, console)
        self.last = result
        answer = (result.answer or result.short_answer or "").strip()
        self.history += [{"role": "user", "content": question}]
        if answer:
            self.history += [{"role": "assistant", "content": answer}]


@app.command("chat")
def chat(
    strategy: str = typer.Option("rag", "--strategy", "-s", help=flags.STRATEGY_HELP),
    index: flags.IndexDir = None,
    corpus: flags.CorpusPath = None,
    filter_: list[str] = typer.Option(
        [], "--filter", "-f", help="Scope for every turn: key=value, key>=value, acl=LABEL (repeatable)."
    ),
    model: flags.Model = None,
    base_url: flags.BaseURL = None,
    lang: flags.Lang = "auto",
    k: flags.K = 5,
    max_steps: flags.MaxSteps = 6,
    mode: flags.Mode = "default",
    opt: flags.Opts = [],  # noqa: B006  (typer copies it)
    embed_model: flags.EmbedModel = None,
    embed_base_url: flags.EmbedURL = None,
    rerank: flags.Rerank = None,
    rerank_base_url: flags.RerankURL = None,
    rerank_model: flags.RerankModel = None,
    rerank_depth: flags.RerankDepth = 20,
    no_rewrite: bool = typer.Option(
        False, "--no-rewrite", help="Answer each message as it is (no standalone-question step)."
    ),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Also print each completion."),
) -> None:
    """A conversation in the terminal: follow-up questions use the earlier turns."""
    from sleuth.search.base import FilterError, Filters
    from sleuth.strategies import STRATEGIES, OptionsError, UnknownStrategy, parse_opts, resolve_name

    if lang not in ("auto", "en", "zh"):
        raise UserError(f"--lang must be auto, en or zh, not {lang!r}")
    try:
        name = resolve_name(strategy)
        filters = Filters.parse([checked(f, "--filter") for f in filter_])
        options: dict[str, Any] = {"lang": lang, "k": k, "max_steps": max_steps, "mode": mode, **parse_opts(opt)}
        if no_rewrite:
            options["rewrite"] = False
        STRATEGIES[name].Options.parse(options, strategy=name)
    except (UnknownStrategy, FilterError, OptionsError) as e:
        raise UserError(str(e)) from None
    require_llm(model, base_url, "sleuth chat")
    choice = rerank_option(rerank, rerank_base_url)
    src_opts = source_options(embed_model, embed_base_url, choice, rerank_model, rerank_depth)
    retriever = open_source(index, corpus, STRATEGIES[name].needs_retriever, console_err, src_opts)
    llm = open_llm(model, base_url)
    retriever = llm_reranked(retriever, llm, choice, rerank_depth)
    from sleuth.llm import close_all

    if sys.stdin.isatty():  # Ctrl-C leaves, even when started from a shell that ignores SIGINT (nohup, &)
        signal.signal(signal.SIGINT, signal.default_int_handler)
    session = Chat(llm, retriever, name, options, filters)
    console.print(f"[dim]sleuth chat · strategy {name} · {escape(HELP)}[/]")
    try:
        while True:
            try:
                line = console.input(PROMPT)
            except EOFError:
                console.print()
                break
            line = line.strip()
            if not line:
                continue
            if line.startswith("/"):
                if not session.command(line):
                    break
                continue
            try:
                session.ask(line, verbose)
            except KeyboardInterrupt:
                console.print("\n[yellow]stopped[/] [dim](Ctrl-C again leaves)[/]")
    except KeyboardInterrupt:
        console.print()
    finally:
        close_all()
    console.print("[dim]bye[/]")
