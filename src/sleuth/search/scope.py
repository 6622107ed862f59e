"""Access scope as index terms (``acl``, ``eq``, ``rng``): how :class:`~sleuth.search.base.Filters` become term
sets that the lexical and vector indexes enforce natively, with the semantics of :meth:`Filters.matches`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from sleuth.search.base import Filters, Passage

__all__ = ["FILTER_FIELDS", "RANGE_FIELDS", "passage_terms", "range_value", "values_in_range"]

#: Passage attributes usable in equality filters besides metadata keys.
FILTER_FIELDS = ("id", "doc_id", "title", "source", "section", "version", "region", "url")
#: Passage attributes usable in range filters besides metadata keys (a range on
#: another attribute matches nothing: hidden, never leaked).
RANGE_FIELDS = ("section", "version", "region")
_MAX_TERM = 512


_FIELDS = frozenset(Passage.__dataclass_fields__)
_RANGE_FIELDS = frozenset(RANGE_FIELDS)


def _ok(t: str) -> bool:
    # an over-long term is left out: the passage then fails that filter (hidden, never leaked)
    return len(t) * 4 <= _MAX_TERM or len(t.encode("utf-8")) <= _MAX_TERM


def passage_terms(p: Passage) -> tuple[list[str], list[str], list[str]]:
    """``(acl, eq, rng)`` terms of a passage (see the module doc)."""
    eq: set[str] = set()
    rng: set[str] = set()
    items: list[tuple[str, Any]] = [(f, getattr(p, f)) for f in FILTER_FIELDS]
    if p.metadata:
        items += [(str(k), v) for k, v in p.metadata.items() if k not in _FIELDS]
    items.append(("acl", p.acl))
    for key, val in items:
        if val is None:
            continue
        if isinstance(val, list):
            eq.update(f"{key}={x}" for x in val)
        else:
            eq.add(f"{key}={val}")
        if val != "" and (key in _RANGE_FIELDS or key not in _FIELDS):
            rng.add(f"{key}={range_value(val)}")
    return sorted(set(p.acl)), sorted(t for t in eq if _ok(t)), sorted(t for t in rng if _ok(t))


def range_value(val: Any) -> str:
    """Canonical rendering of a value for range terms: JSON, so the type survives."""
    if isinstance(val, str) and '"' not in val and "\\" not in val and val.isprintable():
        return f'"{val}"'
    return json.dumps(val, ensure_ascii=False, sort_keys=True, default=str)


def values_in_range(key: str, rendered: Iterable[str], lo: Any, hi: Any) -> list[str]:
    """The rendered values of ``key`` that :meth:`Filters.matches` accepts for ``lo..hi``."""
    probe_filter = Filters(ranges=((key, (lo, hi)),))
    out = []
    for r in rendered:
        try:
            val = json.loads(r)
        except json.JSONDecodeError:
            val = r
        kw: dict[str, Any] = {"id": "", "text": ""}
        if key in FILTER_FIELDS or key == "acl":
            kw[key] = val
        else:
            kw["metadata"] = {key: val}
        probe = Passage(**kw)
        if probe_filter.matches(probe):
            out.append(r)
    return out
