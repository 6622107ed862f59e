"""A request's scope: the principal's widest scope, narrowed (never widened) by what it asks.

:func:`effective_scope` is framework-free so that every surface applies the same rule; the rule for each kind
of filter is in docs/server.md.  Anything refused raises :class:`ScopeError` (HTTP 403).  Always:
``effective.matches(p)`` implies ``principal.scope.matches(p)`` and ``requested.matches(p)``.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

from sleuth.search.base import Filters, Passage

from .principals import Principal


class ScopeError(PermissionError):
    """The request asks for something outside its principal's scope."""

    def __init__(self, part: str, message: str) -> None:
        super().__init__(message)
        self.part = part
        self.message = message


def _fold(key: str) -> str:
    return unicodedata.normalize("NFKC", key).strip().casefold()


def _in_range(key: str, value: Any, bounds: tuple[Any, Any]) -> bool:
    kw: dict[str, Any] = {"id": "", "text": ""}
    if key in Passage.__dataclass_fields__ and key not in ("metadata", "acl"):
        kw[key] = value
    else:
        kw["metadata"] = {key: value}
    return Filters(ranges=((key, bounds),)).matches(Passage(**kw))


def _le(a: Any, b: Any) -> bool:
    try:
        return bool(a <= b)
    except TypeError:
        return str(a) <= str(b)


def _show(values: Any) -> str:
    return json.dumps(sorted(map(str, values)), ensure_ascii=False)


def effective_scope(principal: Principal | Filters, requested: Filters) -> Filters:
    """The scope a request gets: ``principal``'s widest scope narrowed by ``requested``."""
    held = principal.scope if isinstance(principal, Principal) else principal
    held_eq = dict(held.equals)
    held_rg = dict(held.ranges)
    restricted = set(held_eq) | set(held_rg) | ({"acl"} if held.acl is not None else set())
    folded = {_fold(k): k for k in restricted}
    for key in [k for k, _ in requested.equals] + [k for k, _ in requested.ranges]:
        twin = folded.get(_fold(key))
        if twin is not None and twin != key:
            raise ScopeError(key, f"filters: {key!r} is not the field {twin!r} of your scope (names are exact)")

    # ACL groups
    acl = held.acl
    if requested.acl is not None:
        if held.acl is not None and not requested.acl <= held.acl:
            extra = requested.acl - held.acl
            raise ScopeError("acl", f"filters: acl {_show(extra)} is outside your scope (you hold {_show(held.acl)})")
        acl = requested.acl

    # equality
    equals = dict(held_eq)
    for key, vals in requested.equals:
        if key == "acl" and held.acl is not None and not set(vals) <= held.acl:
            extra = set(vals) - held.acl
            raise ScopeError("acl", f"filters: acl {_show(extra)} is outside your scope (you hold {_show(held.acl)})")
        if key in held_eq and not set(vals) <= set(held_eq[key]):
            extra = set(vals) - set(held_eq[key])
            raise ScopeError(
                key, f"filters: {key} {_show(extra)} is outside your scope (you hold {_show(held_eq[key])})"
            )
        if key in held_rg:
            out = [v for v in vals if not _in_range(key, v, held_rg[key])]
            if out:
                lo, hi = held_rg[key]
                raise ScopeError(key, f"filters: {key} {_show(out)} is outside your scope (range {lo} .. {hi})")
        equals[key] = tuple(sorted(vals))

    # ranges
    ranges = dict(held_rg)
    for key, (lo, hi) in requested.ranges:
        if key in held_rg:
            hlo, hhi = held_rg[key]
            if (lo is not None and hlo is not None and not _le(hlo, lo)) or (
                hi is not None and hhi is not None and not _le(hi, hhi)
            ):
                raise ScopeError(key, f"filters: the range of {key} reaches outside your scope ({hlo} .. {hhi})")
            lo = lo if lo is not None else hlo
            hi = hi if hi is not None else hhi
        ranges[key] = (lo, hi)
    return Filters(tuple(sorted(equals.items())), tuple(sorted(ranges.items())), acl)


def check_source(principal: Principal, source: str) -> None:
    """Refuse a source the principal may not search."""
    if not principal.may_use(source):
        raise ScopeError("index", f"index: the source {source!r} is outside your scope")


def default_source(principal: Principal, sources: list[str]) -> str | None:
    """The source a request that names none gets: the first the principal may use."""
    if principal.sources is None:
        return None  # the server's default, unchanged
    for s in sources:
        if principal.may_use(s):
            return s
    raise ScopeError("index", "index: no source of this server is inside your scope")


class DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for k, v in pairs:
        if k in seen:
            raise DuplicateKey(k)
        seen[k] = v
    return seen


def duplicated_key(body: bytes) -> str | None:
    """The first key a JSON body repeats inside one object (parsers disagree on which copy wins)."""
    try:
        json.loads(body, object_pairs_hook=_no_duplicates)
    except DuplicateKey as e:
        return str(e)
    except ValueError:
        return None  # not JSON: the body model reports it
    return None
