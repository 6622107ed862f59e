"""Grounded citations: the passages an answer rests on, in the order the answer uses them.

A strategy records each *claim* it drew from passages while it ran (:class:`Claim`: a Self-Ask intermediate answer
with that follow-up's passages, a Search-o1 Reason-in-Documents note with that search's passages, RAG's reply with its
context); :func:`ground` turns the claims and the final short answer into the citations, by deterministic token overlap
(no model call; Chinese by characters), as docs/strategies.md (*Citations*) sets out:

1. claims in the order the strategy made them; one a caller ``asserted`` is cited as given;
2. ``[n]`` marks are honoured, except a marked passage that shares no word of what the claim adds to its query;
3. without marks, :func:`supporting`: the passages with most of the claim's *new* words (the follow-up's answer, not
   the follow-up's words); a yes/no claim rests on the passage that best matches what was asked, and a claim no
   passage supports (a fact from the model's memory) cites nothing;
4. the final short answer, when no passage cited so far contains it: the claims' passage that does, cited last;
5. an abstaining answer cites nothing; nothing supported is an honest empty list, never every passage retrieved
   (they all stay in the trace's ``search`` events).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sleuth.lang import YES_NO_ANSWER, abstains, en, zh
from sleuth.search.base import Passage
from sleuth.strategies.text import CITE_MARK, content_tokens

#: share of a claim's (or the short answer's) new words the first supporting passage must contain
MIN_SUPPORT = 0.5
#: share of the claim's new words a further passage must add
MIN_GAIN = 0.25
#: passages one claim may cite without marks (a hop rests on one fact, a composed sentence on two)
MAX_PER_CLAIM = 2


@dataclass
class Claim:
    """What a strategy concluded from some passages.

    ``text``: the conclusion (an intermediate answer, Reason-in-Documents facts, a reply);
    ``query``: what was asked when the passages were found (its words are not evidence);
    ``marks``: ``[n]`` numbers in ``text`` (1-based into ``passages``), when the model cited.
    """

    text: str
    passages: list[Passage]
    query: str = ""
    marks: list[int] = field(default_factory=list)
    asserted: bool = False


@dataclass
class Grounding:
    """The citations and, per claim, why (for the trace)."""

    citations: list[Passage]
    picks: list[dict[str, Any]]
    final: str  # how the final answer was placed: "in_claims", "added", "unsupported", "none", "abstained"

    @property
    def message(self) -> str:
        """Why nothing was cited (the ``no_citations`` note)."""
        if self.final == "abstained":
            return "the answer abstains; nothing cited"
        return "no retrieved passage supports the answer; nothing cited"


def _words(p: Passage) -> set[str]:
    return content_tokens(f"{p.title} {p.text}")


#: the answer formats' own words ("So the answer is:", "According to document [2]", Step-back's
#: labels): never evidence, so never what a passage must contain
_SCAFFOLD = re.compile(
    rf"\b(?:{en.ANSWER_IS}|the\s+answer\s+is|answer|according\s+to|documents?|general\s+rule"
    r"|specific\s+clause|principle|evidence|therefore|based\s+on)\b"
    rf"|{zh.ANSWER_IS}|{zh.FINAL_ANSWER}|答案|根据文档|文档|一般规定|具体条款|原则|证据|因此",
    re.I,
)


def is_yes_no(text: str) -> bool:
    return bool(YES_NO_ANSWER.match(text.strip()))


def _new_words(text: str, query: str) -> set[str]:
    """What ``text`` adds to ``query`` (its ``[n]`` marks and answer-format words left out); all
    its words when it only restates part of it; the query's words for a yes/no or a claim
    with no words (it rests on the passage that matches what was asked)."""
    words = content_tokens(_SCAFFOLD.sub(" ", CITE_MARK.sub(" ", text)))
    if is_yes_no(text) or not words:
        return content_tokens(query)
    return (words - content_tokens(query)) or words


def supporting(passages: Sequence[Passage], text: str, query: str = "", *, limit: int = MAX_PER_CLAIM) -> list[Passage]:
    """Up to ``limit`` passages, greedily, that contain most of what ``text`` adds to ``query``: the first at least
    :data:`MIN_SUPPORT` of those words, each further one :data:`MIN_GAIN` more; ties go to the passage sharing more of
    the query, then to the higher-ranked one."""
    want = _new_words(text, query)
    if not want:
        return []
    qwords = content_tokens(query)
    pool = [(i, p, _words(p)) for i, p in enumerate(passages)]
    picked: list[Passage] = []
    left = set(want)
    while pool and len(picked) < limit:
        i, p, w = max(pool, key=lambda x: (len(left & x[2]), len(qwords & x[2]), -x[0]))
        need = MIN_SUPPORT if not picked else MIN_GAIN
        if len(left & w) < max(1.0, need * len(want)):
            break
        picked.append(p)
        left -= w
        pool = [x for x in pool if x[0] != i]
    return picked


def _marked(claim: Claim) -> list[Passage]:
    """The passages the claim marks as [n] that share a new word with it."""
    want = _new_words(claim.text, claim.query)
    marked = [claim.passages[n - 1] for n in dict.fromkeys(claim.marks) if 1 <= n <= len(claim.passages)]
    return [p for p in marked if want & _words(p)]


def _dedupe(passages: Iterable[Passage]) -> list[Passage]:
    """First occurrence of each passage, in order."""
    seen: dict[tuple[str, str], Passage] = {}
    for p in passages:
        seen.setdefault(p.key, p)
    return list(seen.values())


def ground(claims: Sequence[Claim], final: str, question: str = "") -> Grounding:
    """The passages the answer rests on, in order (see the module's method)."""
    cited: dict[tuple[str, str], Passage] = {}
    picks: list[dict[str, Any]] = []
    if abstains(final):
        return Grounding([], [], "abstained")
    for c in claims:
        if c.asserted:
            chosen, how = list(c.passages), "asserted"
        elif chosen := _marked(c):
            how = "marks"
        else:
            chosen, how = supporting(c.passages, c.text, c.query), "overlap"
        for p in chosen:
            cited.setdefault(p.key, p)
        picks.append({"claim": c.text[:160], "how": how, "cited": [p.id for p in chosen]})
    how_final = "none"
    short = final.strip()
    if short and not is_yes_no(short) and content_tokens(short):
        if supporting(list(cited.values()), short, question, limit=1):
            how_final = "in_claims"
        elif best := supporting(_dedupe(p for c in claims for p in c.passages), short, question, limit=1):
            cited.setdefault(best[0].key, best[0])
            how_final = "added"
        else:
            how_final = "unsupported"
    return Grounding(list(cited.values()), picks, how_final)


def renumber(answer: str, claims: Sequence[Claim], citations: Sequence[Passage]) -> str:
    """``answer``'s ``[n]`` marks, which number the passages the model was shown (in the claim whose text is the
    answer), renumbered into the grounded citations (``[k]`` is ``citations[k-1]``); a mark on a passage not cited goes.
    An answer without such a claim is returned unchanged."""
    claim = next((c for c in reversed(claims) if c.marks and c.text.strip() == answer.strip()), None)
    if claim is None:
        return answer
    position = {p.key: k for k, p in enumerate(citations, 1)}

    def new(m: re.Match[str]) -> str:
        nums = [int(x) for x in re.split(r"\s*[,，、]\s*", m.group(1))]
        keys = [claim.passages[n - 1].key for n in nums if 1 <= n <= len(claim.passages)]
        keep = list(dict.fromkeys(position[k] for k in keys if k in position))
        return "[" + ", ".join(map(str, keep)) + "]" if keep else ""

    return CITE_MARK.sub(new, answer)
