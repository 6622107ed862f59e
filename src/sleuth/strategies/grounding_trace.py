"""The claims of a recorded run, read back from its trace (re-grounding committed runs offline).

Each strategy records its claims while it runs (``RunState.cite``); a committed record
has only its trace.  :func:`claims_from_trace` rebuilds the same claims from the trace's
events, per strategy, so that :func:`~sleuth.strategies.grounding.ground` can be applied
to runs made before grounding existed (``benchmarks/bench_citations.py``).  The trace
keeps the first 500 characters of each passage, so a support found further into a long
passage is missed here (not in a live run).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sleuth.search.base import Passage
from sleuth.strategies.grounding import Claim, Grounding, ground
from sleuth.strategies.parsing import parse_cot, parse_long_answer
from sleuth.strategies.step_back import _CANNOT
from sleuth.strategies.text import cited_numbers

Event = Mapping[str, Any]


def _passages(ev: Event) -> list[Passage]:
    return [Passage.from_dict(p) for p in (ev.get("data") or {}).get("passages") or []]


def _found(searched: Mapping[str, Passage], ids: Sequence[str]) -> list[Passage]:
    return [searched[i] for i in ids if i in searched]


def _completion(events: Sequence[Event], step: str) -> str | None:
    """The model's reply at the last LLM call of ``step`` (``None`` when there is none)."""
    for ev in reversed(events):
        d = ev.get("data") or {}
        if ev.get("kind") == "llm" and d.get("step") == step:
            return str(d.get("completion") or "")
    return None


def _replied(events: Sequence[Event], step: str, recorded: str) -> str:
    """The answer as the model wrote it (the result's answer has its marks renumbered)."""
    reply = _completion(events, step)
    return recorded if reply is None else parse_long_answer(reply)[0].strip() or recorded


def claims_from_trace(strategy: str, result: Mapping[str, Any]) -> list[Claim]:
    """The claims ``strategy`` would have recorded in this run (empty for those that do not search)."""
    question = str(result.get("question") or "")
    events: list[Event] = list(result.get("trace") or [])
    claims: list[Claim] = []
    searched: dict[str, Passage] = {}  # every passage found so far, by id
    last: list[Passage] = []  # the latest search's passages
    for ev in events:
        kind, d = ev.get("kind"), ev.get("data") or {}
        if kind == "search":
            last = _passages(ev)
            searched.update((p.id, p) for p in last)
        elif strategy == "rag" and kind == "llm" and d.get("step") == "answer":
            text = str(d.get("completion") or "")
            claims.append(Claim(text, last, question, cited_numbers(text)))
        elif strategy == "self-ask" and kind == "intermediate_answer" and d.get("source") == "search":
            ids = d.get("passages") or []
            claims.append(Claim(str(d.get("answer") or ""), _found({p.id: p for p in last}, ids), str(d["question"])))
        elif strategy == "search-o1" and kind == "reason_in_documents" and d.get("helpful"):
            ids = d.get("passages") or []
            claims.append(Claim(str(d.get("info") or ""), _found({p.id: p for p in last}, ids), str(d["query"])))
    answer = str(result.get("answer") or "")
    if strategy == "step-back":
        answer = _replied(events, "answer", answer)
        rerank = next((e for e in events if e.get("kind") == "rerank"), None)
        ranking = ((rerank or {}).get("data") or {}).get("ranking") or []
        context = _found(searched, [r["id"] for r in ranking if r.get("in_context")])
        if context and not (_CANNOT.search(answer) and not cited_numbers(answer)):
            claims.append(Claim(answer, context, question, cited_numbers(answer)))
    elif strategy == "rat":
        answer = _replied(events, "final", answer)
        used: list[Passage] = []
        for ev in events:
            d = ev.get("data") or {}
            if ev.get("kind") == "revision" and not d.get("skipped"):
                used += _found(searched, d.get("passages") or [])
        if any(e.get("kind") == "draft" and "short_answer" in (e.get("data") or {}) for e in events):
            used = list({p.id: p for p in used}.values())  # since stop 36 each passage has one number, by first use
        if used and any(e.get("kind") == "llm" and (e.get("data") or {}).get("step") == "final" for e in events):
            claims.append(Claim(answer, used, question, cited_numbers(answer)))
    elif strategy in ("self-ask", "search-o1"):
        claims = _read_claim(events, searched, question) or claims  # a reading replaces the hops' claims
    return claims


def _read_claim(events: Sequence[Event], searched: Mapping[str, Passage], question: str) -> list[Claim]:
    """The final reading pass of Self-Ask or Search-o1 (``final_read``), unless it found no answer."""
    notes = {(e.get("data") or {}).get("type"): e.get("data") or {} for e in events if e.get("kind") == "note"}
    if "final_read" not in notes or "read_abstained" in notes:
        return []
    body = parse_cot(_completion(events, "read") or "")[0]
    return [Claim(body, _found(searched, notes["final_read"].get("shown") or []), question, cited_numbers(body))]


def reground(strategy: str, result: Mapping[str, Any]) -> Grounding:
    """The grounded citations of a recorded run, as the running code would give them."""
    return ground(
        claims_from_trace(strategy, result), str(result.get("short_answer") or ""), str(result.get("question") or "")
    )
