"""Readers of JSON and JSONL corpora (formats: docs/knowledge.md); bad lines and records are counted
and skipped.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from sleuth.search.doc import BadFile, Doc, IngestReport, decode, read_bytes

_TEXT_KEYS = ("text", "contents", "paragraph_text", "content", "body", "passage")
_ID_KEYS = ("id", "doc_id", "_id", "docid", "pid")
_CORE_KEYS = {"title", "section", "version", "region", "acl", "url", "source", *_TEXT_KEYS, *_ID_KEYS}


def _iter_records(text: str) -> Iterator[tuple[int, Any]]:
    """The records of a JSON document (an array, an object holding one, or one record); a JSONL file is
    streamed by :func:`_jsonl_stream` instead."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        what = "JSON" if text.lstrip().startswith("[") else "JSON or JSONL"
        raise BadFile(f"not valid {what} ({e.msg} at line {e.lineno})") from e
    if isinstance(data, list):
        yield from enumerate(data, 1)
    elif isinstance(data, Mapping):
        inner = next((data[k] for k in ("data", "docs", "documents", "passages", "corpus") if k in data), None)
        if isinstance(inner, list):
            yield from enumerate(inner, 1)
        else:
            yield 1, data


def detect_format(rec: Any) -> str:
    """The corpus format of one record (``generic`` when nothing specific matches)."""
    if not isinstance(rec, Mapping):
        return "unknown"
    if "contents" in rec and not any(k in rec for k in ("text", "paragraph_text")):
        return "flashrag"
    ctx = rec.get("context")
    if isinstance(ctx, Mapping) and "sentences" in ctx:
        return "hotpotqa"
    if isinstance(ctx, list) and ctx and isinstance(ctx[0], list) and len(ctx[0]) == 2:
        return "hotpotqa"
    paras = rec.get("paragraphs")
    if isinstance(paras, list) and paras and isinstance(paras[0], Mapping):
        if "paragraph_text" in paras[0]:
            return "musique"
        if "text" in paras[0]:
            return "timeqa"
    if isinstance(rec.get("facts"), list):
        return "strategyqa"
    if "acl" in rec or "section" in rec or "version" in rec:
        return "policy"
    if any(k in rec for k in _TEXT_KEYS):
        return "generic"
    return "unknown"


def _jsonl_stream(path: Path, report: IngestReport) -> Iterator[tuple[int, Any]] | None:
    """The records of a JSONL file read a line at a time (memory flat in the file's size), or None when
    the file is not JSONL (its first line is no JSON value of its own: a JSON array or document)."""
    with path.open("rb") as probe:
        gz = probe.read(2) == b"\x1f\x8b"
    f: IO[bytes] = gzip.open(path, "rb") if gz else path.open("rb")  # noqa: SIM115 - the generator closes it
    try:
        lineno, first = 0, b""
        while not first.strip():
            first = _readline(f)
            lineno += 1
            if not first:
                raise BadFile("empty file")
        first = first.removeprefix(b"\xef\xbb\xbf")
        if b"\x00" in first[:8192]:
            raise BadFile("binary file (not text)")
        if first.lstrip().startswith(b"["):
            f.close()
            return None
        try:
            rec = json.loads(_line_text(first, lineno))
        except json.JSONDecodeError:
            f.close()
            return None
    except BaseException:
        f.close()
        raise
    return _jsonl_rest(f, path, report, lineno, rec)


def _jsonl_rest(f: IO[bytes], path: Path, report: IngestReport, lineno: int, first: Any) -> Iterator[tuple[int, Any]]:
    with f:
        yield lineno, first
        while line := _readline(f):
            lineno += 1
            if not line.strip():
                continue
            try:
                yield lineno, json.loads(_line_text(line, lineno))
            except json.JSONDecodeError:
                report.bad_lines[str(path)] = report.bad_lines.get(str(path), 0) + 1


def _readline(f: IO[bytes]) -> bytes:
    try:
        return f.readline()
    except (OSError, EOFError) as e:  # a gzip member cut short or corrupt
        raise BadFile(f"damaged gzip file ({e})") from e


def _line_text(line: bytes, lineno: int) -> str:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadFile(f"not valid UTF-8 text at line {lineno} (wrong encoding? byte {e.start})") from e


def read_json_file(path: Path, fmt: str, report: IngestReport, seen: dict[str, set[str]]) -> Iterator[Doc]:
    """The documents of one JSON / JSONL corpus file (``fmt="auto"``: detected from its first record).
    A JSONL file (gzipped or not) is streamed a line at a time; a JSON document is read whole."""
    records = _jsonl_stream(path, report)
    if records is None:
        records = _iter_records(decode(read_bytes(path)))
    file_fmt = None if fmt == "auto" else fmt
    for lineno, rec in records:
        if not isinstance(rec, Mapping):
            report.bad_lines[str(path)] = report.bad_lines.get(str(path), 0) + 1
            continue
        if file_fmt is None:
            file_fmt = detect_format(rec)
            if file_fmt == "unknown":
                raise BadFile(f"unrecognised record shape (keys: {', '.join(sorted(rec)[:8])})")
        try:
            yield from _RECORD_READERS[file_fmt](rec, path, lineno, seen.setdefault(file_fmt, set()))
        except (KeyError, TypeError, ValueError, AttributeError):
            report.bad_lines[str(path)] = report.bad_lines.get(str(path), 0) + 1


def _flashrag(rec: Mapping[str, Any], path: Path, lineno: int, seen: set[str]) -> Iterator[Doc]:
    contents = str(rec["contents"])
    first, sep, rest = contents.partition("\n")
    title, body = (first.strip().strip('"').strip(), rest.strip()) if sep else ("", contents.strip())
    doc_id = str(rec.get("id", f"{path.stem}:{lineno}"))
    meta = _extra_metadata(rec, {"contents"})
    yield Doc(doc_id=doc_id, title=title, text=body, source=str(path), metadata=meta)


def _hotpotqa(rec: Mapping[str, Any], path: Path, lineno: int, seen: set[str]) -> Iterator[Doc]:
    ctx = rec["context"]
    pairs = zip(ctx["title"], ctx["sentences"], strict=True) if isinstance(ctx, Mapping) else ctx
    for title, sents in pairs:
        title = str(title)
        if title in seen:
            continue
        seen.add(title)
        text = "".join(sents).strip()
        if text:
            yield Doc(doc_id=title, title=title, text=text, source=str(path))


def _musique(rec: Mapping[str, Any], path: Path, lineno: int, seen: set[str]) -> Iterator[Doc]:
    for para in rec["paragraphs"]:
        title = str(para.get("title", ""))
        text = str(para.get("paragraph_text", "")).strip()
        key = hashlib.sha1(f"{title}\n{text}".encode()).hexdigest()
        if not text or key in seen:
            continue
        seen.add(key)
        yield Doc(doc_id=f"{title}~{key[:8]}" if title else key[:16], title=title, text=text, source=str(path))


def _timeqa(rec: Mapping[str, Any], path: Path, lineno: int, seen: set[str]) -> Iterator[Doc]:
    page = str(rec.get("idx", "")).split("#")[0] or f"{path.stem}:{lineno}"
    if page in seen:
        return
    seen.add(page)
    paras = [p for p in rec["paragraphs"] if str(p.get("text", "")).strip()]
    if not paras:
        return
    title = str(paras[0].get("title", "")).strip()
    url = f"https://en.wikipedia.org{page}" if page.startswith("/wiki/") else ""
    blocks = [("", str(p["text"]).strip()) for p in paras]
    yield Doc(doc_id=page, title=title, blocks=blocks, source=str(path), url=url)


def _strategyqa(rec: Mapping[str, Any], path: Path, lineno: int, seen: set[str]) -> Iterator[Doc]:
    facts = [str(f).strip() for f in rec["facts"] if str(f).strip()]
    key = hashlib.sha1("\n".join(facts).encode()).hexdigest()
    if not facts or key in seen:
        return
    seen.add(key)
    doc_id = str(rec.get("qid") or f"{path.stem}:{lineno}")
    title = str(rec.get("term", ""))
    meta = {"description": str(rec["description"])} if rec.get("description") else {}
    yield Doc(doc_id=doc_id, title=title, blocks=[("", f) for f in facts], source=str(path), metadata=meta)


def _generic(rec: Mapping[str, Any], path: Path, lineno: int, seen: set[str]) -> Iterator[Doc]:
    text_key = next((k for k in _TEXT_KEYS if k in rec and rec[k] is not None), None)
    if text_key is None:
        raise KeyError("text")
    text = str(rec[text_key]).strip()
    if not text:
        return
    title = str(rec.get("title") or "")
    id_key = next((k for k in _ID_KEYS if rec.get(k) not in (None, "")), None)
    doc_id = str(rec[id_key]) if id_key else (title or f"{path.stem}:{lineno}")
    if not id_key and title:
        # pooled corpora without ids (train_corpus.json): same title, different text
        key = hashlib.sha1(f"{title}\n{text}".encode()).hexdigest()
        if key in seen:
            return
        seen.add(key)
        doc_id = f"{title}~{key[:8]}"
    acl = rec.get("acl")
    yield Doc(
        doc_id=doc_id,
        title=title,
        text=text,
        section=_str(rec.get("section")),
        version=_str(rec.get("version")),
        region=_str(rec.get("region")),
        acl=normalize_acl(acl) if acl is not None else None,
        source=_str(rec.get("source")) or str(path),
        url=_str(rec.get("url")),
        metadata=_extra_metadata(rec, _CORE_KEYS),
    )


_RECORD_READERS = {
    "flashrag": _flashrag,
    "hotpotqa": _hotpotqa,
    "musique": _musique,
    "timeqa": _timeqa,
    "strategyqa": _strategyqa,
    "policy": _generic,
    "generic": _generic,
}


def normalize_acl(acl: Any) -> list[str]:
    """ACL labels from a string (``"all"``, ``"hr,finance"``) or a list."""
    if isinstance(acl, str):
        items: list[Any] = acl.split(",")
    elif isinstance(acl, (list, tuple, set, frozenset)):
        items = list(acl)
    else:
        items = [acl]
    return sorted({str(a).strip() for a in items if str(a).strip()})


def _str(v: Any) -> str:
    return "" if v is None else str(v)


def _extra_metadata(rec: Mapping[str, Any], skip: set[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in rec.items():
        if k in skip or v is None:
            continue
        if isinstance(v, (str, int, float, bool)):
            out[str(k)] = v
        elif isinstance(v, list) and all(isinstance(x, (str, int, float, bool)) for x in v) and len(v) <= 64:
            out[str(k)] = list(v)
    return out
