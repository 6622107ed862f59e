"""Prompt templates are data: ``prompts/<lang>/<name>.txt``.

Templates use :class:`string.Template` syntax (``$question``, ``$documents``; ``$$`` for a literal dollar sign), so
braces in prompts (``\\boxed{}``) and in retrieved text need no escaping, and substituted values are never re-parsed.
A file's single trailing newline is dropped, so a template can end exactly where the model should continue (e.g. after
``Are follow up questions needed here:``). A language without its own file falls back to English.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from string import Template

PROMPT_DIR = Path(__file__).resolve().parent


class PromptError(KeyError):
    """A template is missing or lacks a field."""


@lru_cache(maxsize=256)
def load(name: str, lang: str = "en") -> Template:
    for lg in (lang, "en"):
        path = PROMPT_DIR / lg / f"{name}.txt"
        if path.is_file():
            return Template(path.read_text(encoding="utf-8").removesuffix("\n"))
    raise PromptError(f"no prompt template {name!r} for language {lang!r}")


def render(name: str, lang: str = "en", **fields: object) -> str:
    try:
        return load(name, lang).substitute({k: str(v) for k, v in fields.items()})
    except KeyError as e:
        raise PromptError(f"prompt {lang}/{name} needs field {e}") from None


def names(lang: str = "en") -> list[str]:
    return sorted(p.stem for p in (PROMPT_DIR / lang).glob("*.txt"))
