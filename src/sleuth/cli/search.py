"""``sleuth search "QUERY"``: ranked passages with provenance from any source."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from sleuth.cli import flags
from sleuth.cli.common import UserError, app, checked, console, rerank_option, source_options, user_errors
from sleuth.search.base import FilterError, Filters, SearchError


@app.command("search")
def search_cmd(
    query: str = typer.Argument(..., help="What to look for."),
    index: str = typer.Option(None, "--index", help="Index folder or source spec (tavily, searxng:URL, pg:DSN)."),
    corpus: Path = typer.Option(None, "--corpus", help="A corpus file or folder (indexed once into the cache)."),
    k: int = typer.Option(5, "--k", help="Number of passages."),
    filters: list[str] = typer.Option(
        [], "--filter", "-f", help="Scope: acl=all, version=2025, year>=2001 (repeatable)."
    ),
    mode: str = typer.Option(None, "--mode", help="lexical, dense or hybrid (default: hybrid where vectors exist)."),
    fmt: str = typer.Option("auto", "--format", help="Corpus format for --corpus."),
    dense: bool = typer.Option(False, "--dense/--no-dense", help="With --corpus: also embed the corpus."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Do not use the search cache."),
    embed_model: flags.EmbedModel = None,
    embed_base_url: flags.EmbedURL = None,
    rerank: str = typer.Option(None, "--rerank", help="none or a rerank server URL (see --rerank-base-url)."),
    rerank_base_url: flags.RerankURL = None,
    rerank_model: flags.RerankModel = None,
    rerank_depth: flags.RerankDepth = 20,
    as_json: bool = typer.Option(False, "--json", help="Print JSON (one object with the passages)."),
) -> None:
    """Search an index, a corpus or a web source."""
    from sleuth.search import open_retriever

    checked(query, "the query")
    if not query.strip():
        raise UserError("the query is empty")
    if (index is None) == (corpus is None):
        raise UserError("give exactly one of --index or --corpus")
    if k < 1 or k > 1000:
        raise UserError("--k must be between 1 and 1000")
    if mode is not None and mode not in ("lexical", "dense", "hybrid"):
        raise UserError("--mode must be lexical, dense or hybrid")
    with user_errors(FilterError):
        f = Filters.parse([checked(x, "--filter") for x in filters]) if filters else None
    choice = rerank_option(rerank, rerank_base_url, allow_llm=False)
    opts = {"mode": mode, **source_options(embed_model, embed_base_url, choice, rerank_model, rerank_depth)}
    if no_cache:
        opts["cache"] = False
    if corpus is not None:
        if not corpus.exists():
            raise UserError(f"corpus {corpus} does not exist")
        from sleuth.cli.index import require_readers
        from sleuth.extras import require

        require_readers([corpus])
        if dense:
            require("dense", "--dense")
        opts.update(format=fmt, dense=dense, progress=not as_json)
        spec: str = str(corpus)
    else:
        spec = index
        if "://" not in spec and ":" not in spec.split("/")[0] and spec.lower() != "tavily" and not Path(spec).exists():
            raise UserError(f"index folder {spec} does not exist")
    with user_errors(SearchError):
        retriever = open_retriever(spec, **opts)
        passages = retriever.search(query, k, f)
    if as_json:
        out = {
            "query": query,
            "source": getattr(retriever, "name", spec),
            "k": k,
            "filters": (f or Filters()).to_dict(),
            "passages": [p.to_dict() for p in passages],
        }
        print(json.dumps(out, ensure_ascii=False, indent=2))
        return
    if not passages:
        console.print("no passages found")
    for i, p in enumerate(passages, 1):
        where = " | ".join(x for x in (p.section, p.version, p.region, p.url or p.source) if x)
        console.print(f"[bold]{i}. {p.title or p.doc_id}[/] [dim]({p.id}, score {p.score:.3f})[/]")
        if where:
            console.print(f"   [dim]{where}[/]")
        text = " ".join(p.text.split())
        console.print(f"   {text[:300]}{'…' if len(text) > 300 else ''}", markup=False, highlight=False)
