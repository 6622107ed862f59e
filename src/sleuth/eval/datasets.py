"""Loaders for the evaluation formats (docs/eval.md, "Data", lists each format's shape): every file
becomes a list of :class:`Item`; :func:`detect_format` guesses the format from the file. Datasets that
keep their retrieval corpus in a separate file (FlashRAG's ``wiki_passages.jsonl``, policy_zh's
``corpus.jsonl``) find it beside the questions file; ``--corpus PATH`` overrides it.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from sleuth.eval.items import (
    LETTERS,
    MC,
    OPEN,
    YESNO,
    Dataset,
    DatasetError,
    Item,
    Paragraph,
    SubQuestion,
    need,
    read_jsonl,
    read_text,
)
from sleuth.eval.metrics import part_hits
from sleuth.eval.policy import conclusion_of_gold
from sleuth.search.base import Filters
from sleuth.strategies.conversation import BadHistory, split_messages


# --------------------------------------------------------------------------- helpers
def _json_records(path: Path) -> list[dict[str, Any]]:
    """A JSON list of objects, a JSON object holding one (``data``), or JSONL."""
    text = read_text(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return list(read_jsonl(path))
    if isinstance(data, dict):
        data = data.get("data") or data.get("questions") or [data]
    if not isinstance(data, list) or not all(isinstance(x, dict) for x in data):
        raise DatasetError(f"{path} is not a list of JSON objects")
    return data


def para_id(title: str, text: str) -> str:
    """A stable id for a paragraph that has none: its title plus a content hash."""
    h = hashlib.sha1(f"{title}\n{text}".encode()).hexdigest()
    return f"{title}~{h[:8]}" if title else h[:16]


def _dedupe(xs: Any) -> list[str]:
    """The non-empty texts of ``xs`` (one text, or a list of them), each once, in order."""
    return list(dict.fromkeys(str(x) for x in ([xs] if isinstance(xs, str | int | float | bool) else xs) if str(x)))


# --------------------------------------------------------------------------- loaders
def load_hotpotqa(path: Path) -> Iterator[Item]:
    for i, rec in enumerate(read_jsonl(path)):
        need(rec, ("question", "answer", "context"), path, "hotpotqa")
        ctx = rec["context"]
        if isinstance(ctx, dict):  # HF format: {title: [...], sentences: [[...]]}
            pairs = list(zip(ctx.get("title", []), ctx.get("sentences", []), strict=False))
        else:  # original format: [[title, [sentences]], ...]
            pairs = [(c[0], c[1]) for c in ctx]
        paras = [Paragraph(t, t, "".join(s).strip(), {}) for t, s in pairs]
        sf = rec.get("supporting_facts") or {}
        titles = sf.get("title", []) if isinstance(sf, dict) else [f[0] for f in sf]
        gold = _dedupe(list(titles))
        yield Item(
            id=str(rec.get("id") or rec.get("_id") or i),
            question=rec["question"],
            answers=[str(rec["answer"])],
            # always open: typing yes/no items by their gold answer would leak it into the prompt
            type=OPEN,
            gold_titles=gold,
            gold_ids=gold,
            paragraphs=paras,
            metadata={"hop_type": rec.get("type", ""), "level": rec.get("level", "")},
        )


def load_musique(path: Path) -> Iterator[Item]:
    for i, rec in enumerate(_json_records(path)):
        need(rec, ("question", "answer", "paragraphs"), path, "musique")
        texts = [(p.get("title", ""), p.get("paragraph_text", p.get("text", ""))) for p in rec["paragraphs"]]
        paras = [
            Paragraph(para_id(t, x), t, x, {"is_supporting": bool(p.get("is_supporting"))})
            for (t, x), p in zip(texts, rec["paragraphs"], strict=True)
        ]
        sup = [p for p in paras if p.metadata["is_supporting"]]
        by_idx = {p.get("idx", j): paras[j].id for j, p in enumerate(rec["paragraphs"])}
        decomp = [
            SubQuestion(
                str(s.get("question", "")),
                str(s.get("answer", "")),
                list(s.get("answer_aliases") or []),
                by_idx.get(s.get("paragraph_support_idx"), ""),
            )
            for s in rec.get("question_decomposition") or []
        ]
        yield Item(
            id=str(rec.get("id", i)),
            question=rec["question"],
            answers=_dedupe([rec["answer"], *(rec.get("answer_aliases") or [])]),
            gold_titles=_dedupe([p.title for p in sup]),
            gold_ids=[p.id for p in sup],
            paragraphs=paras,
            decomposition=decomp,
            answerable=bool(rec.get("answerable", True)),
            metadata={"hops": len(decomp)},
        )


def load_timeqa(path: Path) -> Iterator[Item]:
    for i, rec in enumerate(_json_records(path)):
        need(rec, ("question", "targets"), path, "timeqa")
        raw = [p if isinstance(p, dict) else {"text": p} for p in rec.get("paragraphs") or []]
        paras = [
            Paragraph(f"{rec.get('idx', i)}~p{j}", str(p.get("title", "")).strip(), str(p.get("text", "")).strip())
            for j, p in enumerate(raw)
            if str(p.get("text", "")).strip()
        ]
        targets = [str(t).strip() for t in rec["targets"] if str(t).strip()]
        page = paras[0].title if paras else ""
        yield Item(
            id=str(rec.get("idx", i)),
            question=rec["question"],
            answers=targets,
            gold_titles=[page] if page else [],
            paragraphs=paras,
            answerable=bool(targets),
            metadata={"level": rec.get("level", "")},
        )


def load_mmlu(path: Path) -> Iterator[Item]:
    try:
        rows = list(csv.reader(read_text(path).splitlines()))
    except csv.Error as e:
        raise DatasetError(f"{path} is not a readable CSV ({e})") from e
    if rows and [c.strip().lower() for c in rows[0][:6]] == ["question", "a", "b", "c", "d", "answer"]:
        rows = rows[1:]
    subject = re.sub(r"_(dev|val|test)$", "", path.stem)
    for n, row in enumerate(rows, 1):
        if not row:
            continue
        if len(row) < 6 or row[5].strip().upper() not in LETTERS:
            raise DatasetError(f"{path}: row {n} is not question,A,B,C,D,answer-letter")
        letter = row[5].strip().upper()
        yield Item(
            id=f"{path.stem}-{n}",
            question=row[0].strip(),
            answers=[letter],
            type=MC,
            choices=[c.strip() for c in row[1:5]],
            metadata={"subject": subject},
        )


def load_strategyqa(path: Path) -> Iterator[Item]:
    for i, rec in enumerate(_json_records(path)):
        need(rec, ("question", "answer"), path, "strategyqa")
        qid = str(rec.get("qid", i))
        facts = [str(f) for f in rec.get("facts") or []]
        paras = [Paragraph(f"{qid}~f{j}", str(rec.get("term", "")), f, {}) for j, f in enumerate(facts)]
        ans = rec["answer"]
        ans = "yes" if (ans is True or str(ans).lower() in ("true", "yes")) else "no"
        yield Item(
            id=qid,
            question=rec["question"],
            answers=[ans],
            type=YESNO,
            gold_ids=[p.id for p in paras],
            paragraphs=paras,
            decomposition=[SubQuestion(str(s)) for s in rec.get("decomposition") or []],
            metadata={"term": rec.get("term", "")},
        )


def load_flashrag(path: Path) -> Iterator[Item]:
    for i, rec in enumerate(read_jsonl(path)):
        need(rec, ("question", "golden_answers"), path, "flashrag")
        yield Item(id=str(rec.get("id", i)), question=rec["question"], answers=_dedupe(rec["golden_answers"]))


def load_jsonl(path: Path) -> Iterator[Item]:
    for i, rec in enumerate(_json_records(path)):
        history: list[dict[str, str]] = []
        if "messages" in rec and "question" not in rec:
            rec = {**rec}
            try:
                rec["question"], history = split_messages(rec["messages"])
            except BadHistory as e:
                raise DatasetError(f"{path}: record {i + 1}: {e}") from None
        need(rec, ("question",), path, "jsonl")
        raw = [{"text": p} if isinstance(p, str) else p for p in rec.get("paragraphs") or []]
        paras = [Paragraph.from_dict({**p, "id": p.get("id") or f"{rec.get('id', i)}~p{j}"}) for j, p in enumerate(raw)]
        filters, kind = rec.get("filters"), str(rec.get("type", OPEN))
        if kind not in (OPEN, MC, YESNO):
            raise DatasetError(f"{path}: item {rec.get('id', i)} has type {kind!r}; use open, mc or yesno")
        yield Item(
            id=str(rec.get("id", i)),
            question=rec["question"],
            answers=_dedupe(rec.get("answers", rec.get("answer", []))),
            type=kind,
            choices=[str(c) for c in rec.get("choices") or []],
            gold_titles=[str(t) for t in rec.get("gold_titles") or []],
            gold_ids=[str(t) for t in rec.get("gold_ids") or []],
            paragraphs=paras,
            decomposition=[
                SubQuestion(**s) if isinstance(s, dict) else SubQuestion(str(s)) for s in rec.get("decomposition") or []
            ],
            filters=Filters.from_dict(filters)
            if isinstance(filters, dict)
            else (Filters.parse(filters) if isinstance(filters, list) else None),
            must_mention=[str(m) for m in rec.get("must_mention") or []],
            must_not_mention=[str(m) for m in rec.get("must_not_mention") or []],
            metadata=dict(rec.get("metadata") or {}),
            history=history,
            standalone=str(rec.get("standalone") or ""),
        )


# --------------------------------------------------------------------------- Chinese datasets
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
    (any variant, after :func:`~sleuth.eval.metrics.normalize_zh`); when none does, the
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
    """RGB's Chinese information-integration questions (Chen et al., 2024, ``zh_int``): ``query``, ``answer``
    (a list of parts; a part is a string or a list of accepted variants, e.g. ``["11月15日", "16日"]``),
    ``positive`` (one list of passages per answer part) and ``negative`` (distractors on the same topic).
    Every passage becomes a paragraph of its question (the open setting pools them, each text once).
    Scored as in RGB: right when the reply mentions every part (``parts``); the share of parts mentioned
    (``part_rate``) and of parts with a positive passage among those the strategy saw (``part_recall``) too."""
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


LOADERS: dict[str, Callable[[Path], Iterable[Item]]] = {
    "hotpotqa": load_hotpotqa,
    "musique": load_musique,
    "timeqa": load_timeqa,
    "mmlu": load_mmlu,
    "strategyqa": load_strategyqa,
    "flashrag": load_flashrag,
    "policy_zh": load_policy_zh,
    "rgb_zh": lambda path: load_rgb_zh(_json_records(path), path),
    "jsonl": load_jsonl,
}

#: companion corpus files looked for beside the questions file, per format
_CORPUS_SIBLINGS = {
    "flashrag": ("wiki_passages.jsonl", "corpus.jsonl"),
    "policy_zh": ("corpus.jsonl",),
    "jsonl": ("corpus.jsonl",),
}


def _first_record(path: Path) -> dict[str, Any] | None:
    text = read_text(path).lstrip()
    try:  # a JSON list's first object, else the first line's
        rec = json.loads(text) if text.startswith("[") else json.loads(text.split("\n", 1)[0])
    except json.JSONDecodeError:
        return None
    if isinstance(rec, list):
        rec = rec[0] if rec else None
    return rec if isinstance(rec, dict) else None


def detect_format(path: Path) -> str:
    """Guess the format from the file's name and first record."""
    path = Path(path)
    name = path.name.lower()
    if name.endswith(".csv"):
        return "mmlu"
    rec = _first_record(path)
    if rec is None:
        raise DatasetError(f"cannot tell the format of {path}; pass --format ({', '.join(LOADERS)})")
    keys = set(rec)
    if "context" in keys and "supporting_facts" in keys:
        return "hotpotqa"
    if "question_decomposition" in keys or ("paragraphs" in keys and "answer_aliases" in keys):
        return "musique"
    if "targets" in keys:
        return "timeqa"
    if "facts" in keys and "qid" in keys:
        return "strategyqa"
    if "golden_answers" in keys:
        return "flashrag"
    if "positive" in keys and "query" in keys:
        return "rgb_zh"
    if "scope" in keys or "must_mention" in keys:
        return "policy_zh"
    if ("question" in keys or "messages" in keys) and ("answers" in keys or "answer" in keys):
        return "jsonl"
    raise DatasetError(f"cannot tell the format of {path} from its keys {sorted(keys)}; pass --format")


def load_dataset(path: str | Path, fmt: str | None = None, corpus: str | Path | None = None) -> Dataset:
    """Load any supported file; ``fmt`` None or ``"auto"`` detects it."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"data file {path} does not exist")
    if fmt in (None, "", "auto"):
        fmt = detect_format(path)
    if fmt not in LOADERS:
        raise DatasetError(f"unknown format {fmt!r}; choose one of {', '.join(LOADERS)}")
    items = list(LOADERS[fmt](path))
    if not items:
        raise DatasetError(f"{path} holds no questions")
    seen: set[str] = set()
    for it in items:
        if it.id in seen:
            raise DatasetError(f"{path}: question id {it.id!r} occurs twice")
        seen.add(it.id)
    corpus_path: Path | None = None
    if corpus is not None:
        corpus_path = Path(corpus)
        if not corpus_path.exists():
            raise DatasetError(f"corpus {corpus_path} does not exist")
    else:
        for sib in _CORPUS_SIBLINGS.get(fmt, ()):
            cand = path.parent / sib
            if cand.is_file() and cand.resolve() != path.resolve():
                corpus_path = cand
                break
    name = f"{path.parent.name}/{path.name}"
    return Dataset(name, fmt, path, items, corpus_path)
