"""What every corpus reader shares: the :class:`Doc` it produces, the read's report, the byte checks.

:class:`BadFile` is how a reader says "skip this whole file"; its message is the reason.
"""

from __future__ import annotations

import gzip
import hashlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


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

    def digest(self) -> str:
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
        return {**asdict(self), "skipped": [{"path": p, "reason": r} for p, r in self.skipped]}


class BadFile(Exception):
    """A file that must be skipped as a whole; the message is the reason."""


def read_bytes(path: Path) -> bytes:
    """The bytes of ``path``, gunzipped when they are gzip."""
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as e:
            raise BadFile(f"damaged gzip file ({e})") from e
    return data


def decode(data: bytes) -> str:
    """UTF-8 text (a BOM dropped); :class:`BadFile` for empty, binary or wrongly encoded data."""
    if not data.strip():
        raise BadFile("empty file")
    if b"\x00" in data[:8192]:
        raise BadFile("binary file (not text)")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise BadFile(f"not valid UTF-8 text (wrong encoding? byte {e.start})") from e
