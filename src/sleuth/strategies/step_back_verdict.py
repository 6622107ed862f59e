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

Any other question over rules (a deadline, an amount, "怎么处理") is first asked whether the clauses
settle it (:func:`settles`): the same listing, one short call that names the clause stating what is
asked and gives its value, or says the clauses have no such rule (the prompt ``step_back_answerable``).
The question is **not settled** by the accessible documents when the reply says so ("结论：无"), when
it states a number that neither the clauses nor the question hold (an invented "100%"), when it says
nothing beyond the question's own words ("结论：基本工资" for "工资按基本工资的多少发？"), or when most
of what it says is not in the clauses (a made-up procedure for "重复报销会怎么处理？").  Then the answer is the fixed sentence ``step_back_abstain``, citing nothing (the deciding
clause lies outside what the asker may read, or nowhere); otherwise the rule-and-clause form answers
as before.  The 1.5B model, asked the bare yes-or-no "do these clauses state it?", says yes to all.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sleuth.lang.question import YESNO, answer_type
from sleuth.search.base import Passage

if TYPE_CHECKING:
    from sleuth.strategies.base import RunState, Strategy

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


_DIGIT = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}


def clause_number(name: str) -> int | None:
    """The number of "第十五条" / "第15条" / "Article 15" (15); ``None`` when there is none."""
    m = re.search(rf"({_NUM})", name or "")
    if not m:
        return None
    text = m.group(1)
    if text.isdigit():
        return int(text)
    total, digit = 0, 0
    for ch in text:
        if ch in _DIGIT:
            digit = _DIGIT[ch]
        elif ch in "十百千":
            total += (digit or 1) * {"十": 10, "百": 100, "千": 1000}[ch]
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
    numbers = {clause_number(n) for n in re.findall(rf"第{_NUM}条|Article\s+\d+", basis or "", re.I)}
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
_REF = re.compile(rf"第{_NUM}条|\[\d+\]|(?:Article|Section|§)\s*[\d.]+", re.I)
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def settles(conclusion: str, question: str, shown: Sequence[Clause]) -> tuple[bool, str]:
    """Whether the reply's ``conclusion`` settles the question from the ``shown`` clauses, and why not:
    ``said`` (the reply says they have no such rule), ``invented`` (a number neither the clauses nor the
    question hold), ``restated`` (nothing beyond the question's own words), ``unsupported`` (less than
    half of what it says beyond the question's words is in the clauses: a procedure made up around a
    few of their words).  The words are character bigrams and numbers; an answer the clauses settle
    copies them (on the tuning half at least 0.9 of its words), a made-up one does not (0.12)."""
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


def asks_yes_no(question: str) -> bool:
    """Whether any sentence of ``question`` is a yes/no question."""
    parts = [p for p in re.split(r"(?<=[？?])\s*", question or "") if p.strip()]
    return any(answer_type(p).kind == YESNO for p in parts)


def listing(shown: Sequence[Clause]) -> str:
    """The clauses as the verdict prompts show them: "[1] (title) 第十五条 …", one a line."""
    return "\n".join(f"[{i}] ({c.passage.title}) {c.text}" for i, c in enumerate(shown, 1))


def answer_if_unsettled(strategy: Strategy, question: str, st: RunState, context: Sequence[Passage], k: int) -> bool:
    """Ask whether the ``k`` best clauses of ``context`` settle ``question`` (step ``answerable``); when they
    do not (:func:`settles`), write the fixed "not settled" answer (``step_back_abstain``), citing nothing,
    and return ``True``; ``False`` leaves the question to the rule-and-clause form.  A question that asks
    yes or no in any of its sentences ("休婚假需要提前申请吗？要提前几天？") is not asked: its reply answers the
    yes/no part in the question's own words ("要提前申请"), which would read as a restatement."""
    if asks_yes_no(question):
        return False
    shown = rank_clauses(question, split_clauses(context), k)
    if not shown:
        return False
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
        return False
    st.emit("note", type="abstained", message="the accessible clauses do not state what the question asks")
    st.result.answer = st.result.short_answer = strategy.prompt(st, "step_back_abstain")
    st.result.citations = []
    return True
