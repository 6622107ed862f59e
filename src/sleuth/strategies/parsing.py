"""Pure parsers for what models write: chain-of-thought answers, search queries, step-back questions and answers, RAT
drafts (Self-Ask's are in :mod:`sleuth.strategies.parse_self_ask`, Search-o1's in :mod:`~.parse_search_o1`).

Every parser takes any string and returns a small value; none raises, none loops more than a bounded number of times
over its input, and all accept the usual mistakes of small models (see :mod:`~.parse_self_ask`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sleuth.lang import ABSTAIN, en, zh
from sleuth.strategies.text import cap, cited_numbers, clean_short, content_tokens

# -- chain-of-thought answers ---------------------------------------------------

_SO_ANSWER = re.compile(
    rf"(?:{en.ANSWER_IS}|the\s+(?:final\s+)?answer\s+is|{zh.ANSWER_IS}|{zh.FINAL_ANSWER}是|答案是)(?!\**\s*-(?:\s|$))"
    rf"\**\s*[:：]?\s*\**|(?:{en.FINAL_ANSWER}|short\s+answer|简短答案|{zh.FINAL_ANSWER})\**\s*[:：]\s*\**",
    re.I,
)


def parse_cot(text: str) -> tuple[str, str | None]:
    """Split a chain of thought into (reasoning, short answer or None) at its *last* "So the answer is: X" (or a
    variant; an empty X falls through to the next non-empty line).  A marker followed by " - " is what
    :func:`~sleuth.strategies.text.sanitize` leaves of one inside a document (quoted back by the model): no answer."""
    text = cap(text).strip()
    for m in reversed(list(_SO_ANSWER.finditer(text))):
        first = next((ln for ln in text[m.end() :].splitlines() if ln.strip()), "")
        ans = clean_short(first, 300)
        if ans:
            return text[: m.start()].strip(), ans
    return text, None


# -- queries / step-back questions -------------------------------------------------------

_QUERY_LABEL = re.compile(
    r"^\s*(?:[-*#>]+\s*)?\**(?:search\s+query|query|search|step[\s-]*back\s+question|abstract\s+question"
    r"|general\s+question|question|查询|搜索词|检索词|搜索|退一步的问题|退一步问题|抽象问题|一般性问题|问题)\**\s*[:：]\s*",
    re.I,
)


def parse_query(text: str, max_chars: int = 300, max_words: int = 32) -> str:
    """One search query (or one question) from a model's answer: the first labelled line, else the first non-empty
    one, without quotes, bullets and trailing chatter such as "(this will find...)"."""
    text = cap(text)
    # a line that is only a label ("Draft answer:", "The last paragraph is:") carries no query
    lines = [ln for ln in text.splitlines() if ln.strip() and not re.search(r"[:：]\s*\**\s*$", ln)] or [
        ln for ln in text.splitlines() if ln.strip()
    ]
    pick = lines[0] if lines else ""
    for i, ln in enumerate(lines):  # the first labelled line's text, or the line after a bare label
        m = _QUERY_LABEL.match(ln)
        if m and (ln[m.end() :].strip() or i + 1 < len(lines)):
            pick = ln[m.end() :].strip() or lines[i + 1]
            break
    pick = re.sub(r"^\s*(?:[-*#>]+|\d+[.)、])\s*", "", pick)
    pick = pick.strip().strip("*").strip().strip("\"'“”「」`").strip()
    pick = re.sub(r"(?<!\s)\s+\((?:this|which|to)\b.*\)$", "", pick, flags=re.I)  # (?<!\s): linear on long runs
    words = pick.split()
    if len(words) > max_words:  # a copied paragraph, not a query: keep its first clause
        pick = " ".join(words[:max_words])
    return pick[:max_chars].strip()


#: what makes a step-back question a question
_INTERROGATIVE = re.compile(
    r"\?|？|^(?:what|which|how|who|when|where|why|is|are|does|do|can)\b|什么|哪些|如何|怎样|怎么|是否|吗|多少", re.I
)


def parse_step_back(text: str, question: str, max_chars: int = 300) -> str | None:
    """The step-back question, or None when the model gave nothing usable: nothing, the question itself, one off its
    topic (a few-shot example copied), or an answer rather than a question (no question mark or interrogative word)."""
    q = parse_query(text, max_chars)
    if not q:
        return None
    # keep only the first question if the model wrote an answer after it
    q = next((q[: q.index(sep) + 1] for sep in ("?", "？") if sep in q), q)
    if q.strip().lower() == question.strip().lower():
        return None
    qt, bt = content_tokens(question), content_tokens(q)
    if not bt or (qt and not (qt & bt)):
        return None  # off topic (e.g. a few-shot example copied verbatim)
    return q if _INTERROGATIVE.search(q) else None


# -- RAT ---------------------------------------------------------------------------------


def split_paragraphs(text: str, max_parts: int = 6) -> list[str]:
    """At most ``max_parts`` steps of a draft: its paragraphs, else its lines, else its sentences grouped evenly;
    extra parts merge into the last one."""
    text = cap(text).strip()
    if not text:
        return []
    max_parts = max(1, max_parts)
    parts = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
    if len(parts) == 1:
        parts = [p.strip() for p in text.splitlines() if p.strip()]
    if len(parts) == 1:
        sents = [s.strip() for s in re.split(r"(?<=[.!?。！？])\s+|(?<=[。！？])", text) if s.strip()]
        if len(sents) > 1:
            n = min(max_parts, max(1, (len(sents) + 1) // 2))
            size = -(-len(sents) // n)
            parts = [re.sub(r"(?<=[。！？]) ", "", " ".join(sents[i : i + size])) for i in range(0, len(sents), size)]
    if len(parts) > max_parts:
        parts = [*parts[: max_parts - 1], "\n\n".join(parts[max_parts - 1 :])]
    return parts


_REVISED_LABEL = re.compile(
    r"^\s*\**(?:revised\s+(?:answer|text|version)|修改后的(?:答案|文本)|修订后的(?:答案|文本))\**\s*[:：]\s*", re.I
)


def parse_revision(text: str, fallback: str) -> str:
    """The revised text; the unrevised one when the model returned nothing usable."""
    t = _REVISED_LABEL.sub("", cap(text).strip())
    t = re.sub(r"^```[a-z]*\n|\n```$", "", t).strip()
    return fallback if len(t) < max(8, len(fallback) // 5) else t


# -- step-back answers (either form: general, or rules and clauses) ----------------------------------------

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
