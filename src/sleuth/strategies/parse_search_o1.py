"""Parsers for Search-o1: search-query tags, ``\\boxed{}`` answers, Reason-in-Documents output."""

from __future__ import annotations

import re
from dataclasses import dataclass

from sleuth.lang import en, zh
from sleuth.strategies.text import cap, clean_short

BEGIN_QUERY = "<|begin_search_query|>"
END_QUERY = "<|end_search_query|>"
BEGIN_RESULT = "<|begin_search_result|>"
END_RESULT = "<|end_search_result|>"

_BEGIN_Q = re.compile(r"<\s*\|?\s*begin_search_query\s*\|?\s*>", re.I)
_END_Q = re.compile(r"<\s*\|?\s*/?\s*end_search_query\s*\|?\s*>|<\s*/\s*begin_search_query\s*\|?\s*>", re.I)
_BOXED = re.compile(r"\\boxed *\{")
_ANY_RESULT = re.compile(r"<\s*\|?\s*(?:begin|end)_search_result\s*\|?\s*>", re.I)
#: an answer without ``\boxed`` ("Final answer: X", "答案：X"); ``[ \t]``, not ``\s*``, at a line start: ``\s*``
#: there is quadratic on blank lines
_ANSWER_LINE = re.compile(
    rf"(?:{en.FINAL_ANSWER}|{zh.FINAL_ANSWER})\s*(?:is|是|为)?\s*[:：]\s*|^[ \t]*\**(?:answer|答案)\**\s*[:：]\s*",
    re.I | re.M,
)


@dataclass
class O1Step:
    query: str | None = None
    answer: str | None = None
    consumed: str = ""  # the completion as it belongs in the append-only prompt


def parse_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (balanced braces; ``\\text{}`` unwrapped)."""
    text = cap(text)
    for m in reversed(list(_BOXED.finditer(text))):  # the last one with content
        depth = 0
        for k in range(m.end() - 1, len(text)):  # to the brace that closes it
            depth += (text[k] == "{") - (text[k] == "}")
            if depth == 0:
                break
        inner = text[m.end() : k] if depth == 0 else text[m.end() :].split("\n")[0]
        inner = re.sub(r"\\(?:text|mathrm|textbf)\s*\{([^{}]*)\}", r"\1", inner)
        inner = inner.replace("\\", "").strip().strip("$").strip()
        if inner:
            return clean_short(inner, 300)
    return None


def parse_search_o1(text: str) -> O1Step:
    """One Search-o1 completion: a search request (its last query, even after an answer: the model wants more
    information) or an answer.  What the model wrote after a closing query tag (a fabricated search result, say) is
    dropped from ``consumed``."""
    text = cap(text)
    step = O1Step(consumed=text)
    begins = list(_BEGIN_Q.finditer(text))
    if begins:
        b = begins[-1]
        after = text[b.end() :]
        end = _END_Q.search(after)
        raw = _ANY_RESULT.split(after[: end.start()] if end else after, maxsplit=1)[0]  # not a result it wrote
        q = raw.strip().splitlines()[0].strip() if raw.strip() else ""
        q = re.sub(r"\\*\|+|\\+", " ", q)  # stray tag pieces: "foo \|bar \|"
        q = re.sub(r"\s+", " ", q).strip().strip("\"'“”「」").strip()[:300]
        if q:
            step.query = q
            step.consumed = text[: b.start()] + BEGIN_QUERY + " " + q + " "
            return step
    ans = parse_boxed(text)
    if ans is None and (ms := list(_ANSWER_LINE.finditer(text))):  # the last answer line
        first = next((ln for ln in text[ms[-1].end() :].splitlines() if ln.strip()), "")
        ans = clean_short(first, 300) or None
    step.answer = ans
    step.consumed = _ANY_RESULT.split(text, maxsplit=1)[0]  # never a search-result tag the model wrote itself
    return step


#: only the end of a match is used, so nothing before the label is matched: a leading ``\**\s*``
#: (or ``^\s*``) made the search quadratic on runs of whitespace (0.8 s on a 20,000-character flood)
_FINAL_INFO = re.compile(
    r"(?:final\s+information|最终信息|有用信息|^[ \t]*facts(?:\s*\(in\s+\w+\))?(?=\s*\**\s*[:：])|^[ \t]*事实(?=\s*[:：]))"
    r"\s*\**\s*[:：]?\s*\**",
    re.I | re.M,
)


def parse_reason_in_documents(text: str, max_chars: int = 800) -> str:
    """The "Final Information" part of a Reason-in-Documents answer (whole text if unlabelled)."""
    text = cap(text).strip()
    ms = list(_FINAL_INFO.finditer(text))
    if ms:
        text = text[ms[-1].end() :].strip()
    text = _BEGIN_Q.sub("", text)
    text = _END_Q.sub("", text)
    text = _ANY_RESULT.sub("", text)
    text = text.replace("\\boxed", "boxed").strip()
    if len(text) > max_chars:
        text = text[:max_chars].rstrip() + " …"
    return text
