"""Step-back's verdict: a yes/no question over rules is decided from the clause that decides it.

The rule-and-clause form asks the model, in one reply over all the passages, for the general rule,
the specific clause and the conclusion.  On a yes/no question the 1.5B default model fills the form
and then concludes against it: "专门条款：无 / 结论：是" with the deciding clause ranked first, or
"…不适用第三条规定的报销期限。所以答案是：是。".  So, for a yes/no question whose documents are
rules, the conclusion is drawn in a smaller step:

1. the context's passages are cut into their clauses (第十五条 …, Article 7 …; a passage without
   numbered clauses is one clause);
2. the clauses are ranked by the question's words they share (character bigrams and words, each
   weighted by how rare it is among the clauses: "退票" counts more than "报销"), ties keeping the
   passages' order, and the first ``verdict_clauses`` are shown;
3. one short call names the clause that decides the question ("依据：") and answers it, starting
   with 是 or 不是 ("结论："; the prompt ``step_back_verdict``);
4. Sleuth writes the answer from that: the conclusion, then the deciding clause quoted with its
   citation.  A reply whose conclusion starts with neither yes nor no leaves the question to the
   rule-and-clause form.

Measured on the tuning half of ``benchmarks/data/policy_zh`` (15 yes/no questions, contexts from
Step-back's own retrieval): the form's conclusion had the right polarity on 1 of the first 5 tried;
the verdict over the 3 best clauses on 11 of 15 (docs/strategies.md has the figures of the whole runs).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from sleuth.search.base import Passage

_NUM = r"[一二三四五六七八九十百千零〇两\d]+"
#: a clause starts at its number followed by a space: "第十五条 因公…" (not the reference "见第十五条。")
_CLAUSE_START = re.compile(rf"(?=(?:第{_NUM}条|Article\s+\d+|Section\s+[\d.]+|§\s*\d+)\s)", re.I)
_CLAUSE_NO = re.compile(rf"^(第{_NUM}条|Article\s+\d+|Section\s+[\d.]+|§\s*\d+)", re.I)
_GRAM_TEXT = re.compile(r"[\u4e00-\u9fff]+|[a-z0-9]+")
_LABEL = re.compile(r"(?:^|\n)[ \t>*#-]*\**(依据|根据|basis|conclusion|结论|答案|answer)\**[ \t]*[:：][ \t]*", re.I)
_NO = re.compile(
    r"^(?:不是|不需要|不用|不必|无需|无须|不能|不可以|不可|不得|不会|不适用|不要|不行|不允许|不应|否|不|no\b)", re.I
)
_YES = re.compile(r"^(?:是的|是(?!否)|需要|要的|可以|能|必须|应当|仍然|仍需|仍|适用|对|yes\b)", re.I)


@dataclass(frozen=True)
class Clause:
    """One clause of a passage: its number ("第十五条", "" when the passage has none) and text."""

    passage: Passage
    number: str
    text: str


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


def _grams(text: str) -> set[str]:
    """Character bigrams of the Chinese runs and the Latin words / numbers of ``text``."""
    out: set[str] = set()
    for run in _GRAM_TEXT.findall((text or "").lower()):
        if run.isascii():
            out.add(run)
        else:
            out |= {run[i : i + 2] for i in range(len(run) - 1)} if len(run) > 1 else {run}
    return out


def rank_clauses(question: str, clauses: Sequence[Clause], k: int) -> list[Clause]:
    """The ``k`` clauses sharing the most of the question's words, each word weighted by its rarity
    among the clauses (inverse document frequency); ties keep the clauses' order."""
    if not clauses:
        return []
    grams = [_grams(f"{c.passage.title} {c.text}") for c in clauses]
    q = _grams(question)
    df = {g: sum(1 for cg in grams if g in cg) for g in q}
    n = len(clauses)

    def weight(i: int) -> float:
        return sum(math.log(1 + n / df[g]) for g in q if df[g] and g in grams[i])

    order = sorted(range(n), key=lambda i: -weight(i))
    return [clauses[i] for i in order[:k]]


def parse_verdict(text: str) -> tuple[str, str]:
    """(basis, conclusion) from the reply's labelled lines; a reply without a conclusion label is all conclusion."""
    marks = list(_LABEL.finditer(text or ""))
    fields: dict[str, str] = {}
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        key = "basis" if m.group(1).lower() in ("依据", "根据", "basis") else "conclusion"
        fields[key] = text[m.end() : end].strip()
    if "conclusion" not in fields and not marks:
        fields["conclusion"] = (text or "").strip()
    return fields.get("basis", ""), fields.get("conclusion", "")


def polarity(conclusion: str) -> bool | None:
    """True (yes), False (no) or None from how the conclusion starts."""
    s = re.sub(r"^[\s*_\"'“”「」【】]+", "", conclusion or "")
    if _NO.match(s):
        return False
    if _YES.match(s):
        return True
    return None


def referred(clause: Clause, clauses: Sequence[Clause]) -> list[Clause]:
    """The clauses of the same document that ``clause`` refers to ("按第二条一般规定执行" -> 第二条 …)."""
    own = clause.number.replace(" ", "")
    names = [n for n in dict.fromkeys(re.findall(rf"第{_NUM}条", clause.text)) if n != own]
    out = []
    for name in names:
        hit = next((c for c in clauses if c.number == name and c.passage.title == clause.passage.title), None)
        if hit is not None and hit not in out:
            out.append(hit)
    return out


def deciding(basis: str, shown: Sequence[Clause]) -> Clause:
    """The clause the basis names (by its number, or by its [n] in the listing), else the first shown."""
    for c in shown:
        if c.number and c.number.replace(" ", "") in (basis or "").replace(" ", ""):
            return c
    m = re.search(r"\[(\d+)\]", basis or "")
    if m and 1 <= int(m.group(1)) <= len(shown):
        return shown[int(m.group(1)) - 1]
    return shown[0]
