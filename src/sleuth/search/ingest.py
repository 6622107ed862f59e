"""Readers for every corpus shape Sleuth indexes, producing :class:`Doc` records.

Supported inputs (``format="auto"`` detects them from the first record):

* ``flashrag``   JSONL ``{id, contents}`` where contents is ``"Title"\\ntext``
* ``hotpotqa``   HotpotQA (HF ``context{title, sentences}`` or the original
  ``[[title, sentences], ...]``); paragraphs pooled across questions, one per title
* ``musique``    MuSiQue question files (``paragraphs[{title, paragraph_text}]``)
  pooled across questions; ``train_corpus.json`` (``[{title, text}]``) reads as generic
* ``timeqa``     TimeQA (gzip JSONL with ``paragraphs[{title, text}]``), one doc per page
* ``strategyqa`` StrategyQA ``facts`` (one doc per question)
* ``policy`` / ``generic``  ``{id, title, text, section?, version?, region?, acl?, url?, ...}``;
  every other scalar key becomes filterable metadata
* folders and files of ``.txt``, ``.md``, ``.html``/``.htm`` and ``.pdf``

Bad files (binary, wrong encoding, empty, too large, unreadable, no passages)
are skipped and named in the :class:`IngestReport`; bad JSON lines are skipped
one by one and counted, the rest of the file is kept.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "DOC_SUFFIXES",
    "FORMATS",
    "JSON_SUFFIXES",
    "Doc",
    "IngestReport",
    "read_inputs",
]

FORMATS = ("auto", "flashrag", "hotpotqa", "musique", "policy", "generic", "timeqa", "strategyqa")
JSON_SUFFIXES = (".jsonl", ".json", ".jsonl.gz", ".json.gz", ".ndjson")
DOC_SUFFIXES = (".txt", ".md", ".markdown", ".html", ".htm", ".pdf")

DEFAULT_MAX_FILE_MB = 512
_TEXT_KEYS = ("text", "contents", "paragraph_text", "content", "body", "passage")
_ID_KEYS = ("id", "doc_id", "_id", "docid", "pid")
_CORE_KEYS = {"title", "section", "version", "region", "acl", "url", "source", *_TEXT_KEYS, *_ID_KEYS}


@dataclass
class Doc:
    """One source document before chunking.

    ``blocks`` are ``(section, paragraph)`` pairs when the reader knows the
    structure (HTML, Markdown, PDF pages, pre-split paragraphs); otherwise the
    chunker splits ``text`` on blank lines.
    """

    doc_id: str
    text: str = ""
    title: str = ""
    blocks: list[tuple[str, str]] | None = None
    section: str = ""
    version: str = ""
    region: str = ""
    acl: list[str] | None = None  # None: the index's default ACL applies
    source: str = ""
    url: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    markdown: bool = False

    def fingerprint(self) -> str:
        """Hash of everything that makes up the document's passages (not where it came from)."""
        meta = sorted((str(k), repr(v)) for k, v in self.metadata.items()) if self.metadata else ()
        blob = repr((self.title, self.text, self.blocks, self.section, self.version, self.region, self.acl, meta))
        return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass
class IngestReport:
    """What a read saw: files read, files skipped (with the reason), bad lines."""

    files_read: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    bad_lines: dict[str, int] = field(default_factory=dict)
    docs: int = 0
    duplicate_docs: int = 0

    def skip(self, path: Path | str, reason: str) -> None:
        self.skipped.append((str(path), reason))

    def to_dict(self) -> dict[str, Any]:
        return {
            "files_read": list(self.files_read),
            "skipped": [{"path": p, "reason": r} for p, r in self.skipped],
            "bad_lines": dict(self.bad_lines),
            "docs": self.docs,
            "duplicate_docs": self.duplicate_docs,
        }


class _BadFile(Exception):
    """A file that must be skipped as a whole; the message is the reason."""


# ----------------------------------------------------------------------------- entry point


def read_inputs(
    inputs: list[str | Path] | tuple[str | Path, ...],
    *,
    format: str = "auto",
    report: IngestReport | None = None,
    max_file_mb: float = DEFAULT_MAX_FILE_MB,
) -> Iterator[Doc]:
    """Yield the documents of every input file or folder (folders recursively, sorted).

    Problems are recorded in ``report`` (if given) and never stop the read.
    """
    if format not in FORMATS:
        raise ValueError(f"unknown corpus format {format!r}; choose one of {', '.join(FORMATS)}")
    report = report if report is not None else IngestReport()
    seen_titles: dict[str, set[str]] = {}  # format -> titles/pages already pooled
    for raw in inputs:
        root = Path(raw).expanduser()
        if not root.exists():
            report.skip(root, "no such file or folder")
            continue
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        for path in files:
            if any(part.startswith(".") for part in path.relative_to(root).parts) and path != root:
                continue  # hidden files and folders inside a corpus folder
            name = path.name.lower()
            is_json = name.endswith(JSON_SUFFIXES)
            is_doc = name.endswith(DOC_SUFFIXES)
            if not (is_json or is_doc):
                report.skip(path, f"unsupported file type {path.suffix or '(none)'!r}")
                continue
            try:
                _check_size(path, max_file_mb)
                rel = path.relative_to(root) if root.is_dir() else Path(path.name)
                it = _read_json_file(path, format, report, seen_titles) if is_json else _read_document(path, rel)
                n = 0
                for doc in it:
                    n += 1
                    report.docs += 1
                    yield doc
                if n == 0:
                    raise _BadFile("no passages found in it")
                report.files_read.append(str(path))
            except _BadFile as e:
                report.skip(path, str(e))
            except OSError as e:
                report.skip(path, f"cannot be read ({e.strerror or e})")


def _check_size(path: Path, max_file_mb: float) -> None:
    size = path.stat().st_size
    if size == 0:
        raise _BadFile("empty file")
    if size > max_file_mb * 1024 * 1024:
        raise _BadFile(f"file too large ({size / 2**20:.0f} MB > {max_file_mb:g} MB limit)")


def _read_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as e:
            raise _BadFile(f"damaged gzip file ({e})") from e
    return data


def _decode(data: bytes) -> str:
    if not data.strip():
        raise _BadFile("empty file")
    if b"\x00" in data[:8192]:
        raise _BadFile("binary file (not text)")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise _BadFile(f"not valid UTF-8 text (wrong encoding? byte {e.start})") from e


# ----------------------------------------------------------------------------- JSON corpora


def _iter_records(path: Path, text: str, report: IngestReport) -> Iterator[tuple[int, Any]]:
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise _BadFile(f"not valid JSON ({e.msg} at line {e.lineno})") from e
        yield from enumerate(data, 1)
        return
    lines = text.splitlines()
    first = next((ln for ln in lines if ln.strip()), "")
    try:
        json.loads(first)
        jsonl = True
    except json.JSONDecodeError:
        jsonl = False
    if not jsonl:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise _BadFile(f"not valid JSON or JSONL ({e.msg} at line {e.lineno})") from e
        if isinstance(data, Mapping):
            inner = next((data[k] for k in ("data", "docs", "documents", "passages", "corpus") if k in data), None)
            if isinstance(inner, list):
                yield from enumerate(inner, 1)
            else:
                yield 1, data
        return
    for i, ln in enumerate(lines, 1):
        if not ln.strip():
            continue
        try:
            yield i, json.loads(ln)
        except json.JSONDecodeError:
            report.bad_lines[str(path)] = report.bad_lines.get(str(path), 0) + 1


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


def _read_json_file(path: Path, fmt: str, report: IngestReport, seen: dict[str, set[str]]) -> Iterator[Doc]:
    text = _decode(_read_bytes(path))
    file_fmt = None if fmt == "auto" else fmt
    for lineno, rec in _iter_records(path, text, report):
        if not isinstance(rec, Mapping):
            report.bad_lines[str(path)] = report.bad_lines.get(str(path), 0) + 1
            continue
        if file_fmt is None:
            file_fmt = detect_format(rec)
            if file_fmt == "unknown":
                raise _BadFile(f"unrecognised record shape (keys: {', '.join(sorted(rec)[:8])})")
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


# ----------------------------------------------------------------------------- document files

_MD_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def _read_document(path: Path, rel: Path) -> Iterator[Doc]:
    suffix = path.suffix.lower()
    doc_id = rel.as_posix()
    if suffix == ".pdf":
        yield _read_pdf(path, doc_id)
        return
    text = _decode(path.read_bytes())
    if suffix in (".html", ".htm"):
        yield _read_html(text, path, doc_id)
    elif suffix in (".md", ".markdown"):
        blocks, title = _markdown_blocks(text)
        yield Doc(doc_id=doc_id, title=title or path.stem, blocks=blocks, source=str(path), markdown=True)
    else:
        yield Doc(doc_id=doc_id, title=path.stem, text=text.strip(), source=str(path))


def _markdown_blocks(text: str) -> tuple[list[tuple[str, str]], str]:
    blocks: list[tuple[str, str]] = []
    section, title, buf = "", "", []
    in_code = False

    def flush() -> None:
        para = "\n".join(buf).strip()
        if para:
            blocks.append((section, para))
        buf.clear()

    for line in text.splitlines():
        if line.strip().startswith("```"):
            in_code = not in_code
        m = None if in_code else _MD_HEADING.match(line)
        if m:
            flush()
            section = m.group(2).strip()
            if len(m.group(1)) == 1 and not title:
                title = section
        elif not line.strip() and not in_code:
            flush()
        else:
            buf.append(line)
    flush()
    return blocks, title


def _read_html(text: str, path: Path, doc_id: str) -> Doc:
    from selectolax.lexbor import LexborHTMLParser as HTMLParser

    tree = HTMLParser(text)
    for node in tree.css("script, style, noscript, nav, header, footer, template"):
        node.decompose()
    title_node = tree.css_first("title") or tree.css_first("h1")
    title = title_node.text(strip=True) if title_node else path.stem
    blocks: list[tuple[str, str]] = []
    section = ""
    body = tree.body or tree.root
    if body is not None:
        for node in body.css("h1, h2, h3, h4, h5, h6, p, li, pre, blockquote, td, th, dd, dt"):
            txt = " ".join(node.text(separator=" ").split())
            if not txt:
                continue
            if node.tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
                section = txt
            else:
                blocks.append((section, txt))
        if not blocks:
            txt = " ".join(body.text(separator=" ").split())
            if txt:
                blocks.append(("", txt))
    if not blocks:
        raise _BadFile("no text in the HTML page")
    return Doc(doc_id=doc_id, title=title, blocks=blocks, source=str(path))


def _read_pdf(path: Path, doc_id: str) -> Doc:
    import logging

    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    logging.getLogger("pypdf").setLevel(logging.ERROR)
    try:
        reader = PdfReader(io.BytesIO(path.read_bytes()))
        if reader.is_encrypted:
            raise _BadFile("encrypted PDF")
        blocks: list[tuple[str, str]] = []
        for n, page in enumerate(reader.pages, 1):
            txt = (page.extract_text() or "").strip()
            for para in re.split(r"\n\s*\n", txt):
                para = " ".join(para.split())
                if para:
                    blocks.append((f"page {n}", para))
        meta_title = (reader.metadata.title if reader.metadata else None) or path.stem
    except _BadFile:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, OSError) as e:
        raise _BadFile(f"damaged or unreadable PDF ({type(e).__name__})") from e
    if not blocks:
        raise _BadFile("no extractable text in the PDF")
    return Doc(doc_id=doc_id, title=str(meta_title), blocks=blocks, source=str(path))
