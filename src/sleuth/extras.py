"""Optional extras: which ``pip install 'sleuth[...]'`` brings which module, checked before any work.

Sleuth's core (lexical index, web search, OpenAI-compatible LLMs) needs no extra; the
rest lives in optional extras (pyproject.toml).  A command that needs one calls
:func:`require` first, so a missing extra ends it with one sentence naming the
install command, before it reads, writes or computes anything.  The CLI also turns
any later :class:`ModuleNotFoundError` of a module listed here into the same sentence
(:func:`hint_for`), so a path that was not checked up front still prints no traceback.

The check uses :func:`importlib.util.find_spec` (nothing is imported: torch alone
takes seconds); a module that is present but cannot be imported is caught where it
is imported.
"""

from __future__ import annotations

import importlib.util

__all__ = ["EXTRA_MODULES", "MissingExtra", "hint_for", "missing", "require"]

#: extra -> the top-level modules it installs (the ones Sleuth imports)
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "local": ("xllamacpp",),
    "ingest": ("selectolax", "pypdf", "docx"),
    "dense": ("faiss", "torch"),
    "server": ("fastapi", "uvicorn", "sse_starlette", "jwt"),
    "mcp": ("mcp",),
    "eval": ("matplotlib",),
    "cluster": ("dask", "distributed"),
    "pg": ("pgserver", "psycopg2"),
}

_EXTRA_OF = {mod: extra for extra, mods in EXTRA_MODULES.items() for mod in mods}


class MissingExtra(ImportError):
    """An optional extra is not installed; the message is one sentence with the pip command."""

    reason = "missing_extra"

    def __init__(self, extra: str, what: str, modules: list[str]) -> None:
        self.extra = extra
        self.modules = modules
        super().__init__(
            f"{what} needs the '{extra}' extra ({', '.join(modules)} not installed): pip install 'sleuth[{extra}]'",
            name=modules[0] if modules else None,
        )


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing(extra: str) -> list[str]:
    """The modules of ``extra`` that are not installed (empty: the extra is there)."""
    return [m for m in EXTRA_MODULES[extra] if not _installed(m)]


def require(extra: str, what: str, modules: tuple[str, ...] | None = None) -> None:
    """Raise :class:`MissingExtra` unless every module of ``extra`` (or just ``modules`` of it) is installed.

    ``what`` names what needs it, e.g. ``"sleuth serve"`` or ``"reading PDF files"``.
    """
    gone = [m for m in (modules or EXTRA_MODULES[extra]) if not _installed(m)]
    if gone:
        raise MissingExtra(extra, what, gone)


def hint_for(error: ImportError) -> str | None:
    """One sentence naming the extra for an import error of one of its modules, else ``None``."""
    if isinstance(error, MissingExtra):
        return str(error)
    name = (getattr(error, "name", None) or "").split(".")[0]
    extra = _EXTRA_OF.get(name)
    if extra is None:
        return None
    return f"this needs the '{extra}' extra ({name} cannot be imported): pip install 'sleuth[{extra}]'"
