"""Readers of document files (text, Markdown, reStructuredText, HTML, PDF, ``.docx``; each also gzipped).

Markdown front matter fills the document's fields and metadata (the keys of :mod:`sleuth.search.metadata`).
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sleuth.extras import MissingExtra
from sleuth.search.doc import BadFile, Doc, decode, read_bytes

__all__ = ["DOC_TYPES", "doc_type", "read_document", "split_front_matter"]

_MD_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_RST_ADORNMENT = re.compile(r"""^([=\-`:'"~^_*+#<>.])\1{2,}\s*$""")

#: file suffix -> kind of reader (a ``.gz`` of any of them is read too)
DOC_TYPES = {
    ".txt": "text",
    ".md": "markdown",
    ".markdown": "markdown",
    ".rst": "rst",
    ".html": "html",
    ".htm": "html",
    ".pdf": "pdf",
    ".docx": "docx",
}
#: the kinds whose reader needs the ``ingest`` extra: what to call the work, the module it imports
NEEDS_INGEST = {
    "html": ("reading HTML files", "selectolax"),
    "pdf": ("reading PDF files", "pypdf"),
    "docx": ("reading .docx files", "docx"),
}


def doc_type(name: str) -> str | None:
    """The reader kind of a file name (``a.md``, ``a.md.gz``), or ``None`` when it is not a document."""
    name = name.lower().removesuffix(".gz")
    dot = name.rfind(".")
    return DOC_TYPES.get(name[dot:]) if dot >= 0 else None


def _stem(path: Path) -> str:
    name = path.name.removesuffix(".gz").removesuffix(".GZ")
    return Path(name).stem


def read_document(path: Path, rel: Path, fields: dict[str, Any] | None = None) -> Iterator[Doc]:
    """The one document of a document file (``rel``: its id, relative to the input; ``fields``:
    metadata from a sidecar file, which a Markdown file's own front matter overrides)."""
    yield _read(path, rel.as_posix(), fields or {})


def _read(path: Path, doc_id: str, fields: dict[str, Any]) -> Doc:
    kind = doc_type(path.name)
    data = read_bytes(path)  # gunzipped when it is gzip
    if kind == "pdf":
        return apply_fields(_read_pdf(data, path, doc_id), fields)
    if kind == "docx":
        return apply_fields(_read_docx(data, path, doc_id), fields)
    text = decode(data)
    if kind == "html":
        return apply_fields(_read_html(text, path, doc_id), fields)
    if kind == "markdown":
        meta, text = split_front_matter(text)
        blocks, title = _markdown_blocks(text)
        doc = Doc(doc_id=doc_id, title=title or _stem(path), blocks=blocks, source=str(path), markdown=True)
        return apply_fields(apply_fields(doc, fields), meta)
    if kind == "rst":
        blocks, title = _rst_blocks(text)
        return apply_fields(Doc(doc_id=doc_id, title=title or _stem(path), blocks=blocks, source=str(path)), fields)
    return apply_fields(Doc(doc_id=doc_id, title=_stem(path), text=text.strip(), source=str(path)), fields)


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """``(fields, rest)`` of a text that opens with ``---`` front matter (else ``({}, text)``).

    The supported subset of YAML: one ``key: value`` per line; a value in ``[a, b]`` is a
    list; quotes around a value are dropped; ``#`` lines are comments.
    """
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        return {}, text
    for end in range(1, min(len(lines), 200)):
        if lines[end].strip() in ("---", "..."):
            break
    else:
        return {}, text
    meta: dict[str, Any] = {}
    for ln in lines[1:end]:
        if not ln.strip() or ln.lstrip().startswith("#") or ":" not in ln:
            continue
        key, _, value = ln.partition(":")
        meta[key.strip()] = _scalar_or_list(value.strip())
    return meta, "\n".join(lines[end + 1 :])


def _unquote(v: str) -> str:
    return v[1:-1] if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"" else v


def _scalar_or_list(v: str) -> Any:
    if v.startswith("[") and v.endswith("]"):
        return [_unquote(x.strip()) for x in v[1:-1].split(",") if x.strip()]
    return _unquote(v)


def apply_fields(doc: Doc, meta: dict[str, Any]) -> Doc:
    """Set a document's fields from a metadata mapping (title, version, region, acl, url; the rest
    become metadata).  Values already set by the file itself are replaced."""
    from sleuth.search.read_json import normalize_acl

    for key, value in meta.items():
        if value is None:
            continue
        if key in ("title", "version", "region", "url", "section"):
            setattr(doc, key, str(value))
        elif key == "acl":
            doc.acl = normalize_acl(value)
        elif isinstance(value, (str, int, float, bool)) or (
            isinstance(value, list) and all(isinstance(x, (str, int, float, bool)) for x in value)
        ):
            doc.metadata[str(key)] = value
    return doc


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


def _rst_blocks(text: str) -> tuple[list[tuple[str, str]], str]:
    """Paragraphs of reStructuredText under their section titles (a line underlined, and perhaps
    overlined, with a repeated punctuation character); explicit markup lines (``.. x::``,
    comments, targets) are dropped, their indented content kept."""
    lines = text.splitlines()
    blocks: list[tuple[str, str]] = []
    section, title, buf = "", "", []

    def flush() -> None:
        para = " ".join(" ".join(buf).split())
        if para:
            blocks.append((section, para))
        buf.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if (
            _RST_ADORNMENT.match(line)
            and i + 2 < len(lines)
            and _RST_ADORNMENT.match(lines[i + 2])
            and lines[i + 1].strip()
        ):
            flush()  # overline, title, underline
            section = lines[i + 1].strip()
            title = title or section
            i += 3
            continue
        if (
            line.strip()
            and not line[0].isspace()
            and _RST_ADORNMENT.match(nxt)
            and len(nxt.strip()) >= len(line.strip())
        ):
            flush()
            section = line.strip()
            title = title or section
            i += 2
            continue
        if line.lstrip().startswith(".. "):
            flush()
            rest = line.lstrip()[3:]
            if "::" in rest and rest.split("::", 1)[1].strip():  # ``.. note:: text`` keeps its text
                buf.append(rest.split("::", 1)[1].strip())
        elif not line.strip():
            flush()
        elif not _RST_ADORNMENT.match(line):
            buf.append(line.strip())
        i += 1
    flush()
    return blocks, title


_HTML_BLOCKS = ("h1", "h2", "h3", "h4", "h5", "h6", "p", "li", "pre", "blockquote", "td", "th", "dd", "dt")
_HTML_BLOCK_SET = frozenset(_HTML_BLOCKS)


def _inside_block(node: Any) -> bool:
    """Whether an ancestor of ``node`` is itself a block (then that block's text holds this one's)."""
    parent = node.parent
    while parent is not None:
        if parent.tag in _HTML_BLOCK_SET:
            return True
        parent = parent.parent
    return False


def _read_html(text: str, path: Path, doc_id: str) -> Doc:
    try:
        from selectolax.lexbor import LexborHTMLParser as HTMLParser
    except ImportError as e:
        raise MissingExtra("ingest", NEEDS_INGEST["html"][0], ["selectolax"]) from e

    tree = HTMLParser(text)
    for node in tree.css("script, style, noscript, nav, header, footer, template"):
        node.decompose()
    title_node = tree.css_first("title") or tree.css_first("h1")
    title = title_node.text(strip=True) if title_node else _stem(path)
    blocks: list[tuple[str, str]] = []
    section = ""
    body = tree.body or tree.root
    if body is not None:
        for node in body.css(", ".join(_HTML_BLOCKS)):
            if _inside_block(node):
                continue  # nested blocks (<dd><p>, <li><p>, <blockquote><p>) are read once, in the outer one
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
        raise BadFile("no text in the HTML page")
    return Doc(doc_id=doc_id, title=title, blocks=blocks, source=str(path))


def _read_pdf(data: bytes, path: Path, doc_id: str) -> Doc:
    import logging

    try:
        from pypdf import PdfReader
        from pypdf.errors import PdfReadError
    except ImportError as e:
        raise MissingExtra("ingest", NEEDS_INGEST["pdf"][0], ["pypdf"]) from e

    logging.getLogger("pypdf").setLevel(logging.ERROR)
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise BadFile("encrypted PDF")
        blocks: list[tuple[str, str]] = []
        for n, page in enumerate(reader.pages, 1):
            txt = (page.extract_text() or "").strip()
            for para in re.split(r"\n\s*\n", txt):
                para = " ".join(para.split())
                if para:
                    blocks.append((f"page {n}", para))
        meta_title = (reader.metadata.title if reader.metadata else None) or _stem(path)
    except BadFile:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, OSError) as e:
        raise BadFile(f"damaged or unreadable PDF ({type(e).__name__})") from e
    if not blocks:
        raise BadFile("no extractable text in the PDF")
    return Doc(doc_id=doc_id, title=str(meta_title), blocks=blocks, source=str(path))


def _read_docx(data: bytes, path: Path, doc_id: str) -> Doc:
    """A Word document: paragraphs under the nearest heading (styles ``Heading 1..9``; ``Title``
    gives the title), table rows as ``cell | cell`` lines, in document order."""
    try:
        import docx
        from docx.opc.exceptions import PackageNotFoundError
        from docx.table import Table
    except ImportError as e:
        raise MissingExtra("ingest", NEEDS_INGEST["docx"][0], ["docx"]) from e
    import zipfile

    try:
        document = docx.Document(io.BytesIO(data))
        title = (document.core_properties.title or "").strip()
        blocks: list[tuple[str, str]] = []
        section = ""
        for item in document.iter_inner_content():
            if isinstance(item, Table):
                for row in item.rows:
                    cells: list[str] = []
                    for cell in row.cells:
                        txt = " ".join(cell.text.split())
                        if txt and (not cells or cells[-1] != txt):  # merged cells repeat their text
                            cells.append(txt)
                    if cells:
                        blocks.append((section, " | ".join(cells)))
                continue
            txt = " ".join(item.text.split())
            if not txt:
                continue
            style = (item.style.name if item.style is not None else "") or ""
            if style == "Title":
                title = title or txt
                section = txt
            elif style.startswith("Heading"):
                section = txt
                if not title and style == "Heading 1":
                    title = txt
            else:
                blocks.append((section, txt))
    except (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError) as e:
        raise BadFile(f"damaged or unreadable .docx ({type(e).__name__})") from e
    if not blocks:
        raise BadFile("no text in the .docx document")
    return Doc(doc_id=doc_id, title=title or _stem(path), blocks=blocks, source=str(path))
