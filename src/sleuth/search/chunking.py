"""Split :class:`~sleuth.search.ingest.Doc` records into passages with stable ids (``"<doc_id>#<n>"``).

Paragraphs and sections are boundaries; long paragraphs split at sentence ends (Chinese gets half the
character budget); :func:`passage_hash` finds identical passages so each is stored once.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator

from sleuth.search.base import Passage
from sleuth.search.ingest import Doc
from sleuth.search.tokenize import has_cjk

__all__ = ["DEFAULT_MAX_CHARS", "chunk_doc", "passage_hash", "split_sentences"]

DEFAULT_MAX_CHARS = 1200

_SENT_END = re.compile(r"(?<=[。！？；!?])|(?<=[.])\s+(?=\S)")
_BLANK = re.compile(r"\n\s*\n")


def split_sentences(text: str) -> list[str]:
    """Sentences of English or Chinese text (punctuation kept with its sentence)."""
    parts = [p.strip() for p in _SENT_END.split(text)]
    return [p for p in parts if p]


def _hard_split(text: str, limit: int) -> Iterator[str]:
    while len(text) > limit:
        cut = text.rfind(" ", limit // 2, limit)
        cut = cut if cut > 0 else limit
        yield text[:cut].strip()
        text = text[cut:].strip()
    if text:
        yield text


def _limit(text: str, max_chars: int) -> int:
    return max(50, max_chars // 2) if has_cjk(text[:300]) else max_chars


def _units(para: str, max_chars: int) -> Iterator[str]:
    """A paragraph as it is, or its sentences packed into pieces under the limit."""
    limit = _limit(para, max_chars)
    if len(para) <= limit:
        yield para
        return
    sents = [piece for sent in split_sentences(para) for piece in _hard_split(sent, limit)]
    yield from _pack(sents, limit, "" if has_cjk(para[:300]) else " ")


def _pack(pieces: list[str], limit: int, joiner: str) -> Iterator[str]:
    buf: list[str] = []
    size = 0
    for piece in pieces:
        if buf and size + len(joiner) + len(piece) > limit:
            yield joiner.join(buf)
            buf, size = [], 0
        buf.append(piece)
        size += len(piece) + (len(joiner) if size else 0)
    if buf:
        yield joiner.join(buf)


def _blocks(doc: Doc) -> list[tuple[str, str]]:
    if doc.blocks is not None:
        return [(s or doc.section, t.strip()) for s, t in doc.blocks if t and t.strip()]
    return [(doc.section, p.strip()) for p in _BLANK.split(doc.text) if p.strip()]


def chunk_doc(
    doc: Doc, *, max_chars: int = DEFAULT_MAX_CHARS, default_acl: tuple[str, ...] = ("all",)
) -> list[Passage]:
    """The passages of one document, in order, with full provenance."""
    out: list[Passage] = []
    acl = list(doc.acl) if doc.acl is not None else list(default_acl)
    blocks = _blocks(doc)
    # group consecutive blocks of the same section
    groups: list[tuple[str, list[str]]] = []
    for section, para in blocks:
        if groups and groups[-1][0] == section:
            groups[-1][1].append(para)
        else:
            groups.append((section, [para]))
    for section, paras in groups:
        units = [u for para in paras for u in _units(para, max_chars)]
        for text in _pack(units, _limit("".join(paras), max_chars), "\n\n"):
            out.append(
                Passage(
                    id=f"{doc.doc_id}#{len(out)}",
                    text=text,
                    doc_id=doc.doc_id,
                    title=doc.title,
                    source=doc.source,
                    section=section,
                    version=doc.version,
                    region=doc.region,
                    url=doc.url,
                    acl=acl,
                    metadata=dict(doc.metadata),
                )
            )
    return out


def passage_hash(p: Passage) -> str:
    """Identity of a passage's content and scope (not of where it came from)."""
    meta = sorted((str(k), repr(v)) for k, v in p.metadata.items()) if p.metadata else ()
    blob = repr((" ".join(p.text.split()), p.title, p.version, p.region, sorted(p.acl), meta))
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()
