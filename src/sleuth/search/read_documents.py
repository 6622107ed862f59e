"""Readers of document files: plain text, Markdown (sections from headings), HTML and PDF."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from pathlib import Path

from sleuth.search.doc import BadFile, Doc, decode

_MD_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def read_document(path: Path, rel: Path) -> Iterator[Doc]:
    """The one document of a text, Markdown, HTML or PDF file (``rel``: its id, relative to the input)."""
    suffix = path.suffix.lower()
    doc_id = rel.as_posix()
    if suffix == ".pdf":
        yield _read_pdf(path, doc_id)
        return
    text = decode(path.read_bytes())
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
        raise BadFile("no text in the HTML page")
    return Doc(doc_id=doc_id, title=title, blocks=blocks, source=str(path))


def _read_pdf(path: Path, doc_id: str) -> Doc:
    import logging

    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    logging.getLogger("pypdf").setLevel(logging.ERROR)
    try:
        reader = PdfReader(io.BytesIO(path.read_bytes()))
        if reader.is_encrypted:
            raise BadFile("encrypted PDF")
        blocks: list[tuple[str, str]] = []
        for n, page in enumerate(reader.pages, 1):
            txt = (page.extract_text() or "").strip()
            for para in re.split(r"\n\s*\n", txt):
                para = " ".join(para.split())
                if para:
                    blocks.append((f"page {n}", para))
        meta_title = (reader.metadata.title if reader.metadata else None) or path.stem
    except BadFile:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, OSError) as e:
        raise BadFile(f"damaged or unreadable PDF ({type(e).__name__})") from e
    if not blocks:
        raise BadFile("no extractable text in the PDF")
    return Doc(doc_id=doc_id, title=str(meta_title), blocks=blocks, source=str(path))
