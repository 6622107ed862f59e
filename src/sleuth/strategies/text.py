"""Text helpers shared by the strategies: passage sanitising and formatting, token overlap, short-answer clean-up,
citation markers.

Retrieved passages are *data*.  Before a passage goes into a prompt, :func:`sanitize` collapses it to one line and
defuses everything that could look like scaffold syntax to the model or to our parsers (special tokens, Search-o1
tags, ``\\boxed``, "So the final answer is:", "Follow up:", "追问：", our own document delimiters...).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from sleuth.lang import CJK, en, zh
from sleuth.search.base import Passage

MAX_IN = 20_000  # the parsers of model output look at most at this many characters (bounded time on runaway output)


def cap(text: object) -> str:
    """``text`` as a string (``None`` -> ``""``), cut to :data:`MAX_IN` characters."""
    s = text if isinstance(text, str) else ("" if text is None else str(text))
    return s[:MAX_IN]


# -- sanitising -------------------------------------------------------------

#: any special-token-looking thing: <|im_end|>, <|begin_search_query|>, <begin_search_result> ...
_SPECIAL = re.compile(r"<\s*\|[^<>|]{0,40}\|?\s*>|<\s*/?\s*(?:begin|end)_search_(?:query|result)\s*\|?\s*>", re.I)
_BOXED = re.compile(r"\\+boxed", re.I)
#: scaffold phrases followed by a colon (ASCII or full-width), or a bare "Follow up"
_MARKER = re.compile(
    rf"({en.ANSWER_IS}|{en.FINAL_ANSWER}|intermediate\s+answer|follow[\s_-]*up(?:\s+question)?"
    r"|are\s+follow\s+up\s+questions\s+needed\s+here|question|answer|short\s+answer|final\s+information"
    rf"|step[\s-]*back\s+question|query|documents?|所以{zh.FINAL_ANSWER}是|{zh.FINAL_ANSWER}|中间答案|追问|问题|答案|简短答案|最终信息)"
    r"\s*[:：]",
    re.I,
)
_DELIMS = re.compile(r"(end\s+of\s+documents\.?|</?documents?>|文档到此为止。?|文档结束|\[\[/?doc[^\]]*\]\])", re.I)
_WS = re.compile(r"\s+")
#: whitespace that the filter below would keep or blank anyway; every later step treats it like a space
_WS_TABLE = str.maketrans(dict.fromkeys("\n\t\r\x0b\x0c", " "))


def sanitize(text: str, max_chars: int = 1200) -> str:
    """One line of inert text: safe to put between document delimiters."""
    t = unicodedata.normalize("NFC", (text or "")[: max_chars * 4 + 256])  # bounded work on huge input
    t = t.translate(_WS_TABLE)  # fast path: ordinary text is printable after this
    if not t.isprintable():
        t = "".join(ch if ch.isprintable() else " " for ch in t)
    t = _SPECIAL.sub(" ", t)
    t = _BOXED.sub("boxed", t)
    t = _DELIMS.sub(" ", t)
    t = _MARKER.sub(lambda m: m.group(1) + " -", t)
    t = t.replace("<|", "<").replace("|>", ">")
    t = _WS.sub(" ", t).strip()
    if len(t) > max_chars:
        t = t[:max_chars].rstrip() + " …"
    return t


def format_passages(
    passages: Sequence[Passage],
    max_chars: int = 700,
    budget: int | None = None,
    numbers: Sequence[int] | None = None,
) -> str:
    """Numbered, one passage per line, with the provenance the model may need: ``[1] (Title | section | version
    2025 | region) text``.  ``budget`` caps the total characters (an equal share each, at least 160), so a long context
    never overflows a small model's window; ``numbers`` are the passages' own numbers (else 1, 2, ...)."""
    if budget and passages:
        max_chars = min(max_chars, max(160, budget // len(passages)))
    lines = []
    for i, p in zip(numbers or range(1, len(passages) + 1), passages, strict=True):
        bits = [p.title, p.section, f"version {p.version}" if p.version else "", p.region]
        head = " | ".join(sanitize(str(b), 120) for b in bits if b)
        body = sanitize(p.text, max_chars)
        lines.append(f"[{i}] ({head}) {body}" if head else f"[{i}] {body}")
    return "\n".join(lines)


# -- tokens and overlap --------------------------------------------------------

_WORD = re.compile(r"[0-9a-z\u00c0-\u024f]+|[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_STOP = en.STOPWORDS | zh.STOPWORDS


def content_tokens(text: str) -> set[str]:
    """Lower-cased words (and single CJK characters) without stop words."""
    t = unicodedata.normalize("NFKC", text or "").lower()
    return {w for w in _WORD.findall(t) if w not in _STOP}


_CJK_RUN = re.compile(CJK.pattern + "+")


def query_tokens(text: str) -> set[str]:
    """Content words, with Chinese read as character bigrams: one character more or less
    ("冬奥会" / "冬残奥会") is a different query, not a near copy of it."""
    t = unicodedata.normalize("NFKC", text or "").lower()
    out = {w for w in _WORD.findall(_CJK_RUN.sub(" ", t)) if w not in _STOP}
    for run in _CJK_RUN.findall(t):
        out.update({run} if len(run) == 1 else {run[i : i + 2] for i in range(len(run) - 1)})
    return out


def query_similarity(a: str, b: str) -> float:
    """Jaccard overlap of :func:`query_tokens` (0..1): how close two search queries are."""
    ta, tb = query_tokens(a), query_tokens(b)
    return len(ta & tb) / len(ta | tb) if ta and tb else float(ta == tb)


def normalize_query(q: str) -> str:
    """Canonical form used by repeated-query guards."""
    return " ".join(sorted(content_tokens(q))) or _WS.sub(" ", (q or "").strip().lower())


# -- answers ---------------------------------------------------------------------

#: a citation mark: ``[1]``, ``[2, 3]``, ``【1】``
CITE_MARK = re.compile(r"[\[【]\s*(\d{1,3}(?:\s*[,，、]\s*\d{1,3})*)\s*[\]】]")
ANSWER_PREFIX = re.compile(
    rf"^\s*(?:(?:short\s+|final\s+)?answer|{en.ANSWER_IS}|the\s+answer\s+is|a|答案|简短答案|{zh.FINAL_ANSWER})\s*[:：]\s*",
    re.I,
)


def cited_numbers(text: str) -> list[int]:
    """Document numbers cited as [1], [2, 3], 【1】 in order of first mention."""
    numbers = (int(n) for m in CITE_MARK.finditer(text or "") for n in re.split(r"[,，、]", m.group(1)))
    return list(dict.fromkeys(numbers))


def strip_citations(text: str) -> str:
    return _WS.sub(" ", CITE_MARK.sub("", text or "")).strip()


def clean_short(text: str, max_chars: int = 200) -> str:
    """A short answer span: first non-empty line, no label, quotes, citations or final period."""
    t = next((ln.strip() for ln in cap(text).splitlines() if ln.strip()), "")
    for _ in range(2):
        t = ANSWER_PREFIX.sub("", t)
    t = strip_citations(t)
    t = t.strip().strip("*").strip().rstrip("。．.!！ ").strip()
    if len(t) >= 2 and t[0] in "\"'“‘「" and t[-1] in "\"'”’」":
        t = t[1:-1].strip()
    t = t.rstrip("。．.!！ ").strip()
    if len(t) > max_chars:
        t = t[:max_chars].rstrip() + "…"
    return t


def clip(text: object, n: int) -> str:
    """``text`` on one line (runs of whitespace as one space), cut to ``n`` characters with "…"."""
    t = " ".join(str(text).split())
    return t if len(t) <= n else t[: n - 1] + "…"


def tail(text: str, max_chars: int) -> str:
    return text if len(text) <= max_chars else "… " + text[-max_chars:].lstrip()


#: the answer formats' scaffold labels, which are instructions to the model and not text for the reader
_SCAFFOLD = re.compile(
    rf"[ \t]*\**(?:{en.ANSWER_IS}|(?:short\s+answer|{en.FINAL_ANSWER})\s*(?=[:：])|{zh.ANSWER_IS}"
    rf"|(?:问题的)?{zh.FINAL_ANSWER}是\s*(?=[:：])|简短答案\s*(?=[:：]))\**[ \t]*[:：]?[ \t]*\**",
    re.I,
)


#: "<short answer>" copied from the instruction instead of an answer
PLACEHOLDER = re.compile(r"<[^<>]{0,40}>")


def _squash(text: str) -> str:
    return re.sub(r"[\W_]+", "", unicodedata.normalize("NFKC", text or "")).lower()


def strip_scaffold(answer: str) -> str:
    """The answer without the scaffold labels the model was asked to write for the parser ("所以答案是：", "简短答案：",
    "问题的最终答案是："): a labelled value the rest already states goes with its label ("…15个自然日内提交。所以答案是：15" ends at
    "提交。"), and so does a copied placeholder ("<short answer>"); any other value stays, without the label.

    ``Strategy.finish`` applies it to Chinese answers.  English answers keep their "So the answer is:" line for now:
    stripping it changes the long answers of every English run, which has not been measured on a tuning split yet."""
    out = answer or ""
    marks = list(_SCAFFOLD.finditer(out))
    if not marks:
        return answer  # nothing to strip: the answer as written
    for m in reversed(marks):
        end = out.find("\n", m.end())
        end = len(out) if end < 0 else end
        value = out[m.end() : end].strip()
        rest = out[: m.start()] + out[end:]
        stated = (said := _squash(strip_citations(value))) and said in _squash(rest)
        out = rest if PLACEHOLDER.fullmatch(value) or stated else out[: m.start()] + value + out[end:]
    out = re.sub(r"\n{3,}", "\n\n", out).strip()
    return out or (answer or "").strip()
