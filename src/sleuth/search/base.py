"""Passages, filters and the one retriever protocol every knowledge source speaks."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

from sleuth.text_input import BadText, check_tree


class SearchError(RuntimeError):
    """Base class of every error a knowledge source raises."""

    reason = "search_error"


class SearchUnavailable(SearchError):
    """The source is down, unreachable, unconfigured (no key) or timed out."""

    reason = "search_unavailable"


class FilterError(ValueError):
    """A filter expression the user wrote is malformed."""


@dataclass
class Passage:
    """One retrieved chunk with its provenance."""

    id: str  # chunk id, unique within a source ("<doc_id>#<n>")
    text: str
    doc_id: str = ""
    title: str = ""
    score: float = 0.0
    source: str = ""  # file path, corpus name or URL
    section: str = ""
    version: str = ""
    region: str = ""
    url: str = ""
    acl: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    #: which query/route found it (e.g. ["original"], ["stepback"], ["q: ..."])
    found_by: list[str] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, str]:
        return (self.doc_id or self.id, self.id)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Passage:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in d.items() if k in known})

    def get(self, name: str) -> Any:
        """A field or metadata value by name (used by filters)."""
        if name in self.__dataclass_fields__ and name != "metadata":
            return getattr(self, name)
        return self.metadata.get(name)


@dataclass(frozen=True)
class Filters:
    """Constraints a caller's search must obey; enforced inside the index.

    * ``equals``: field -> allowed values (a passage matches if its value is one of them)
    * ``ranges``: field -> (low, high) inclusive, either end may be ``None``
    * ``acl``: the caller's labels; a passage is visible only if its ACL
      intersects them.  ``None`` means "no ACL restriction was asked for".
    """

    equals: tuple[tuple[str, tuple[str, ...]], ...] = ()
    ranges: tuple[tuple[str, tuple[Any, Any]], ...] = ()
    acl: frozenset[str] | None = None

    @classmethod
    def make(
        cls,
        equals: Mapping[str, str | Iterable[str]] | None = None,
        ranges: Mapping[str, tuple[Any, Any]] | None = None,
        acl: Iterable[str] | str | None = None,
    ) -> Filters:
        eq: list[tuple[str, tuple[str, ...]]] = []
        for k, v in sorted((equals or {}).items()):
            vals = (v,) if isinstance(v, str) else tuple(str(x) for x in v)
            eq.append((k, tuple(sorted(vals))))
        rg = tuple(sorted((k, tuple(v)) for k, v in (ranges or {}).items()))
        if isinstance(acl, str):
            acl = [acl]
        made = cls(tuple(eq), rg, frozenset(acl) if acl is not None else None)  # type: ignore[arg-type]
        try:  # lone surrogates, NUL, control characters: refused as in every other text (sleuth.text_input)
            check_tree(made.to_dict(), "filters")
        except BadText as e:
            raise FilterError(str(e)) from None
        return made

    @classmethod
    def parse(cls, exprs: Sequence[str]) -> Filters:
        """Parse CLI/API expressions: ``acl=all``, ``version=2025``,
        ``region=境内,境外``, ``year>=2001``, ``date<=2020-12-31``."""
        equals: dict[str, list[str]] = {}
        ranges: dict[str, list[Any]] = {}
        acl: list[str] | None = None
        for raw in exprs:
            expr = raw.strip()
            for op in (">=", "<=", "="):
                if op in expr:
                    key, _, val = expr.partition(op)
                    key, val = key.strip(), val.strip()
                    break
            else:
                raise FilterError(f"filter {raw!r} is not of the form key=value, key>=value or key<=value")
            if not key or not val:
                raise FilterError(f"filter {raw!r} needs both a key and a value")
            vals = [v.strip() for v in val.split(",") if v.strip()]
            if op == "=":
                if key == "acl":
                    acl = (acl or []) + vals
                else:
                    equals.setdefault(key, []).extend(vals)
            else:
                lo_hi = ranges.setdefault(key, [None, None])
                lo_hi[0 if op == ">=" else 1] = _num(val)
        return cls.make(equals, {k: (v[0], v[1]) for k, v in ranges.items()}, acl)

    def is_empty(self) -> bool:
        return not self.equals and not self.ranges and self.acl is None

    def matches(self, p: Passage) -> bool:
        """Reference semantics; indexes must enforce the same rule natively."""
        for key, allowed in self.equals:
            val = p.get(key)
            if isinstance(val, list):
                if not set(map(str, val)) & set(allowed):
                    return False
            elif val is None or str(val) not in allowed:
                return False
        for key, (lo, hi) in self.ranges:
            val = p.get(key)
            if val is None or val == "":
                return False
            v = _num(val)
            try:
                if lo is not None and v < lo:
                    return False
                if hi is not None and v > hi:
                    return False
            except TypeError:
                if lo is not None and str(v) < str(lo):
                    return False
                if hi is not None and str(v) > str(hi):
                    return False
        if self.acl is not None and not (set(p.acl) & self.acl):
            return False
        return True

    def cache_key(self) -> str:
        """A canonical string: the scope is part of every cache key."""
        acl = "*" if self.acl is None else ",".join(sorted(self.acl))
        return repr((self.equals, self.ranges, acl))

    def to_dict(self) -> dict[str, Any]:
        return {
            "equals": {k: list(v) for k, v in self.equals},
            "ranges": {k: list(v) for k, v in self.ranges},
            "acl": sorted(self.acl) if self.acl is not None else None,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> Filters:
        if not d:
            return cls()
        return cls.make(d.get("equals"), {k: tuple(v) for k, v in (d.get("ranges") or {}).items()}, d.get("acl"))


def _num(v: Any) -> Any:
    if isinstance(v, (int, float)):
        return v
    try:
        return float(v) if "." in str(v) else int(v)
    except (TypeError, ValueError):
        return str(v)


@runtime_checkable
class Retriever(Protocol):
    """A knowledge source: ranked passages for a query, within filters."""

    name: str

    def search(self, query: str, k: int = 5, filters: Filters | None = None) -> list[Passage]: ...

    def search_batch(
        self, queries: Sequence[str], k: int = 5, filters: Filters | None = None
    ) -> list[list[Passage]]: ...
