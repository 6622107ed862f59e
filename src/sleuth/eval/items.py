"""The common shape every evaluation format is loaded into: :class:`Item` (one question, its
answers, paragraphs and decomposition) and :class:`Dataset` (the items of one file)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sleuth.search.base import Filters

OPEN, MC, YESNO = "open", "mc", "yesno"
LETTERS = "ABCD"


class EvalError(ValueError):
    """A user's mistake in an evaluation (an argument, a data file, a run directory): the CLI says it in
    one sentence, without a traceback."""


class DatasetError(EvalError):
    """The file cannot be read in the requested format (a user mistake, one sentence)."""


@dataclass
class Paragraph:
    """One retrievable paragraph of a dataset (a question's own, or of a pooled corpus)."""

    id: str
    title: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class SubQuestion:
    """One hop of a decomposition; ``question`` may refer to earlier answers as ``#1``, ``#2``."""

    question: str
    answer: str = ""
    aliases: list[str] = field(default_factory=list)
    #: the paragraph that supports this hop (MuSiQue ``paragraph_support_idx``), when known
    support_id: str = ""


@dataclass
class Item:
    """One evaluation question in the common shape every format is loaded into."""

    id: str
    question: str
    answers: list[str]
    type: str = OPEN  # open | mc | yesno
    choices: list[str] = field(default_factory=list)
    gold_titles: list[str] = field(default_factory=list)
    gold_ids: list[str] = field(default_factory=list)
    paragraphs: list[Paragraph] = field(default_factory=list)
    decomposition: list[SubQuestion] = field(default_factory=list)
    filters: Filters | None = None
    must_mention: list[str] = field(default_factory=list)
    must_not_mention: list[str] = field(default_factory=list)
    answerable: bool = True
    metadata: dict[str, Any] = field(default_factory=dict)
    #: a conversation's earlier turns (``{role, content}``); ``question`` is its last user message
    history: list[dict[str, str]] = field(default_factory=list)
    #: the same question written to stand alone (a conversation's upper bound), when known
    standalone: str = ""

    def prompt(self) -> str:
        """The text given to a strategy: multiple-choice items list their options."""
        if self.type == MC and self.choices:
            opts = "\n".join(f"{LETTERS[i]}. {c}" for i, c in enumerate(self.choices))
            return f"{self.question}\n{opts}\nAnswer with the letter of the correct option."
        if self.type == YESNO:
            return f"{self.question} Answer yes or no."
        return self.question


@dataclass
class Dataset:
    name: str
    format: str
    path: Path
    items: list[Item]
    #: a separate retrieval corpus shipped with the questions (None: pool the items' paragraphs)
    corpus_path: Path | None = None

    def __len__(self) -> int:
        return len(self.items)

    def sample(self, limit: int | None, seed: int | None) -> Dataset:
        """A fixed sample: ``limit`` items drawn with ``seed`` (file order kept); no seed: the first ``limit``."""
        items = self.items
        if limit is not None and 0 <= limit < len(items):
            idx = range(limit) if seed is None else sorted(random.Random(seed).sample(range(len(items)), limit))
            items = [items[i] for i in idx]
        return replace(self, items=list(items))
