"""Step-back's verdict over rules (docs/strategies.md, "Step-back" has the measurements).

A yes/no question whose documents are rules is decided in a small step, since the 1.5B model fills the rule-and-clause
form and then concludes against it ("专门条款：无 / 结论：是"): the context is cut into clauses (第十五条 …, Article 7 …), ranked by
the question's words weighted by rarity, and one short call over the best ``verdict_clauses`` names the deciding
clause and answers 是 or 不是 (``step_back_verdict``); Sleuth writes the conclusion with the clause quoted and cited.
Any other question over rules is first asked whether the clauses settle it (``step_back_answerable``,
:func:`settles`); when they do not, the answer is the fixed ``step_back_abstain``, citing nothing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sleuth.lang import zh
from sleuth.search.base import Passage

if TYPE_CHECKING:
    from sleuth.strategies.base import RunState, Strategy

NUM = r"[一二三四五六七八九十百千零〇两\d]+"
#: a clause starts at its number followed by a space: "第十五条 因公…" (not the reference "见第十五条。")
_CLAUSE_START = re.compile(rf"(?=(?:第{NUM}条|Article\s+\d+|Section\s+[\d.]+|§\s*\d+)\s)", re.I)
_CLAUSE_NO = re.compile(rf"^(第{NUM}条|Article\s+\d+|Section\s+[\d.]+|§\s*\d+)", re.I)
_GRAM_TEXT = re.compile(r"[\u4e00-\u9fff]+|[a-z0-9]+")
_LABEL = re.compile(r"(?:^|\n)[ \t>*#-]*\**(依据|根据|basis|conclusion|结论|答案|answer)\**[ \t]*[:：][ \t]*", re.I)


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


def rank_clauses(question: str, clauses: Sequence[Clause], k: int, also: str = "") -> list[Clause]:
    """The ``k`` clauses sharing the most of the question's words, each word weighted by its rarity
    among the clauses (inverse document frequency); ties keep the clauses' order.  With ``also`` (the
    step-back question) the two rankings are fused by reciprocal rank, as the routes are."""
    if not clauses:
        return []
    grams = [_grams(f"{c.passage.title} {c.text}") for c in clauses]
    n = len(clauses)

    def ranking(text: str) -> list[int]:
        q = _grams(text)
        df = {g: sum(1 for cg in grams if g in cg) for g in q}
        weight = [sum(math.log(1 + n / df[g]) for g in q if df[g] and g in grams[i]) for i in range(n)]
        return sorted(range(n), key=lambda i: -weight[i])

    score = [0.0] * n
    for order in [ranking(question), *([ranking(also)] if also else [])]:
        for rank, i in enumerate(order, 1):
            score[i] += 1.0 / (60 + rank)
    return [clauses[i] for i in sorted(range(n), key=lambda i: -score[i])[:k]]


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
    m = re.search(rf"({NUM})", name or "")
    if not m:
        return None
    text = m.group(1)
    if text.isdigit():
        return int(text)
    total, digit = 0, 0
    for ch in text:
        if ch in zh.DIGITS:
            digit = zh.DIGITS[ch]
        elif ch in zh.UNITS:
            total += (digit or 1) * zh.UNITS[ch]
            digit = 0
        elif ch.isdigit():
            digit = digit * 10 + int(ch)
    return total + digit


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


#: a reply that says the clauses have no rule on what is asked ("无", "现有材料没有规定", "not stated")
_UNSETTLED = re.compile(
    r"^(?:无\W*$|无相关|没有(?:相关)?(?:规定|写明|提到|说明|涉及)|现有(?:可查阅的)?材料|无法|不能确定|未(?:规定|写明|提及)|不清楚|"
    r"none\b|not (?:stated|specified|settled|covered)|no (?:clause|rule)|cannot|unknown)",
    re.I,
)
#: a clause's or a listing's own number ("第十五条", "第2条", "[2]", "Article 7"): no value of the answer
_REF = re.compile(rf"第{NUM}条|\[\d+\]|(?:Article|Section|§)\s*[\d.]+", re.I)
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def settles(conclusion: str, question: str, shown: Sequence[Clause]) -> tuple[bool, str]:
    """Whether the reply's ``conclusion`` settles the question from the ``shown`` clauses, and why not: ``said``,
    ``invented`` (a number the clauses and question lack), ``restated`` or ``unsupported`` (less than half of its new
    character bigrams and numbers are in the clauses); docs/strategies.md has the tuning figures."""
    said = re.sub(r"^[\s*_\"'“”「」【】]+", "", conclusion or "")
    if not said or _UNSETTLED.match(said):
        return False, "said"
    said = _REF.sub(" ", said)
    clauses = " ".join(_REF.sub(" ", c.text) for c in shown)
    known = set(_NUMBER.findall(clauses)) | set(_NUMBER.findall(question))
    if any(n not in known for n in _NUMBER.findall(said)):
        return False, "invented"
    new = {g for g in _grams(said) - _grams(question) if len(g) > 1 or g.isdigit()}  # "天" alone says nothing
    if not new:
        return False, "restated"
    if 2 * len(new & _grams(clauses)) < len(new):
        return False, "unsupported"
    return True, ""


def listing(shown: Sequence[Clause]) -> str:
    """The clauses as the verdict prompts show them: "[1] (title) 第十五条 …", one a line."""
    return "\n".join(f"[{i}] ({c.passage.title}) {c.text}" for i, c in enumerate(shown, 1))


def answer_if_unsettled(
    strategy: Strategy, question: str, st: RunState, context: Sequence[Passage], k: int, abstract: str = ""
) -> tuple[bool, str]:
    """Ask whether the ``k`` best clauses of ``context`` settle ``question`` (step ``answerable``); when they do not
    (:func:`settles`), answer ``step_back_abstain``, citing nothing, and return ``(True, "")``; when they do,
    ``(False, the reply's conclusion)``.  A question with a yes/no sentence ("…需要提前申请吗？要提前几天？") is not
    asked: its reply would read as a restatement."""
    if st.q.asks_yes_no:
        return False, ""
    shown = rank_clauses(question, split_clauses(context), k, also=abstract)
    if not shown:
        return False, ""
    prompt = strategy.prompt(st, "step_back_answerable", question=question, clauses=listing(shown))
    c = strategy.ask(st, prompt, step="answerable", max_tokens=120)
    basis, conclusion = parse_verdict(c.text)
    ok, why = settles(conclusion, question, shown)
    st.emit(
        "answerable",
        clauses=[f"{x.passage.id} {x.number}".strip() for x in shown],
        basis=basis[:300],
        conclusion=conclusion[:300],
        settled=ok,
        why=why,
    )
    if ok:
        return False, conclusion
    st.emit("note", type="abstained", message="the accessible clauses do not state what the question asks")
    st.result.answer = st.result.short_answer = strategy.prompt(st, "step_back_abstain")
    st.result.citations = []
    return True, ""
