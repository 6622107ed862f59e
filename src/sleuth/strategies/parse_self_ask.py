"""Parsers for the Self-Ask scaffold: one completion's follow-up or final answer.

They accept the usual mistakes of small models: variant spellings ("Followup", "Follow-up", "Follow up :"), missing
colons, full-width colons and Chinese labels, missing scaffold, extra chatter, the model answering its own follow-up
(its answer is dropped: the search answers).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sleuth.lang import en, zh
from sleuth.strategies.text import cap, clean_short

#: the scaffold's own words, per prompt language (the parser accepts both and their variants)
SCAFFOLD = {
    "en": {"intermediate": "Intermediate answer:", "final": "So the final answer is:", "unknown": "unknown"},
    "zh": {"intermediate": "中间答案：", "final": "所以最终答案是：", "unknown": "未知"},
}
#: generation stops where the search engine takes over (both languages: small models mix them)
STOPS = ["Intermediate answer:", "Intermediate Answer:", "中间答案：", "中间答案:", "\nQuestion:", "\n问题："]
#: a model-written intermediate answer stops at the end of its line
ANSWER_STOPS = ["\n", "Follow up", "So the final answer", "追问", "所以最终答案"]

_OPT_COLON = r"(?:\s*[:：]\s*|\s+)"
_BULLET = r"^\s*(?:[-*>#]+\s*|\*\*)?"

_FOLLOW = re.compile(
    rf"{_BULLET}(?:follow[\s_-]*up(?:\s*question)?|followup(?:\s*question)?|sub[\s-]*question|追问|子问题|后续问题)"
    rf"(?:\s*\d+)?\**{_OPT_COLON}\**\s*(?P<q>.*)$",
    re.I,
)
_NOT_A_FOLLOW = re.compile(r"^(?:questions?\s+(?:are\s+|is\s+)?needed|questions?\s+needed)", re.I)
_INTERMEDIATE_INLINE = re.compile(r"(?:intermediate[\s_-]*answer|中间答案|中间回答)\s*[:：]?", re.I)
_FINAL = re.compile(
    rf"{_BULLET}(?:so\s+)?(?:the\s+)?{en.FINAL_ANSWER}(?:\s+is)?\**{_OPT_COLON}(?P<a>.*)$"
    rf"|{_BULLET}(?:so\s+the\s+answer\s+is|the\s+answer\s+is|therefore,?\s+the\s+answer\s+is)\**{_OPT_COLON}(?P<b>.*)$"
    rf"|{_BULLET}(?:所以|因此)?(?:{zh.FINAL_ANSWER}|最后答案|最终的答案)(?:是|为)?\**\s*[:：]?\s*(?P<c>.*)$",
    re.I,
)
_NEEDED = re.compile(
    r"^\s*(?:are\s+follow\s+up\s+questions\s+needed\s+here\s*[:：]?\s*|需要追问吗\s*[:：]?\s*)?"
    r"(?P<v>yes|no|是|否|需要|不需要)\b",
    re.I,
)
_NEEDED_ZH = re.compile(r"^\s*(?:需要追问吗\s*[:：]?\s*)?(?P<v>不需要|需要|是|否)")
_QUESTION_LINE = re.compile(r"^\s*(?:question|问题)\s*[:：]", re.I)
#: what :func:`~sleuth.strategies.text.sanitize` leaves of a marker inside a document
#: ("So the final answer is - X"): a model quoting it has not given a final answer
_DEFUSED = re.compile(r"^(?:is\s+)?-(?:\s|$)", re.I)
#: a scaffold marker inside an answer: the model ran on ("X. So the final answer is: X. So the ...")
_RUN_ON = re.compile(
    rf"(?:{en.ANSWER_IS}|(?:the\s+)?{en.FINAL_ANSWER}\s*[:：]|follow[\s_-]*up\s*[:：]"
    rf"|intermediate[\s_-]*answer|question\s*[:：]|(?:所以)?{zh.FINAL_ANSWER}|追问\s*[:：]|中间答案)",
    re.I,
)


def _first_answer(ans: str) -> str:
    """The answer before any scaffold marker the model wrote after it on the same line."""
    m = _RUN_ON.search(ans)
    return ans[: m.start()] if m and ans[: m.start()].strip() else ans


@dataclass
class SelfAskStep:
    """What one Self-Ask completion contains; ``consumed`` is the part that belongs in the append-only scaffold (up to
    the end of its follow-up or final-answer line: whatever the model invented after it is dropped)."""

    follow_up: str | None = None
    final: str | None = None
    needed: bool | None = None
    consumed: str = ""


def parse_self_ask(text: str) -> SelfAskStep:
    """Parse one completion of the Self-Ask scaffold (see module docstring)."""
    text = cap(text)
    step = SelfAskStep()
    spans = [m.span() for m in re.finditer(r"^.*$", text, re.M)]  # each line's (start, end)
    for i, (a, b) in enumerate(spans):
        line = text[a:b]
        if not line.strip():
            continue
        if step.needed is None and i <= 1:
            m = _NEEDED.match(line) or _NEEDED_ZH.match(line)
            if m:
                step.needed = m.group("v").lower() in ("yes", "是", "需要")
        mf = _FOLLOW.match(line)
        if mf and not _NOT_A_FOLLOW.match(mf.group("q")):
            inline = _INTERMEDIATE_INLINE.split(mf.group("q"), maxsplit=1)
            q = inline[0].strip().strip("*").strip().strip("\"'“”「」").strip()[:300]
            if q:  # what the model wrote after it (its own answer, a new example) is dropped
                step.follow_up = q
                inline_answer = len(inline) == 2 and inline[1].strip()
                step.consumed = text[: a + line.find(mf.group("q"))] + q if inline_answer else text[:b]
                return step
        mfin = _FINAL.match(line)
        ans = next((g for g in mfin.groups() if g is not None), "").strip() if mfin else ""
        if mfin and not _DEFUSED.match(ans):  # not what sanitize leaves of a marker in a document
            end = b
            if not ans:  # "So the final answer is:" then the answer on the next line
                nxt = next(((c, d) for c, d in spans[i + 1 :] if text[c:d].strip()), None)
                if nxt is not None:
                    ans, end = text[nxt[0] : nxt[1]], nxt[1]
            ans = clean_short(_first_answer(ans), 300)
            if ans:
                step.final = ans
                step.consumed = text[:end]
                return step
            continue
        if _QUESTION_LINE.match(line) and i > 0:
            break  # the model started a new example: stop reading
    # No scaffold.  "No. <answer>" or "No.\n<answer>" is a final answer without the label.
    body = text.strip()
    if step.needed is False:
        rest = _NEEDED.sub("", body, count=1) if _NEEDED.match(body) else _NEEDED_ZH.sub("", body, count=1)
        rest = rest.lstrip(" .。,，:：\n")
        rest = _QUESTION_LINE.split(rest)[0]
        ans = clean_short(rest, 300)
        if ans:
            step.final = ans
            step.consumed = text
            return step
    step.consumed = text if step.needed is not None else ""
    return step


def parse_final_line(text: str) -> str:
    """The answer after a forced "So the final answer is:" (first meaningful line)."""
    text = cap(text)
    for line in text.splitlines():
        if not line.strip():
            continue
        m = _FINAL.match(line)
        if m:
            line = next((g for g in m.groups() if g is not None), "")
            if _DEFUSED.match(line.strip()):
                continue
        ans = clean_short(_first_answer(line), 300)
        if ans:
            return ans
    return ""
