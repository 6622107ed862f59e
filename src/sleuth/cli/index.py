"""``sleuth index build|add|list|remove|stats``: the embedded index on disk."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from sleuth.cli import flags
from sleuth.cli.common import UserError, app, checked, comma_list, console, console_err, user_errors
from sleuth.extras import require
from sleuth.search.base import FilterError, Filters, SearchError
from sleuth.search.index import BuildReport, Index
from sleuth.search.index_writer import EmptyBuild
from sleuth.search.ingest import FORMATS
from sleuth.search.read_documents import NEEDS_INGEST, doc_type
from sleuth.search.remote import EmbedServer

index_app = typer.Typer(help="Build, extend and inspect an embedded search index.", no_args_is_help=True)
app.add_typer(index_app, name="index")


def _check_inputs(inputs: list[Path], fmt: str) -> None:
    """Before any work: the inputs exist, their format is known and the readers they need are installed."""
    if not inputs:
        raise UserError("give at least one --input file or folder")
    missing = [str(p) for p in inputs if not p.exists()]
    if missing:
        raise UserError(f"input not found: {', '.join(missing)}")
    if fmt not in FORMATS:
        raise UserError(f"--format must be one of {', '.join(FORMATS)} (got {fmt!r})")
    require_readers(inputs)


def require_readers(inputs: list[Path]) -> None:
    """Before any work: the ``ingest`` extra when the inputs hold HTML, PDF or .docx files."""
    seen: set[str] = set()
    for root in inputs:
        files = [root] if root.is_file() else (p for p in root.rglob("*") if p.is_file())
        for path in files:
            kind = doc_type(path.name)
            if kind in NEEDS_INGEST and kind not in seen:
                seen.add(kind)
                what, module = NEEDS_INGEST[kind]
                require("ingest", f"{what} ({path})", (module,))


def _print_report(report: BuildReport, as_json: bool, extra: dict[str, object]) -> None:
    if as_json:
        console.print_json(json.dumps({**extra, "report": report.to_dict()}, ensure_ascii=False))
        return
    for path, reason in report.ingest.skipped:
        console_err.print(f"[yellow]skipped[/] {path}: {reason}")
    for path, n in report.ingest.bad_lines.items():
        console_err.print(f"[yellow]skipped {n} bad record(s)[/] in {path}")
    console.print(
        f"{report.passages_added} passages added from {report.docs_added} new and {report.docs_replaced} "
        f"updated documents ({report.docs_unchanged} unchanged, {report.duplicate_passages} duplicate passages "
        f"stored once) in {report.seconds:.1f}s"
        + (f" (embedding {report.embed_seconds:.1f}s)" if report.embed_seconds else "")
    )
    for k, v in extra.items():
        console.print(f"{k}: {v}")


@index_app.command("build")
def build_cmd(
    inputs: list[Path] = typer.Option([], "--input", "-i", help="Corpus file or folder (repeatable)."),
    out: Path = typer.Option(..., "--out", "-o", help="Index folder (an existing index there is replaced atomically)."),
    fmt: str = typer.Option("auto", "--format", help=f"Corpus format: {'|'.join(FORMATS)}."),
    dense: bool = typer.Option(False, "--dense/--no-dense", help="Also embed passages (hybrid search)."),
    embedder: str = typer.Option(
        None,
        "--embedder",
        help="auto (default: multilingual for Chinese corpora), all-MiniLM-L6-v2, multilingual-e5-small.",
    ),
    max_chars: int = typer.Option(1200, "--max-chars", help="Chunk size in characters (Chinese: half)."),
    default_acl: str = typer.Option(
        "all", "--default-acl", help="ACL labels for passages that have none (comma-separated)."
    ),
    max_file_mb: float = typer.Option(512, "--max-file-mb", help="Skip (and name) input files larger than this."),
    embed_model: flags.EmbedModel = None,
    embed_base_url: flags.EmbedURL = None,
    embed_batch: int = typer.Option(None, "--embed-batch", help="Texts per embedding request (default 64)."),
    embed_concurrency: int = typer.Option(
        None, "--embed-concurrency", help="Embedding requests in flight per server (default 4)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the build report as JSON."),
) -> None:
    """Index corpus files and folders into DIR (with --dense or --embed-model: also their vectors)."""
    if max_chars < 100:
        raise UserError("--max-chars must be at least 100")
    _check_inputs(inputs, fmt)
    if dense:
        require("dense", "--dense")
    try:
        server = EmbedServer.resolve(embed_model, embed_base_url, batch_size=embed_batch, concurrency=embed_concurrency)
        idx = Index.build(
            inputs,
            out,
            format=fmt,
            dense=dense,
            embedder=embedder,
            max_chars=max_chars,
            default_acl=comma_list(default_acl),
            max_file_mb=max_file_mb,
            progress=not as_json,
            embed_server=server,
        )
    except EmptyBuild as e:
        for path, reason in e.report.ingest.skipped:
            console_err.print(f"[yellow]skipped[/] {path}: {reason}")
        raise UserError("no passages were indexed; nothing was written") from e
    except SearchError as e:
        raise UserError(str(e)) from e
    assert idx.last_report is not None
    _print_report(idx.last_report, as_json, {"index": str(idx.root), "passages": idx.manifest["passages"]})


@index_app.command("add")
def add_cmd(
    index: Path = typer.Option(..., "--index", help="Existing index folder."),
    inputs: list[Path] = typer.Option([], "--input", "-i", help="Corpus file or folder (repeatable)."),
    fmt: str = typer.Option("auto", "--format", help=f"Corpus format: {'|'.join(FORMATS)}."),
    max_file_mb: float = typer.Option(512, "--max-file-mb", help="Skip (and name) input files larger than this."),
    embed_model: str = typer.Option(None, "--embed-model", help=flags.EMBED_MODEL_HELP + " Must be the index's."),
    embed_base_url: flags.EmbedURL = None,
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Add or update documents in an index (documents with a known id are replaced)."""
    _check_inputs(inputs, fmt)
    idx = _open(index, embed_model, embed_base_url)
    if idx.manifest.get("dense"):
        require("dense", f"adding to {index} (it has vectors)")
    with user_errors(SearchError):
        report = idx.add(inputs, format=fmt, max_file_mb=max_file_mb, progress=not as_json)
    _print_report(report, as_json, {"index": str(idx.root), "passages": idx.manifest["passages"]})


@index_app.command("list")
def list_cmd(
    index: Path = typer.Option(..., "--index", help="Index folder."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON (one object per document)."),
) -> None:
    """The documents of an index: id, title, metadata and passage count."""
    idx = _open(index)
    with user_errors(SearchError):
        docs = idx.documents()
    if as_json:
        print(json.dumps({"index": str(idx.root), "documents": docs}, ensure_ascii=False, indent=2))
        return
    typer.echo(f"{len(docs)} document(s) in {idx.root}")
    width = max((len(d["id"]) for d in docs), default=0)
    for d in docs:
        fields = [("version", d["version"]), ("region", d["region"]), ("acl", ",".join(d["acl"]))]
        fields += [(k, ",".join(map(str, v)) if isinstance(v, list) else str(v)) for k, v in d["metadata"].items()]
        meta = " ".join(f"{k}={v}" for k, v in fields if v != "")
        typer.echo(
            f"{d['id']:<{width}}  {d['passages']:>4} passage(s)  {json.dumps(d['title'], ensure_ascii=False)}  {meta}"
        )


@index_app.command("remove")
def remove_cmd(
    targets: list[str] = typer.Argument(..., help="Documents to remove: ids (see `index list`), file or folder paths."),
    index: Path = typer.Option(..., "--index", help="Index folder."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Remove documents from an index, all or none (a name that matches nothing changes nothing)."""
    idx = _open(index)
    with user_errors(SearchError):
        report = idx.remove(targets)
    if as_json:
        console.print_json(json.dumps({"index": str(idx.root), "passages": idx.manifest["passages"],
                                       "report": report.to_dict()}, ensure_ascii=False))  # fmt: skip
        return
    console.print(
        f"{report.passages_removed} passages of {report.docs_removed} document(s) removed in {report.seconds:.1f}s; "
        f"{idx.manifest['docs']} document(s), {idx.manifest['passages']} passages left"
    )


@index_app.command("stats")
def stats_cmd(
    index: Path = typer.Option(..., "--index", help="Index folder."),
    filters: list[str] = typer.Option([], "--filter", "-f", help="Count only what this scope sees (repeatable)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Counts and settings of an index (within a scope if --filter is given)."""
    idx = _open(index)
    with user_errors(FilterError):
        f = Filters.parse([checked(x, "--filter") for x in filters]) if filters else None
    st = idx.stats(f)
    if as_json:
        console.print_json(json.dumps(st, ensure_ascii=False))
    else:
        for k, v in st.items():
            console.print(f"[bold]{k}[/]: {v}")


def _open(index: Path, embed_model: str | None = None, embed_base_url: str | None = None) -> Index:
    if not index.exists():
        raise UserError(f"index folder {index} does not exist")
    with user_errors(SearchError):
        idx = Index.open(index, embed_model=embed_model, embed_base_url=embed_base_url)
    return idx
