"""Metadata for a folder of document files: the sidecar file ``sleuth-metadata.toml`` (format in docs/knowledge.md).

A deeper sidecar's values win over a shallower one's, a Markdown file's front matter over both.
"""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path
from typing import Any

from sleuth.search.doc import BadFile

__all__ = ["SIDECAR", "SidecarError", "Sidecars"]

SIDECAR = "sleuth-metadata.toml"


class SidecarError(BadFile):
    """A sidecar file that cannot be read; the message names it."""


class Sidecars:
    """The sidecar files under one input folder, read once each."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._cache: dict[Path, list[tuple[str, dict[str, Any]]] | None] = {}

    def _load(self, folder: Path) -> list[tuple[str, dict[str, Any]]] | None:
        if folder in self._cache:
            return self._cache[folder]
        path = folder / SIDECAR
        rules: list[tuple[str, dict[str, Any]]] | None = None
        if path.is_file():
            try:
                data = tomllib.loads(path.read_text(encoding="utf-8"))
            except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
                raise SidecarError(f"the metadata file {path} is not valid TOML ({e})") from e
            rules = []
            for key, value in data.items():
                if not isinstance(value, dict):
                    raise SidecarError(
                        f'the metadata file {path}: {key!r} must be a table ([defaults] or ["PATTERN"]), '
                        f"not a {type(value).__name__}"
                    )
                rules.append(("*" if key == "defaults" else key, value))
            rules.sort(key=lambda r: r[0] != "*")  # defaults first, then patterns in file order
        self._cache[folder] = rules
        return rules

    def fields_for(self, path: Path) -> dict[str, Any]:
        """The metadata for the file at ``path`` (inside :attr:`root`) from every sidecar above it."""
        out: dict[str, Any] = {}
        folders = [p for p in [path.parent, *path.parent.parents] if p == self.root or self.root in p.parents]
        for folder in reversed(folders):  # the input folder first, the file's own folder last
            rules = self._load(folder)
            if not rules:
                continue
            rel = path.relative_to(folder).as_posix()
            for pattern, values in rules:
                if fnmatch.fnmatchcase(rel, pattern) or fnmatch.fnmatchcase(path.name, pattern):
                    out.update(values)
        return out
