"""Plain-text renderings of a run for chat clients: one line per reasoning step,
and a numbered citation list with provenance."""

from __future__ import annotations

from typing import Any

from sleuth.search.base import Passage
from sleuth.strategies.result import Event
from sleuth.strategies.text import clip

_TEXT_KEYS = ("question", "info", "message", "answer", "text", "query", "draft", "revised", "condensed", "note")


def _first_text(data: dict[str, Any]) -> str:
    for k in _TEXT_KEYS:
        v = data.get(k)
        if isinstance(v, str) and v.strip():
            return v.strip()
    return ""


def step_line(ev: Event) -> str | None:
    """A short human line for one step, or None for steps a chat reader does not need."""
    d = ev.data
    k = ev.kind
    if k == "start":
        return f"Strategy {d.get('strategy', '')}: {clip(d.get('question', ''), 120)}"
    if k == "rewrite":
        dropped = int(d.get("dropped_turns") or 0)
        note = f" ({dropped} older turn{'s' if dropped != 1 else ''} left out)" if dropped else ""
        return f"Follow-up read as: {clip(d.get('question', ''), 200)}{note}"
    if k == "llm":
        return None  # the raw completion is in the trace; the structured steps say what it meant
    if k == "search":
        hits = d.get("passages") or []
        titles = ", ".join(clip(p.get("title") or p.get("id", ""), 60) for p in hits[:3])
        more = f" (+{len(hits) - 3})" if len(hits) > 3 else ""
        return f"Search: {clip(d.get('query', ''), 160)} -> {len(hits)} passages" + (
            f": {titles}{more}" if titles else ""
        )
    if k == "answer":
        return None  # the answer is the content
    if k == "revision":
        head = f"Revision {d.get('step', '')}".strip()
        if d.get("skipped"):
            return f"{head}: skipped ({clip(d.get('reason', ''), 120)})"
        return f"{head}: searched {clip(d.get('query', ''), 120)!r}, " + (
            "draft changed" if d.get("changed", True) else "draft unchanged"
        )
    if k == "repair":
        return f"Repair {d.get('name', '')}" + (f": {clip(text, 300)}" if (text := _first_text(d)) else "")
    if k == "reason_in_documents":
        return f"Condensed documents for {clip(d.get('query', ''), 120)!r}: {clip(d.get('info', ''), 300)}"
    label = {
        "follow_up": "Follow up",
        "intermediate_answer": "Intermediate answer",
        "draft": "Draft",
        "step_back": "Step-back question",
        "note": "Note",
        "error": "Error",
    }.get(k, k.replace("_", " ").capitalize())
    text = _first_text(d) or ", ".join(f"{a}={b}" for a, b in d.items() if isinstance(b, (str, int, float)))
    return f"{label}: {clip(text, 300)}"


def provenance(p: Passage | dict[str, Any]) -> str:
    g = p.get if isinstance(p, dict) else (lambda k, default="": getattr(p, k, default))
    bits = [str(g("title", "") or g("doc_id", "") or g("id", ""))]
    src = str(g("source", "") or g("url", ""))
    if src:
        bits.append(f"source: {src}")
    if g("section", ""):
        bits.append(f"section: {g('section', '')}")
    if g("version", ""):
        bits.append(f"version: {g('version', '')}")
    return " — ".join(bits)


def citations_block(citations: list[Passage]) -> str:
    if not citations:
        return ""
    lines = ["", "", "Sources:"]
    lines += [f"[{i}] {provenance(p)}" for i, p in enumerate(citations, 1)]
    return "\n".join(lines)


#: what a citation carries besides its number (``Citation`` in the OpenAPI spec)
CITATION_FIELDS = ("id", "doc_id", "title", "source", "section", "version", "url", "text")


def citation_dicts(citations: list[Passage]) -> list[dict[str, Any]]:
    return [{"n": i, **{f: getattr(p, f) for f in CITATION_FIELDS}} for i, p in enumerate(citations, 1)]
