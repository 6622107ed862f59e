"""`sleuth models ...`: list, assemble and benchmark the embedded models."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.table import Table

from sleuth.cli.common import UserError, app, console, user_errors
from sleuth.config import cache_dir as _cache_dir
from sleuth.llm.base import LLMError
from sleuth.llm.models import MODELS, ensure_model, get_model, is_installed
from sleuth.llm.settings import default_model

models_app = typer.Typer(
    help="Embedded models: list them, assemble their weights, measure their speed.", no_args_is_help=True
)
app.add_typer(models_app, name="models")


def _assembled(name: str, cache: Path) -> bool:
    m = MODELS[name]
    if m.chunked:
        return (cache / "models" / m.filename).is_file()
    return is_installed(m)


@models_app.command("list")
def list_models(
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    cache_dir: Path | None = typer.Option(None, "--cache-dir", help="Cache directory (default $SLEUTH_CACHE_DIR)."),
) -> None:
    """List the embedded models: size, installed?, default."""
    cache = _cache_dir(cache_dir)
    default = default_model()
    rows = []
    for name, m in MODELS.items():
        rows.append(
            {
                "name": name,
                "title": m.title,
                "size_mb": round(m.size_bytes / 1e6),
                "installed": is_installed(m),
                "assembled": _assembled(name, cache),
                "default": name == default,
                "licence": m.licence,
                "install": m.pip_hint,
            }
        )
    if as_json:
        console.print_json(json.dumps(rows))
        return
    t = Table(title="Embedded models")
    for col in ("name", "model", "size", "installed", "default", "licence"):
        t.add_column(col)
    for r in rows:
        inst = (
            "yes" + (" (assembled)" if r["assembled"] and MODELS[r["name"]].chunked else "") if r["installed"] else "no"
        )
        t.add_row(r["name"], r["title"], f"{r['size_mb']} MB", inst, "*" if r["default"] else "", r["licence"])
    console.print(t)
    missing = [r for r in rows if not r["installed"]]
    for r in missing:  # the hint holds brackets ('sleuth[model-0-5b]'): printed as text, never as markup
        console.print(f"{r['name']}: {r['install']}", style="dim", markup=False, highlight=False, soft_wrap=True)
    from sleuth.extras import missing as missing_modules

    if missing_modules("local"):
        console.print(
            "the embedded engine that runs them: pip install 'sleuth[local]'",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )


@models_app.command("path")
def model_path(
    name: str = typer.Argument(None, help="Model name (default: the default model)."),
    cache_dir: Path | None = typer.Option(None, "--cache-dir", help="Cache directory (default $SLEUTH_CACHE_DIR)."),
) -> None:
    """Assemble (once, sha256-checked) and print the path of a model's .gguf file."""
    name = name or default_model()
    try:
        get_model(name)
        p = ensure_model(name, cache_dir)
    except KeyError as e:
        raise UserError(str(e.args[0])) from None
    except LLMError as e:
        raise UserError(str(e)) from None
    typer.echo(str(p))


@models_app.command("bench")
def bench(
    names: list[str] = typer.Argument(None, help="Models to measure (default: every installed one)."),
    threads: int = typer.Option(2, "--threads", min=1, help="Engine threads."),
    decode_tokens: int = typer.Option(64, "--tokens", min=8, help="Tokens to decode."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Measure load time, prompt and decode tokens/s and memory of embedded models."""
    from sleuth.extras import require
    from sleuth.llm.bench import bench_model, format_table

    require("local", "sleuth models bench")

    for n in names or []:
        if n not in MODELS:
            raise UserError(f"Unknown embedded model {n!r}; known: {', '.join(sorted(MODELS))}.")
    chosen = names or [n for n in MODELS if is_installed(n)]
    if not chosen:
        raise UserError("No embedded model is installed; see `sleuth models list` for the pip commands.")
    rows = []
    for n in chosen:
        with user_errors(LLMError):
            rows.append(bench_model(n, threads=threads, decode_tokens=decode_tokens))
    if as_json:
        console.print_json(json.dumps([r.to_dict() for r in rows]))
    else:
        typer.echo(format_table(rows))
