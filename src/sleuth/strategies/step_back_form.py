"""Step-back's answer form: are the documents rules, and what did the answer say?

The rule-and-clause form fits rules (a policy); on encyclopaedic text it made the model invent rules.
A passage is **rule-like** when its section or text carries clause numbering (第十五条, Article 7, § 12)
or its text has two normative phrases (应当 / 不得 / shall / must); the documents are rules when at least
half the passages found for the question are (option ``documents`` overrides).  Per passage in
``shared/data``: policy_zh 12 of 12 rule-like; HotpotQA 0.3 %, MuSiQue 0.5 %, TimeQA 0.4 %, RGB-zh 0.8 %.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sleuth.lang import ABSTAIN
from sleuth.search.base import Passage
from sleuth.strategies.step_back_verdict import NUM as _NUM
from sleuth.strategies.text import cap, cited_numbers, clean_short, strip_citations

_CLAUSE = re.compile(
    rf"第{_NUM}[条章款节]|\b(?:Article|Art\.|Section|Sec\.|Clause|Rule|Regulation|Chapter)\s+\d+[\d.]*\b|§\s*\d+", re.I
)
_NORMATIVE = re.compile(r"应当|应在|应于|应按|不得|必须|须经|不予|\bshall\b|\bmust\b|\bmay not\b", re.I)

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


# -- reading the answer ------------------------------------------------------------------------------

#: the labels of both forms, English and Chinese (full-width colons, bold and bullets allowed)
_LABELS = {
    "background": ("background", "principle", "general rule", "背景", "一般原理", "一般规定", "一般原则"),
    "evidence": ("evidence", "specific evidence", "specific clause", "证据", "具体证据", "专门条款", "具体条款"),
    "answer": ("answer", "conclusion", "final answer", "答案", "结论", "回答"),
    "short": ("short answer", "简短答案", "简答"),
}
_LABEL_LINE = re.compile(  # at a line's start, or inline right after a sentence's end ("… Asia. Conclusion: Yes")
    r"(?:^[ \t]*(?:[-*>#]+[ \t]*)?|(?<=[.。!?！？\]])[ \t]*)\**[ \t]*("
    + "|".join(sorted((re.escape(x) for xs in _LABELS.values() for x in xs), key=len, reverse=True))
    + r")[ \t]*\**[ \t]*[:：][ \t]*\**",
    re.I | re.M,
)
_FIELD = {x.lower(): name for name, xs in _LABELS.items() for x in xs}


def _copied(value: str, template: str) -> bool:
    """A placeholder ("<a few words>") or a run of the template's own words (not a short answer that happens to be one)."""
    v = value.strip()
    core = v.strip("<>").rstrip("。．.!！ ").strip()
    return (v.startswith("<") and v.endswith(">")) or (len(core) >= 8 and core in template)


def _same(value: str, question: str) -> bool:
    def norm(t: str) -> str:
        return re.sub(r"\W+", " ", t).strip().lower()

    return bool(question.strip()) and norm(value) == norm(question)


def _first_sentence(text: str) -> str:
    return re.split(r"(?<=[.!?])\s|(?<=[。！？])", text.strip(), maxsplit=1)[0]


#: a field that says there is nothing ("无", "None.", "N/A")
NO_FIELD = re.compile(r"^\W*(?:无|没有|暂无|none|n/?a|no|nil)\W*$", re.I)
#: a short-answer line that gives no answer (not "No" or 没有: those answer a yes/no question)
_NO_SHORT = re.compile(r"^\W*(?:无|暂无|none|n/?a|nil)\W*$", re.I)


@dataclass(frozen=True)
class StepBackAnswer:
    """The parsed answer: its fields, the long answer to show, the short answer, and whether it declined."""

    fields: dict[str, str]
    answer: str
    short: str | None
    abstained: bool


def says_nothing(parsed: StepBackAnswer) -> bool:
    """Whether every field of the form is empty, "无" or only citation marks ("一般规定：无 / 专门条款：[1]")."""
    values = [strip_citations(v).strip(" \t\n。.：:") for v in parsed.fields.values()]
    return not any(v and not NO_FIELD.match(v) for v in values)


def parse_step_back_answer(text: str, template: str = "", question: str = "") -> StepBackAnswer:
    """Fields by label (either form, either language, the last of each label wins), never raising.

    A field that only copies the prompt's own instructions (``template``; seen on policy_zh q1:
    "结论：有专门条款时依据专门条款，否则依据一般规定。") or only repeats the ``question`` (which the answer line quotes) is no answer and is
    dropped.

    The long answer is the reply up to its "Short answer:" line.  The short answer is that line, else the answer
    field's first sentence (a reply cut at ``max_tokens``), else ``None``.  It declined when the answer field (or,
    with no answer field, the whole reply) says the documents do not answer, cites no document (an answer that cites
    evidence has found some) and gives no short answer of its own other than a refusal.
    """
    text = cap(text).strip()
    marks = list(_LABEL_LINE.finditer(text))
    fields: dict[str, str] = {}
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        value = text[m.end() : end].strip()
        if not _copied(value, template) and not _same(value, question):
            fields[_FIELD[m.group(1).lower()]] = value
    short_mark = next((m for m in reversed(marks) if _FIELD[m.group(1).lower()] == "short"), None)
    body = text[: short_mark.start()].strip() if short_mark else text
    short_line = next((ln for ln in fields.get("short", "").splitlines() if ln.strip()), "")
    short = clean_short(short_line, 300) or None
    if short is not None and _NO_SHORT.match(short):  # "Short answer: None" gives no answer ("No" does)
        short = None
    said = fields.get("answer") or ""
    for name in ("answer", "evidence", "background"):  # a reply cut before its short answer
        value = fields.get(name, "")
        if short is None and value and not NO_FIELD.match(value) and not (name != "answer" and ABSTAIN.search(value)):
            short = clean_short(_first_sentence(value), 300) or None
    decisive = said or body
    abstained = (
        bool(ABSTAIN.search(decisive))
        and not cited_numbers(decisive)
        and (short is None or bool(ABSTAIN.search(short)) or short == clean_short(_first_sentence(said), 300))
    )
    return StepBackAnswer(fields, body or (short or ""), short, abstained)
