"""The loader of RGB's Chinese information-integration questions (``--format rgb_zh``).

RGB (Chen et al., 2024, "Benchmarking Large Language Models in Retrieval-Augmented
Generation") ``zh_int``: each record has ``query``, ``answer`` (a list of parts; a
part is a string or a list of accepted variants, e.g. ``["11月15日", "16日",
"巴厘岛"]``), ``positive`` (one list of passages per answer part) and ``negative``
(distractors on the same topic).  Every passage becomes a paragraph of its
question, so the open setting pools the positive and negative passages of all
questions into one corpus (each text once) and the distractor setting searches a
question's own.  Scored as in RGB: a reply is right when it mentions every part
(``parts``, see :mod:`sleuth.eval.metrics_zh`); the share of parts mentioned
(``part_rate``) and of parts with a positive passage among those the strategy saw
(``part_recall``) are reported too.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from sleuth.eval.items import DatasetError, Item, Paragraph
from sleuth.eval.metrics_zh import part_hits

__all__ = ["answer_parts", "load_rgb_zh", "part_passages", "passage_id"]


def passage_id(text: str) -> str:
    """The id of an RGB passage: a hash of its text (the same passage under two questions is one)."""
    return "rgb-" + hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


def _variants(part: Any) -> list[str]:
    vals = part if isinstance(part, list) else [part]
    return [str(v).strip() for v in vals if str(v).strip()]


def answer_parts(rec: dict[str, Any]) -> list[list[str]]:
    """The answer parts of a record, each as its list of accepted variants."""
    answer = rec["answer"] if isinstance(rec["answer"], list) else [rec["answer"]]
    return [v for v in (_variants(p) for p in answer) if v]


def part_passages(rec: dict[str, Any], parts: list[list[str]]) -> list[list[str]]:
    """For each answer part, the positive passages that support it: those that mention it
    (any variant, after :func:`~sleuth.eval.metrics_zh.normalize_zh`); when none does, the
    part's own list where there is one list per part, else every positive passage.  (Some
    records have one list per source document rather than per part: 7 of the 50 dev ones.)"""
    groups = [[str(t) for t in g] for g in rec["positive"]]
    every = [t for g in groups for t in g]
    out = []
    for n, variants in enumerate(parts):
        hits = [t for t in every if part_hits(t, [variants])[0]]
        out.append(hits or (groups[n] if len(groups) == len(parts) else every))
    return out


def load_rgb_zh(records: list[dict[str, Any]], path: Path) -> list[Item]:
    items = []
    for i, rec in enumerate(records):
        missing = [k for k in ("query", "answer", "positive") if k not in rec]
        if missing:
            raise DatasetError(f"{path} does not look like rgb_zh: a record lacks {', '.join(missing)}")
        parts = answer_parts(rec)
        if not parts:
            raise DatasetError(f"{path}: question {rec.get('id', i)} has no answer parts")
        positive = rec["positive"]
        if not isinstance(positive, list) or not all(isinstance(g, list) for g in positive):
            raise DatasetError(f"{path}: question {rec.get('id', i)}: positive must be a list of passage lists")
        paras: dict[str, Paragraph] = {}
        for text in [t for group in positive for t in group] + list(rec.get("negative") or []):
            pid = passage_id(str(text))
            paras.setdefault(pid, Paragraph(pid, "", str(text), {}))
        part_ids = [sorted({passage_id(t) for t in group}) for group in part_passages(rec, parts)]
        items.append(
            Item(
                id=str(rec.get("id", i)),
                question=str(rec["query"]),
                # EM/F1 against all parts written out; the primary score is "every part mentioned"
                answers=["、".join(p[0] for p in parts)],
                gold_ids=sorted({i for ids in part_ids for i in ids}),
                paragraphs=list(paras.values()),
                metadata={"answer_parts": parts, "part_ids": part_ids},
            )
        )
    return items
