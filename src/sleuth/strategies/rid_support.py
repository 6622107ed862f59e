"""Reason-in-Documents grounding: keep only the sentences that the documents support.

Reason-in-Documents should only restate what the retrieved documents say, but a small
model adds facts from its own memory (a latitude, a year, a founder the documents never
name) and these reach the reasoning as "helpful information".  :func:`ground` checks each
sentence of the Reason-in-Documents output against the passages, deterministically:

* **numbers**: every number in the sentence (a year, a date, a count) must occur in some
  passage (a number up to twenty may also be written as a word there);
* **names**: capitalised words that are not the sentence's first word and not in the
  search query; more than half of them missing from the passages makes the sentence
  unsupported (one extra place name is tolerated, a new person is not);
* **words**: at least half of the sentence's content words (stop words removed) occur in
  the passages;
* **restated query**: a sentence whose content words are all the query's own ("Don Quixote is
  a comedy film." for the query "comedy film Don Quixote") adds nothing the search did not
  assume, so it stands only when one passage holds every one of its words (the words rule
  passes it whenever the query's words are spread over several passages).  For Chinese, content "words" are single characters, so this is a
  character overlap, and the name rule does not apply.

A sentence that fails is dropped (it is kept in the trace).  When no sentence survives, or the
model found nothing, :func:`closest_sentence` quotes the one passage sentence that covers most
of the query's content words (title included, at least ``QUOTE_COVER`` of them); only when no
sentence covers that much does "nothing found" go into the reasoning.  Document numbers the model cited (``[2]``) are
removed from the text that goes into the reasoning and reported with the sentence.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field

from sleuth.search.base import Passage
from sleuth.strategies.text import CITE_MARK, cited_numbers, content_tokens, strip_citations

_SENTENCE = re.compile(r"(?<=[.!?;])\s+(?=\S)|(?<=[。！？；])")
_LEAD_CITE = re.compile(rf"({CITE_MARK.pattern})\s*")  # group 1: the whole mark
_NUMBER = re.compile(r"\d+")
_SPACE_PUNCT = re.compile(r"\s+([.,;:!?。，；：！？])")
_NAME = re.compile(r"\b[A-Z][\w'\-]*")
_NUMBER_WORDS = tuple(
    [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
        "twenty",
    ]
)
_NUMBER_ZH = "零一二三四五六七八九十"


QUOTE_COVER = 0.6  # share of the query's content words a quoted sentence (with its title) must contain


@dataclass
class Grounded:
    """The supported part of a Reason-in-Documents output."""

    text: str  # the kept sentences, citations removed ("" when none)
    kept: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    why: list[str] = field(default_factory=list)  # one reason per dropped sentence
    cited: list[int] = field(default_factory=list)  # document numbers the kept sentences cite


def sentences(text: str) -> list[str]:
    """Split on sentence ends (ASCII and full-width); a trailing citation stays with its sentence."""
    parts = [s.strip() for s in _SENTENCE.split(text or "") if s.strip()]
    merged: list[str] = []
    for s in parts:
        lead = _LEAD_CITE.match(s)
        if merged and lead:  # "... 1939. [2] Denise ...": the citation closes the sentence before
            merged[-1] += " " + lead.group(1)
            s = s[lead.end() :]
            if not s:
                continue
        if merged and not content_tokens(strip_citations(s)):
            merged[-1] += " " + s  # "[2]" alone, or a bare fragment
        else:
            merged.append(s)
    return merged


_THOUSANDS = re.compile(r"(?<=\d)[,，](?=\d{3}\b)")


def cited_sentences(text: str) -> list[tuple[str, list[int]]]:
    """Sentences with the document numbers they cite.

    The model writes the numbers after a sentence ("... 1939 [2].") or, as often, before it
    ("[1] Dominic Cooper played ... [2] [3]"); in the second style a number belongs to the text
    that follows it, and a number followed by nothing cites nothing.
    """
    if not _LEAD_CITE.match((text or "").lstrip()):
        return [(sent, cited_numbers(sent)) for sent in sentences(text)]
    marks = list(_LEAD_CITE.finditer(text))
    out: list[tuple[str, list[int]]] = []
    for i, m in enumerate(marks):
        chunk = text[m.end() : marks[i + 1].start() if i + 1 < len(marks) else len(text)]
        out += [(f"{m.group(1)} {sent}", cited_numbers(m.group(1))) for sent in sentences(chunk)]
    return out


def _norm(text: str) -> str:
    """NFKC, lower case, thousands separators removed (``2,913,123`` -> ``2913123``)."""
    return _THOUSANDS.sub("", unicodedata.normalize("NFKC", text or "").lower())


def _number_found(n: str, docs: str, doc_numbers: set[str]) -> bool:
    if n.lstrip("0") in doc_numbers or n in doc_numbers:
        return True
    v = int(n) if len(n) < 4 else -1
    if 0 <= v < len(_NUMBER_WORDS) and re.search(rf"\b{_NUMBER_WORDS[v]}\b", docs):
        return True
    return 0 <= v <= 10 and _NUMBER_ZH[v] in docs


def unsupported_reason(
    sentence: str,
    docs: str,
    doc_tokens: set[str],
    query: str = "",
    passage_tokens: Sequence[set[str]] | None = None,
) -> str | None:
    """Why the documents do not support ``sentence`` (``None`` when they do); ``passage_tokens``: each
    passage's content words, for the restatement rule."""
    s = _THOUSANDS.sub("", strip_citations(sentence))
    doc_numbers = {m.lstrip("0") or "0" for m in _NUMBER.findall(docs)} | set(_NUMBER.findall(docs))
    doc_numbers |= set(_NUMBER.findall(_norm(query)))  # restating the query's own number is no new fact
    missing_numbers = [n for n in _NUMBER.findall(_norm(s)) if not _number_found(n, docs, doc_numbers)]
    if missing_numbers:
        return "number not in the documents: " + ", ".join(missing_numbers[:3])
    query_tokens = content_tokens(query)
    names = {w for m in _NAME.finditer(s.lstrip()) if m.start() > 0 for w in content_tokens(m.group()) if len(w) > 1}
    names -= query_tokens
    missing_names = sorted(n for n in names if n not in doc_tokens)
    if names and len(missing_names) * 2 > len(names):
        return "name not in the documents: " + ", ".join(missing_names[:3])
    words = content_tokens(s)
    if words and len(words - doc_tokens) * 2 > len(words):
        return "most words not in the documents"
    one = max((len(words & t) for t in passage_tokens), default=0) if passage_tokens is not None else len(words)
    if words and words <= query_tokens and one < len(words):
        return "restates the query as a fact no one document states"
    return None


def ground(info: str, passages: Sequence[Passage], query: str = "") -> Grounded:
    """Keep the sentences of ``info`` that ``passages`` support (rules in the module docstring)."""
    docs = _norm(" ".join(f"{p.title} {p.section} {p.text}" for p in passages))
    doc_tokens = content_tokens(docs)
    each = [content_tokens(_norm(f"{p.title} {p.section} {p.text}")) for p in passages]
    out = Grounded(text="")
    for sent, cited in cited_sentences(info):
        why = unsupported_reason(sent, docs, doc_tokens, query, each)
        if why is None:
            out.kept.append(sent)
            out.cited += [n for n in cited if n not in out.cited]
        else:
            out.dropped.append(sent)
            out.why.append(why)
    out.text = _SPACE_PUNCT.sub(r"\1", " ".join(strip_citations(s) for s in out.kept)).strip()
    return out


def closest_sentence(query: str, passages: Sequence[Passage], min_cover: float = QUOTE_COVER) -> str | None:
    """``(Title) sentence`` of the passage sentence that shares most of the query's content words."""
    wanted = content_tokens(query)
    if not wanted:
        return None
    best: tuple[float, str] = (0.0, "")
    for p in passages:
        title = content_tokens(p.title)
        for sent in sentences(p.text):
            cover = len(wanted & (content_tokens(sent) | title)) / len(wanted)
            if cover > best[0]:
                best = (cover, f"({p.title}) {sent}" if p.title else sent)
    return best[1] if best[0] >= min_cover else None
