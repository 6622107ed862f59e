"""Documents that are rules, cut into clauses: what Step-back's repairs over rules read
(:mod:`sleuth.strategies.repairs.step_back`; docs/strategies.md, "Step-back", has the measurements).

Repair ``rule_form``: the rule-and-clause form fits rules (a policy); on encyclopaedic text it made the model invent
rules.  A passage is **rule-like** when its section or text carries clause numbering (第十五条, Article 7, § 12) or its
text has two normative phrases (应当 / 不得 / shall / must); the documents are rules when at least half the passages
found for the question are (option ``documents`` overrides).  Per passage in ``shared/data``: policy_zh 12 of 12
rule-like; HotpotQA 0.3 %, MuSiQue 0.5 %, TimeQA 0.4 %, RGB-zh 0.8 %.

The ``verdict`` and the answerability check cut the context into clauses (第十五条 …, Article 7 …), rank them by the
question's words weighted by rarity, and show the best few; the reply's basis names the :func:`deciding` clause.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from sleuth.lang import zh
from sleuth.search.base import Passage

NUM = rf"[{zh.NUMERAL_CHARS}\d]+"
_CLAUSE = re.compile(
    rf"第{NUM}[条章款节]|\b(?:Article|Art\.|Section|Sec\.|Clause|Rule|Regulation|Chapter)\s+\d+[\d.]*\b|§\s*\d+", re.I
)
_NORMATIVE = re.compile(r"应当|应在|应于|应按|不得|必须|须经|不予|\bshall\b|\bmust\b|\bmay not\b", re.I)
_NUMBERED = rf"第{NUM}条|Article\s+\d+|Section\s+[\d.]+|§\s*\d+"
#: a clause starts at its number followed by a space: "第十五条 因公…" (not the reference "见第十五条。")
_CLAUSE_START = re.compile(rf"(?=(?:{_NUMBERED})\s)", re.I)
_CLAUSE_NO = re.compile(rf"^({_NUMBERED})", re.I)
_GRAM_TEXT = re.compile(r"[\u4e00-\u9fff]+|[a-z0-9]+")

RULES, GENERAL = "rules", "general"


def rule_like(p: Passage) -> bool:
    """Clause numbering in the section or text, or at least two normative phrases in the text."""
    return bool(_CLAUSE.search(p.section) or _CLAUSE.search(p.text)) or len(_NORMATIVE.findall(p.text)) >= 2


def document_form(passages: list[Passage], option: str = "auto") -> tuple[str, int]:
    """(``rules`` or ``general``, how many passages are rule-like); ``option`` other than auto wins."""
    n = sum(1 for p in passages if rule_like(p))
    if option in (RULES, GENERAL):
        return option, n
    return (RULES if passages and 2 * n >= len(passages) else GENERAL), n


@dataclass(frozen=True)
class Clause:
    """One clause of a passage: its number ("第十五条", "" when the passage has none) and text."""

    passage: Passage
    number: str
    text: str

    @property
    def name(self) -> str:
        """How a trace names it: passage id and number."""
        return f"{self.passage.id} {self.number}".strip()


def split_clauses(passages: Sequence[Passage]) -> list[Clause]:
    """Every passage's clauses in order (a passage without numbered clauses is one clause)."""
    out: list[Clause] = []
    for p in passages:
        for part in _CLAUSE_START.split(p.text or ""):
            part = part.strip()
            if part:
                m = _CLAUSE_NO.match(part)
                out.append(Clause(p, m.group(1) if m else "", part))
    return out


def grams(text: str) -> set[str]:
    """Character bigrams of the Chinese runs and the Latin words / numbers of ``text``."""
    out: set[str] = set()
    for run in _GRAM_TEXT.findall((text or "").lower()):
        if run.isascii():
            out.add(run)
        else:
            out |= {run[i : i + 2] for i in range(len(run) - 1)} if len(run) > 1 else {run}
    return out


def rank_clauses(question: str, clauses: Sequence[Clause], k: int, also: str = "") -> list[Clause]:
    """The ``k`` clauses sharing the most of the question's words, each word weighted by its rarity
    among the clauses (inverse document frequency); ties keep the clauses' order.  With ``also`` (the
    step-back question) the two rankings are fused by reciprocal rank, as the routes are."""
    if not clauses:
        return []
    of_clause = [grams(f"{c.passage.title} {c.text}") for c in clauses]
    n = len(clauses)

    def ranking(text: str) -> list[int]:
        q = grams(text)
        df = {g: sum(1 for cg in of_clause if g in cg) for g in q}
        weight = [math.fsum(math.log(1 + n / df[g]) for g in q if df[g] and g in of_clause[i]) for i in range(n)]
        return sorted(range(n), key=lambda i: -weight[i])

    score = [0.0] * n
    for order in [ranking(question), *([ranking(also)] if also else [])]:
        for rank, i in enumerate(order, 1):
            score[i] += 1.0 / (60 + rank)
    return [clauses[i] for i in sorted(range(n), key=lambda i: -score[i])[:k]]


def referred(clause: Clause, clauses: Sequence[Clause]) -> list[Clause]:
    """The clauses of the same document that ``clause`` refers to ("按第二条一般规定执行" -> 第二条 …)."""
    own = clause.number.replace(" ", "")
    names = [n for n in dict.fromkeys(re.findall(rf"第{NUM}条", clause.text)) if n != own]
    out = []
    for name in names:
        hit = next((c for c in clauses if c.number == name and c.passage.title == clause.passage.title), None)
        if hit is not None and hit not in out:
            out.append(hit)
    return out


def clause_number(name: str) -> int | None:
    """The number of "第十五条" / "第15条" / "Article 15" (15); ``None`` when there is none."""
    m = re.search(NUM, name or "")
    return int(zh.numeral(m.group(0))) if m else None


def deciding(basis: str, shown: Sequence[Clause]) -> Clause:
    """The clause the basis names (by its number, "第8条" naming 第八条 too, or by its [n] in the listing),
    else the first shown.  A named clause that another shown clause refers to ("第十六条 …不适用第二条规定的
    60日期限" when the basis names 第二条) is the general rule that clause overrides: the special clause
    decides, and the answer quotes the general one after it (:func:`referred`)."""
    named = _named(basis, shown)
    if named is None:
        return shown[0]
    special = next((c for c in shown if c is not named and named in referred(c, shown)), None)
    return special or named


def _named(basis: str, shown: Sequence[Clause]) -> Clause | None:
    for c in shown:
        if c.number and c.number.replace(" ", "") in (basis or "").replace(" ", ""):
            return c
    numbers = {clause_number(n) for n in re.findall(rf"第{NUM}条|Article\s+\d+", basis or "", re.I)}
    for c in shown:
        if c.number and clause_number(c.number) in numbers:
            return c
    m = re.search(r"\[(\d+)\]", basis or "")
    if m and 1 <= int(m.group(1)) <= len(shown):
        return shown[int(m.group(1)) - 1]
    return None
