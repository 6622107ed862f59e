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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sleuth.eval.items import DatasetError, Item, Paragraph, need, read_jsonl
from sleuth.eval.metrics_zh import part_hits
from sleuth.eval.policy import conclusion_of_gold
from sleuth.search.base import Filters


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


def load_rgb_zh(records: list[dict[str, Any]], path: Path) -> Iterator[Item]:
    for i, rec in enumerate(records):
        need(rec, ("query", "answer", "positive"), path, "rgb_zh")
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
        yield Item(
            id=str(rec.get("id", i)),
            question=str(rec["query"]),
            # EM/F1 against all parts written out; the primary score is "every part mentioned"
            answers=["、".join(p[0] for p in parts)],
            gold_ids=sorted({i for ids in part_ids for i in ids}),
            paragraphs=list(paras.values()),
            metadata={"answer_parts": parts, "part_ids": part_ids},
        )


def load_policy_zh(path: Path) -> Iterator[Item]:
    """policy_zh JSONL: ``id, question, answer, conclusion, must_mention, evidence, scope`` (Chinese policy questions)."""
    for i, rec in enumerate(read_jsonl(path)):
        need(rec, ("question", "answer"), path, "policy_zh")
        if rec.get("conclusion") not in (None, "是", "否"):
            raise DatasetError(f"{path}: question {rec.get('id', i)}: conclusion must be 是, 否 or null")
        scope = rec.get("scope") or {}
        equals = {k: v for k, v in scope.items() if k != "acl"}
        filters = Filters.make(equals=equals, acl=scope.get("acl"))
        yield Item(
            id=str(rec.get("id", i)),
            question=rec["question"],
            answers=[str(rec["answer"])],
            gold_ids=[str(e) for e in rec.get("evidence") or []],
            filters=filters,
            must_mention=[str(m) for m in rec.get("must_mention") or []],
            must_not_mention=[str(m) for m in rec.get("must_not_mention") or []],
            answerable=bool(rec.get("evidence")),
            metadata={
                "notes": rec.get("notes", ""),
                "policy": True,
                # 是/否 for a yes/no question; an older record without the field: its gold answer's polarity
                "conclusion": rec["conclusion"]
                if "conclusion" in rec
                else conclusion_of_gold(rec["question"], str(rec["answer"])),
                "kind": str(rec.get("kind") or ""),
                "split": str(rec.get("split") or ""),
                "restricted": [str(x) for x in rec.get("restricted") or []],
            },
        )
