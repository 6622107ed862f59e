"""Pure parsers for what models write.

Every function here takes model output (any string) and returns a small value;
none raises, none loops more than a bounded number of times over its input,
and all accept the usual mistakes of small models: variant spellings
("Followup", "Follow-up", "Follow up :"), missing colons, full-width colons
and Chinese labels, missing scaffold, extra chatter, the model answering its
own follow-up, unbalanced braces.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sleuth.strategies.text import clean_short, content_tokens

_MAX_IN = 20_000  # parsers look at most at this many characters


def _cap(text: object) -> str:
    s = text if isinstance(text, str) else ("" if text is None else str(text))
    return s[:_MAX_IN]


_COLON = r"\s*[:：]"
_OPT_COLON = r"(?:\s*[:：]\s*|\s+)"
_BULLET = r"^\s*(?:[-*>#]+\s*|\*\*)?"

# -- Self-Ask --------------------------------------------------------------------

_FOLLOW = re.compile(
    _BULLET
    + r"(?:follow[\s_-]*up(?:\s*question)?|followup(?:\s*question)?|sub[\s-]*question|追问|子问题|后续问题)"
    + r"(?:\s*\d+)?\**"
    + _OPT_COLON
    + r"\**\s*(?P<q>.*)$",
    re.I,
)
_NOT_A_FOLLOW = re.compile(r"^(?:questions?\s+(?:are\s+|is\s+)?needed|questions?\s+needed)", re.I)
_INTERMEDIATE = re.compile(
    _BULLET + r"(?:intermediate[\s_-]*answer|中间答案|中间回答|中间结果)\**" + r"(?:\s*[:：]\s*|\s+|$)(?P<a>.*)$",
    re.I,
)
_INTERMEDIATE_INLINE = re.compile(r"(?:intermediate[\s_-]*answer|中间答案|中间回答)\s*[:：]?", re.I)
_FINAL = re.compile(
    _BULLET
    + r"(?:so\s+)?(?:the\s+)?final\s+answer(?:\s+is)?\**(?:\s*[:：]\s*|\s+)(?P<a>.*)$"
    + r"|"
    + _BULLET
    + r"(?:so\s+the\s+answer\s+is|the\s+answer\s+is|therefore,?\s+the\s+answer\s+is)\**(?:\s*[:：]\s*|\s+)(?P<b>.*)$"
    + r"|"
    + _BULLET
    + r"(?:所以|因此)?(?:最终答案|最后答案|最终的答案)(?:是|为)?\**\s*[:：]?\s*(?P<c>.*)$",
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
    r"(?:so\s+the\s+(?:final\s+)?answer\s+is|(?:the\s+)?final\s+answer\s*[:：]|follow[\s_-]*up\s*[:：]"
    r"|intermediate[\s_-]*answer|question\s*[:：]|所以最终答案|最终答案|追问\s*[:：]|中间答案)",
    re.I,
)


def _first_answer(ans: str) -> str:
    """The answer before any scaffold marker the model wrote after it on the same line."""
    m = _RUN_ON.search(ans)
    return ans[: m.start()] if m and ans[: m.start()].strip() else ans


@dataclass
class SelfAskStep:
    """What one Self-Ask completion contains.

    ``consumed`` is the prefix of the completion that belongs in the
    (append-only) scaffold: up to the end of the follow-up line, or of the
    final-answer line; whatever the model invented after it is dropped.
    """

    follow_up: str | None = None
    final: str | None = None
    needed: bool | None = None
    self_answer: str | None = None  # the model answered its own follow-up
    consumed: str = ""
    unparsed: bool = False


def _line_spans(text: str) -> list[tuple[int, int]]:
    spans, start = [], 0
    for m in re.finditer(r"\n", text):
        spans.append((start, m.start()))
        start = m.end()
    spans.append((start, len(text)))
    return spans


def _clean_follow_up(q: str) -> str:
    q = _INTERMEDIATE_INLINE.split(q, maxsplit=1)[0]
    q = q.strip().strip("*").strip().strip("\"'“”「」").strip()
    return q[:300]


def parse_self_ask(text: str) -> SelfAskStep:
    """Parse one completion of the Self-Ask scaffold (see module docstring)."""
    text = _cap(text)
    step = SelfAskStep()
    spans = _line_spans(text)
    for i, (a, b) in enumerate(spans):
        line = text[a:b]
        if not line.strip():
            continue
        if step.needed is None and i <= 1:
            m = _NEEDED.match(line) or _NEEDED_ZH.match(line)
            if m:
                v = m.group("v").lower()
                step.needed = v in ("yes", "是", "需要")
        if step.follow_up is not None:
            # anything after the follow-up line: the model answering itself
            mi = _INTERMEDIATE.match(line)
            if mi and step.self_answer is None:
                step.self_answer = mi.group("a").strip() or None
            continue
        mf = _FOLLOW.match(line)
        if mf and not _NOT_A_FOLLOW.match(mf.group("q")):
            q = _clean_follow_up(mf.group("q"))
            if q:
                step.follow_up = q
                step.consumed = text[:b]
                inline = _INTERMEDIATE_INLINE.split(mf.group("q"), maxsplit=1)
                if len(inline) == 2 and inline[1].strip():
                    step.self_answer = inline[1].strip()
                    step.consumed = text[: a + line.find(mf.group("q"))] + q
                continue
        mfin = _FINAL.match(line)
        if mfin and _DEFUSED.match(next((g for g in mfin.groups() if g is not None), "").strip()):
            mfin = None
        if mfin:
            ans = next((g for g in mfin.groups() if g is not None), "").strip()
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
    if step.follow_up is not None:
        return step
    # No scaffold.  "No. <answer>" or "No.\n<answer>" is a final answer without the label.
    body = text.strip()
    if step.needed is False:
        rest = _NEEDED.sub("", body, count=1) if _NEEDED.match(body) else _NEEDED_ZH.sub("", body, count=1)
        rest = rest.lstrip(" .。,，:：\n")
        rest = _QUESTION_LINE.split(rest)[0] if _QUESTION_LINE.search(rest) else rest
        ans = clean_short(rest, 300)
        if ans:
            step.final = ans
            step.consumed = text
            return step
    step.unparsed = bool(body) and step.needed is None
    step.consumed = text if step.needed is not None else ""
    return step


def parse_final_line(text: str) -> str:
    """The answer after a forced "So the final answer is:" (first meaningful line)."""
    text = _cap(text)
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


# -- chain-of-thought / labelled answers ---------------------------------------------------

_SO_ANSWER = re.compile(
    r"(?:so\s+the\s+(?:final\s+)?answer\s+is|the\s+(?:final\s+)?answer\s+is"
    r"|所以答案是|所以最终答案是|最终答案是|答案是)(?!\**\s*-(?:\s|$))\**\s*[:：]?\s*\**"
    r"|(?:final\s+answer|short\s+answer|简短答案|最终答案)\**\s*[:：]\s*\**",
    re.I,
)


def parse_cot(text: str) -> tuple[str, str | None]:
    """Split a chain of thought into (reasoning, short answer or None).

    Takes the *last* "So the answer is: X" (or variants); an empty X on that
    line falls through to the next non-empty line.  A marker followed by " - "
    is what :func:`~sleuth.strategies.text.sanitize` leaves of a marker inside a
    document (quoted back by the model): it is not an answer.
    """
    text = _cap(text).strip()
    matches = list(_SO_ANSWER.finditer(text))
    for m in reversed(matches):
        after = text[m.end() :]
        first = next((ln for ln in after.splitlines() if ln.strip()), "")
        ans = clean_short(first, 300)
        if ans:
            return text[: m.start()].strip(), ans
    return text, None


def parse_labelled(text: str, labels: tuple[str, ...]) -> str | None:
    """The text after the last ``Label:`` line (any of ``labels``), up to the next blank line."""
    text = _cap(text)
    pat = re.compile(
        r"^\s*(?:[-*#>]+\s*)?\**(?:" + "|".join(re.escape(x) for x in labels) + r")\**\s*[:：]\s*\**",
        re.I | re.M,
    )
    ms = list(pat.finditer(text))
    if not ms:
        return None
    rest = text[ms[-1].end() :].strip()
    para = re.split(r"\n\s*\n", rest, maxsplit=1)[0].strip()
    return para or None


def parse_long_answer(text: str) -> tuple[str, str | None]:
    """(long answer, short answer or None) from "…\\nShort answer: X"."""
    text = _cap(text).strip()
    ms = list(
        re.finditer(r"^\s*(?:[-*>#]+\s*)?\**\s*(?:short\s+answer|简短答案|简答)\s*\**\s*[:：]\s*\**", text, re.I | re.M)
    )
    m = ms[-1] if ms else None
    if m is None:  # "… [1] Short answer: X" written inline
        inline = list(re.finditer(r"(?:short\s+answer|简短答案)\s*\**\s*[:：]\s*\**", text, re.I))
        m = inline[-1] if inline else None
    if m is None:
        short = parse_cot(text)[1]
        # a structured answer cut before its last line: its conclusion, else its last field
        for labels in (("Conclusion", "结论"), ("Specific clause", "专门条款"), ("General rule", "一般规定")):
            if short is not None:
                break
            field = parse_labelled(text, labels)
            short = clean_short(field, 300) if field else None
        return text, short or None
    body = text[: m.start()].strip()
    after = text[m.end() :]
    first = next((ln for ln in after.splitlines() if ln.strip()), "")
    short = clean_short(first, 300) or None
    body = re.sub(r"^\s*\**\s*(?:answer|答案)\s*\**\s*[:：]\s*", "", body, flags=re.I)
    return (body or (short or "")), short


# -- queries / step-back questions -------------------------------------------------------

_QUERY_LABEL = re.compile(
    r"^\s*(?:[-*#>]+\s*)?\**(?:search\s+query|query|search|step[\s-]*back\s+question|abstract\s+question"
    r"|general\s+question|question|查询|搜索词|检索词|搜索|退一步的问题|退一步问题|抽象问题|一般性问题|问题)\**\s*[:：]\s*",
    re.I,
)


def parse_query(text: str, max_chars: int = 300, max_words: int = 32) -> str:
    """One search query (or one question) from a model's answer.

    Takes the first labelled line if any, else the first non-empty line;
    drops quotes, bullets and trailing chatter such as "(this will find...)".
    """
    text = _cap(text)
    # a line that is only a label ("Draft answer:", "The last paragraph is:") carries no query
    lines = [ln for ln in text.splitlines() if ln.strip() and not re.search(r"[:：]\s*\**\s*$", ln)] or [
        ln for ln in text.splitlines() if ln.strip()
    ]
    pick = ""
    for ln in lines:
        m = _QUERY_LABEL.match(ln)
        if m:
            rest = ln[m.end() :].strip()
            if rest:
                pick = rest
                break
            idx = lines.index(ln)
            if idx + 1 < len(lines):
                pick = lines[idx + 1]
                break
    if not pick and lines:
        pick = lines[0]
    pick = re.sub(r"^\s*(?:[-*#>]+|\d+[.)、])\s*", "", pick)
    pick = pick.strip().strip("*").strip().strip("\"'“”「」`").strip()
    pick = re.sub(r"\s+\((?:this|which|to)\b.*\)$", "", pick, flags=re.I)
    words = pick.split()
    if len(words) > max_words:  # a copied paragraph, not a query: keep its first clause
        pick = " ".join(words[:max_words])
    return pick[:max_chars].strip()


def parse_step_back(text: str, question: str, max_chars: int = 300) -> str | None:
    """The step-back question, or None when the model gave nothing usable.

    Unusable: empty, identical to the original question, or an answer rather
    than a question (no question mark and no interrogative word).
    """
    q = parse_query(text, max_chars)
    if not q:
        return None
    # keep only the first question if the model wrote an answer after it
    for sep in ("?", "？"):
        if sep in q:
            q = q[: q.index(sep) + 1]
            break
    if q.strip().lower() == question.strip().lower():
        return None
    qt, bt = content_tokens(question), content_tokens(q)
    if not bt or (qt and not (qt & bt)):
        return None  # off topic (e.g. a few-shot example copied verbatim)
    interrogative = re.search(
        r"\?|？|^(?:what|which|how|who|when|where|why|is|are|does|do|can)\b|什么|哪些|如何|怎样|怎么|是否|吗|多少",
        q,
        re.I,
    )
    return q if interrogative else None


# -- RAT ---------------------------------------------------------------------------------


def split_paragraphs(text: str, max_parts: int = 6) -> list[str]:
    """Split a draft into at most ``max_parts`` non-empty steps.

    Blank lines first; failing that, single lines; failing that, sentences
    grouped evenly.  Extra parts are merged into the last one.
    """
    text = _cap(text).strip()
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


def parse_revision(text: str, fallback: str) -> str:
    """The revised text; the unrevised one when the model returned nothing usable."""
    t = _cap(text).strip()
    t = re.sub(
        r"^\s*\**(?:revised\s+(?:answer|text|version)|修改后的(?:答案|文本)|修订后的(?:答案|文本))\**\s*[:：]\s*",
        "",
        t,
        flags=re.I,
    )
    t = re.sub(r"^```[a-z]*\n|\n```$", "", t).strip()
    if len(t) < max(8, len(fallback) // 5):
        return fallback
    return t


# -- Search-o1 ---------------------------------------------------------------------------

BEGIN_QUERY = "<|begin_search_query|>"
END_QUERY = "<|end_search_query|>"
BEGIN_RESULT = "<|begin_search_result|>"
END_RESULT = "<|end_search_result|>"

_BEGIN_Q = re.compile(r"<\s*\|?\s*begin_search_query\s*\|?\s*>", re.I)
_END_Q = re.compile(r"<\s*\|?\s*/?\s*end_search_query\s*\|?\s*>|<\s*/\s*begin_search_query\s*\|?\s*>", re.I)
_ANY_RESULT = re.compile(r"<\s*\|?\s*(?:begin|end)_search_result\s*\|?\s*>", re.I)


@dataclass
class O1Step:
    query: str | None = None
    answer: str | None = None
    consumed: str = ""  # the completion as it belongs in the append-only prompt


def parse_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (balanced braces; ``\\text{}`` unwrapped)."""
    text = _cap(text)
    idx = text.rfind("\\boxed")
    while idx != -1:
        j = idx + len("\\boxed")
        while j < len(text) and text[j] == " ":
            j += 1
        if j < len(text) and text[j] == "{":
            depth, k = 0, j
            while k < len(text):
                if text[k] == "{":
                    depth += 1
                elif text[k] == "}":
                    depth -= 1
                    if depth == 0:
                        break
                k += 1
            inner = text[j + 1 : k] if depth == 0 else text[j + 1 :].split("\n")[0]
            inner = re.sub(r"\\(?:text|mathrm|textbf)\s*\{([^{}]*)\}", r"\1", inner)
            inner = inner.replace("\\", "").strip().strip("$").strip()
            if inner:
                return clean_short(inner, 300)
        idx = text.rfind("\\boxed", 0, idx)
    return None


def parse_search_o1(text: str) -> O1Step:
    """One Search-o1 completion: a search request (takes the last query) or an answer.

    A completion that ends in an open search query is a request even if it
    mentions an answer earlier (the model wants more information).  Anything
    the model wrote after a closing query tag (e.g. a fabricated search
    result) is dropped from ``consumed``.
    """
    text = _cap(text)
    step = O1Step(consumed=text)
    begins = list(_BEGIN_Q.finditer(text))
    if begins:
        b = begins[-1]
        after = text[b.end() :]
        end = _END_Q.search(after)
        raw = after[: end.start()] if end else after
        fake = _ANY_RESULT.search(raw)
        if fake:
            raw = raw[: fake.start()]
        q = raw.strip().splitlines()[0].strip() if raw.strip() else ""
        q = re.sub(r"\\*\|+|\\+", " ", q)  # stray tag pieces: "foo \|bar \|"
        q = re.sub(r"\s+", " ", q).strip().strip("\"'“”「」").strip()[:300]
        if q:
            step.query = q
            step.consumed = text[: b.start()] + BEGIN_QUERY + " " + q + " "
            return step
    ans = parse_boxed(text)
    if ans is None:
        ms = list(
            re.finditer(
                r"(?:final\s+answer|最终答案)\s*(?:is|是|为)?\s*[:：]\s*|^[ \t]*\**(?:answer|答案)\**\s*[:：]\s*",  # [ \t]: \s* at each line start is quadratic on blank lines
                text,
                re.I | re.M,
            )
        )
        m = ms[-1] if ms else None
        if m is not None:
            first = next((ln for ln in text[m.end() :].splitlines() if ln.strip()), "")
            ans = clean_short(first, 300) or None
    step.answer = ans
    # never carry a search-result tag the model wrote itself into the prompt
    fake = _ANY_RESULT.search(text)
    if fake:
        step.consumed = text[: fake.start()]
    return step


_FINAL_INFO = re.compile(
    r"\**\s*(?:final\s+information|最终信息|有用信息|^\s*facts(?:\s*\(in\s+\w+\))?(?=\s*\**\s*[:：])|^\s*事实(?=\s*[:：]))"
    r"\s*\**\s*[:：]?\s*\**",
    re.I | re.M,
)


def parse_reason_in_documents(text: str, max_chars: int = 800) -> str:
    """The "Final Information" part of a Reason-in-Documents answer (whole text if unlabelled)."""
    text = _cap(text).strip()
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
