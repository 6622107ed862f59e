"""Loaders for the evaluation formats (docs/eval.md, "Data", lists each format's shape): :data:`LOADERS` says,
per format, how one record becomes an :class:`Item`, which keys it needs and how its first record is
recognised (``--format auto``). Datasets that keep their retrieval corpus in a separate file
(FlashRAG's ``wiki_passages.jsonl``, policy_zh's ``corpus.jsonl``) find it beside the questions file;
``--corpus PATH`` overrides it.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

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
)
from sleuth.eval.metrics import part_hits
from sleuth.eval.policy import conclusion_of_gold
from sleuth.search.base import Filters
from sleuth.strategies.conversation import BadHistory, split_messages


# --------------------------------------------------------------------------- reading data files
def read_text(path: Path) -> str:
    """A data file's text (gzipped or not); :class:`DatasetError` when it cannot be read."""
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rt", encoding="utf-8") as f:
                return f.read()
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError, EOFError) as e:
        raise DatasetError(f"cannot read {path}: {e}") from e


def _json_records(path: Path) -> list[dict[str, Any]]:
    """A JSON list of objects, a JSON object holding one (``data``), or JSONL (blank lines skipped)."""
    text = read_text(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        records = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise DatasetError(f"{path}: line {n} is not valid JSON ({e.msg})") from e
            if not isinstance(records[-1], dict):
                raise DatasetError(f"{path}: line {n} is not a JSON object") from None
        return records
    if isinstance(data, dict):
        data = data.get("data") or data.get("questions") or [data]
    if not isinstance(data, list) or not all(isinstance(x, dict) for x in data):
        raise DatasetError(f"{path} is not a list of JSON objects")
    return data


def _csv_rows(path: Path) -> list[list[str]]:
    """An MMLU file's rows (question, four options, answer letter), its header row left out."""
    try:
        rows = list(csv.reader(read_text(path).splitlines()))
    except csv.Error as e:
        raise DatasetError(f"{path} is not a readable CSV ({e})") from e
    if rows and [c.strip().lower() for c in rows[0][:6]] == ["question", "a", "b", "c", "d", "answer"]:
        return rows[1:]
    return rows


def _dedupe(xs: Any) -> list[str]:
    """The non-empty texts of ``xs`` (one text, or a list of them), each once, in order."""
    return list(dict.fromkeys(str(x) for x in ([xs] if isinstance(xs, str | int | float | bool) else xs) if str(x)))


# --------------------------------------------------------------------------- one record -> one item
def _hotpotqa(rec: dict[str, Any], i: int, path: Path) -> Item:
    ctx = rec["context"]
    if isinstance(ctx, dict):  # HF format: {title: [...], sentences: [[...]]}
        pairs = list(zip(ctx.get("title", []), ctx.get("sentences", []), strict=False))
    else:  # original format: [[title, [sentences]], ...]
        pairs = [(c[0], c[1]) for c in ctx]
    sf = rec.get("supporting_facts") or {}
    gold = _dedupe(list(sf.get("title", []) if isinstance(sf, dict) else [f[0] for f in sf]))
    return Item(
        id=str(rec.get("id") or rec.get("_id") or i),
        question=rec["question"],
        answers=[str(rec["answer"])],
        # always open: typing yes/no items by their gold answer would leak it into the prompt
        type=OPEN,
        gold_titles=gold,
        gold_ids=gold,
        paragraphs=[Paragraph(t, t, "".join(s).strip(), {}) for t, s in pairs],
        metadata={"hop_type": rec.get("type", ""), "level": rec.get("level", "")},
    )


def _musique(rec: dict[str, Any], i: int, path: Path) -> Item:
    paras = []
    for p in rec["paragraphs"]:
        title, text = p.get("title", ""), p.get("paragraph_text", p.get("text", ""))
        h = hashlib.sha1(f"{title}\n{text}".encode()).hexdigest()  # a stable id: the title and a content hash
        pid = f"{title}~{h[:8]}" if title else h[:16]
        paras.append(Paragraph(pid, title, text, {"is_supporting": bool(p.get("is_supporting"))}))
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
    return Item(
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


def _timeqa(rec: dict[str, Any], i: int, path: Path) -> Item:
    raw = [p if isinstance(p, dict) else {"text": p} for p in rec.get("paragraphs") or []]
    paras = [
        Paragraph(f"{rec.get('idx', i)}~p{j}", str(p.get("title", "")).strip(), str(p.get("text", "")).strip())
        for j, p in enumerate(raw)
        if str(p.get("text", "")).strip()
    ]
    targets = [str(t).strip() for t in rec["targets"] if str(t).strip()]
    return Item(
        id=str(rec.get("idx", i)),
        question=rec["question"],
        answers=targets,
        gold_titles=[paras[0].title] if paras and paras[0].title else [],
        paragraphs=paras,
        answerable=bool(targets),
        metadata={"level": rec.get("level", "")},
    )


def _mmlu(row: list[str], i: int, path: Path) -> Item | None:
    if not row:
        return None
    if len(row) < 6 or row[5].strip().upper() not in LETTERS:
        raise DatasetError(f"{path}: row {i + 1} is not question,A,B,C,D,answer-letter")
    return Item(
        id=f"{path.stem}-{i + 1}",
        question=row[0].strip(),
        answers=[row[5].strip().upper()],
        type=MC,
        choices=[c.strip() for c in row[1:5]],
        metadata={"subject": re.sub(r"_(dev|val|test)$", "", path.stem)},
    )


def _strategyqa(rec: dict[str, Any], i: int, path: Path) -> Item:
    qid = str(rec.get("qid", i))
    facts = [str(f) for f in rec.get("facts") or []]
    paras = [Paragraph(f"{qid}~f{j}", str(rec.get("term", "")), f, {}) for j, f in enumerate(facts)]
    ans = rec["answer"]
    return Item(
        id=qid,
        question=rec["question"],
        answers=["yes" if (ans is True or str(ans).lower() in ("true", "yes")) else "no"],
        type=YESNO,
        gold_ids=[p.id for p in paras],
        paragraphs=paras,
        decomposition=[SubQuestion(str(s)) for s in rec.get("decomposition") or []],
        metadata={"term": rec.get("term", "")},
    )


def _flashrag(rec: dict[str, Any], i: int, path: Path) -> Item:
    return Item(id=str(rec.get("id", i)), question=rec["question"], answers=_dedupe(rec["golden_answers"]))


def _jsonl(rec: dict[str, Any], i: int, path: Path) -> Item:
    history: list[dict[str, str]] = []
    if "messages" in rec and "question" not in rec:
        try:
            question, history = split_messages(rec["messages"])
        except BadHistory as e:
            raise DatasetError(f"{path}: record {i + 1}: {e}") from None
        rec = {**rec, "question": question}
    if "question" not in rec:
        raise DatasetError(f"{path} does not look like jsonl: a record lacks question")
    paras = []
    for j, p in enumerate({"text": p} if isinstance(p, str) else p for p in rec.get("paragraphs") or []):
        pid = str(p.get("id") or f"{rec.get('id', i)}~p{j}")
        paras.append(Paragraph(pid, str(p.get("title", "")), str(p.get("text", "")), dict(p.get("metadata") or {})))
    filters, kind = rec.get("filters"), str(rec.get("type", OPEN))
    if kind not in (OPEN, MC, YESNO):
        raise DatasetError(f"{path}: item {rec.get('id', i)} has type {kind!r}; use open, mc or yesno")
    texts = ("choices", "gold_titles", "gold_ids", "must_mention", "must_not_mention")  # lists of texts, as given
    return Item(
        **{k: [str(x) for x in rec.get(k) or []] for k in texts},
        id=str(rec.get("id", i)),
        question=rec["question"],
        answers=_dedupe(rec.get("answers", rec.get("answer", []))),
        type=kind,
        paragraphs=paras,
        decomposition=[
            SubQuestion(**s) if isinstance(s, dict) else SubQuestion(str(s)) for s in rec.get("decomposition") or []
        ],
        filters=Filters.from_dict(filters)
        if isinstance(filters, dict)
        else (Filters.parse(filters) if isinstance(filters, list) else None),
        metadata=dict(rec.get("metadata") or {}),
        history=history,
        standalone=str(rec.get("standalone") or ""),
    )


# --------------------------------------------------------------------------- Chinese datasets
def passage_id(text: str) -> str:
    """The id of an RGB passage: a hash of its text (the same passage under two questions is one)."""
    return "rgb-" + hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


def answer_parts(rec: dict[str, Any]) -> list[list[str]]:
    """The answer parts of a record, each as its list of accepted variants."""
    answer = rec["answer"] if isinstance(rec["answer"], list) else [rec["answer"]]
    variants = ([str(v).strip() for v in (p if isinstance(p, list) else [p]) if str(v).strip()] for p in answer)
    return [v for v in variants if v]


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


def _rgb_zh(rec: dict[str, Any], i: int, path: Path) -> Item:
    """RGB's Chinese information-integration questions (Chen et al., 2024, ``zh_int``): ``query``, ``answer``
    (a list of parts; a part is a string or a list of accepted variants, e.g. ``["11月15日", "16日"]``),
    ``positive`` (one list of passages per answer part) and ``negative`` (distractors on the same topic).
    Every passage becomes a paragraph of its question (the open setting pools them, each text once).
    Scored as in RGB: right when the reply mentions every part (``parts``); the share of parts mentioned
    (``part_rate``) and of parts with a positive passage among those the strategy saw (``part_recall``) too."""
    parts = answer_parts(rec)
    if not parts:
        raise DatasetError(f"{path}: question {rec.get('id', i)} has no answer parts")
    positive = rec["positive"]
    if not isinstance(positive, list) or not all(isinstance(g, list) for g in positive):
        raise DatasetError(f"{path}: question {rec.get('id', i)}: positive must be a list of passage lists")
    texts = [str(t) for t in [t for group in positive for t in group] + list(rec.get("negative") or [])]
    paras = {passage_id(t): Paragraph(passage_id(t), "", t, {}) for t in texts}  # a text twice is one paragraph
    part_ids = [sorted({passage_id(t) for t in group}) for group in part_passages(rec, parts)]
    return Item(
        id=str(rec.get("id", i)),
        question=str(rec["query"]),
        # EM/F1 against all parts written out; the primary score is "every part mentioned"
        answers=["、".join(p[0] for p in parts)],
        gold_ids=sorted({i for ids in part_ids for i in ids}),
        paragraphs=list(paras.values()),
        metadata={"answer_parts": parts, "part_ids": part_ids},
    )


def _policy_zh(rec: dict[str, Any], i: int, path: Path) -> Item:
    """policy_zh JSONL: ``id, question, answer, conclusion, must_mention, evidence, scope`` (Chinese policy questions)."""
    if rec.get("conclusion") not in (None, "是", "否"):
        raise DatasetError(f"{path}: question {rec.get('id', i)}: conclusion must be 是, 否 or null")
    scope = rec.get("scope") or {}
    return Item(
        id=str(rec.get("id", i)),
        question=rec["question"],
        answers=[str(rec["answer"])],
        gold_ids=[str(e) for e in rec.get("evidence") or []],
        filters=Filters.make(equals={k: v for k, v in scope.items() if k != "acl"}, acl=scope.get("acl")),
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


class Format(NamedTuple):
    """How a format's records become items."""

    make: Callable[[Any, int, Path], Item | None]  # record (an MMLU row), its index, the file -> item (None: skip)
    need: str  # the keys every record must have
    #: the first record's keys that mark a file of this format: alternatives split by "|", keys joined by "+"
    sign: str
    corpus: str = ""  # companion corpus files looked for beside the questions file


#: the formats, in the order ``--format auto`` tries them (MMLU: a ``.csv`` file)
LOADERS: dict[str, Format] = {
    "hotpotqa": Format(_hotpotqa, "question answer context", "context+supporting_facts"),
    "musique": Format(_musique, "question answer paragraphs", "question_decomposition|paragraphs+answer_aliases"),
    "timeqa": Format(_timeqa, "question targets", "targets"),
    "mmlu": Format(_mmlu, "", ""),
    "strategyqa": Format(_strategyqa, "question answer", "facts+qid"),
    "flashrag": Format(_flashrag, "question golden_answers", "golden_answers", "wiki_passages.jsonl corpus.jsonl"),
    "policy_zh": Format(_policy_zh, "question answer", "scope|must_mention", "corpus.jsonl"),
    "rgb_zh": Format(_rgb_zh, "query answer positive", "positive+query"),
    "jsonl": Format(_jsonl, "", "question+answers|question+answer|messages+answers|messages+answer", "corpus.jsonl"),
}


def load_dataset(path: str | Path, fmt: str | None = None, corpus: str | Path | None = None) -> Dataset:
    """Load any supported file; ``fmt`` None or ``"auto"`` detects it."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"data file {path} does not exist")
    if fmt not in (None, "", "auto") and fmt not in LOADERS:
        raise DatasetError(f"unknown format {fmt!r}; choose one of {', '.join(LOADERS)}")
    if fmt in (None, "", "auto") and path.suffix.lower() == ".csv":
        fmt = "mmlu"
    records: list[Any] = _csv_rows(path) if fmt == "mmlu" else _json_records(path)
    if fmt in (None, "", "auto"):  # from the first record's keys
        first = records[0] if records else None
        if not isinstance(first, dict):
            raise DatasetError(f"cannot tell the format of {path}; pass --format ({', '.join(LOADERS)})")
        signs = {name: [set(alt.split("+")) for alt in f.sign.split("|") if alt] for name, f in LOADERS.items()}
        fmt = next((name for name, alts in signs.items() if any(keys <= set(first) for keys in alts)), None)
        if fmt is None:
            raise DatasetError(f"cannot tell the format of {path} from its keys {sorted(first)}; pass --format")
    form = LOADERS[fmt]
    items: dict[str, Item] = {}
    for i, rec in enumerate(records):
        missing = [k for k in form.need.split() if k not in rec]
        if missing:
            raise DatasetError(f"{path} does not look like {fmt}: a record lacks {', '.join(missing)}")
        item = form.make(rec, i, path)
        if item is not None and items.setdefault(item.id, item) is not item:
            raise DatasetError(f"{path}: question id {item.id!r} occurs twice")
    if not items:
        raise DatasetError(f"{path} holds no questions")
    corpus_path = Path(corpus) if corpus is not None else None
    if corpus_path is not None and not corpus_path.exists():
        raise DatasetError(f"corpus {corpus_path} does not exist")
    if corpus_path is None:
        siblings = (path.parent / s for s in form.corpus.split())
        corpus_path = next((c for c in siblings if c.is_file() and c.resolve() != path.resolve()), None)
    return Dataset(f"{path.parent.name}/{path.name}", fmt, path, list(items.values()), corpus_path)
