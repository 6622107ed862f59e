"""Fitting a strategy's short answer to the answer its question expects.

A defensive post-check on the span a strategy already produced (every strategy's
short answer passes through it in :meth:`Strategy.finish`); it only ever *cuts* that
span, or replaces it by the question's own option or by yes/no that the span itself
says; it never adds a word the reply did not contain.

- comparison ("Who was born first, A or B?"): the option the span names
  ("A was born earlier than B" -> "A"); unchanged when it names neither or both alike;
- yes/no: "Yes, both are …" -> "yes"; a span that only denies ("A is …, B is not") -> "no";
- every other type: a sentence that restates the question is cut to the part that is
  new ("Italy entered the First World War on 3 May 1915" -> "3 May 1915"; "Eric Whitacre is
  the composer of Water Night" -> "Eric Whitacre"), a second sentence and a
  trailing parenthesis are dropped ("6.8 inches (17.3 cm)" -> "6.8 inches");
- how many: the number, when the span holds exactly one; what year: the year, likewise;
  which country: the last part of "City, Region, Country".
"""

from __future__ import annotations

import re
from typing import Any

from sleuth.strategies.answer_type import (
    CHOICE,
    DATE,
    ENTITY,
    HAN,
    LIST,
    NUMBER,
    PERSON,
    PLACE,
    YESNO,
    AnswerType,
    answer_type,
)
from sleuth.strategies.text import content_tokens

_WORD = re.compile(r"[0-9a-z\u00c0-\u024f]+")

# -- yes / no ---------------------------------------------------------------------------

_YES_EN = re.compile(r"^\W*(?:yes|yeah|true|correct)\b", re.I)
_NO_EN = re.compile(r"^\W*(?:no|false|incorrect)\b", re.I)
_NEG_EN = re.compile(r"\b(?:not|never|neither|nor|no)\b|n't\b", re.I)
_YESNO_ZH = re.compile(
    r"^(不是|不能|不可以|不会|不需要|不用|没有|否|不|是的|是|对|可以|能|会|需要|有)(?=[，,。；;！!\s]|$)"
)


def fit_yes_no(short: str) -> str | None:
    """ "yes"/"no" (English) or the leading 是/否 word (Chinese) a span states; None if it states neither."""
    s = short.strip()
    if HAN.match(s):
        m = _YESNO_ZH.match(s)
        return m.group(1) if m else None
    if _YES_EN.match(s):
        return "yes"
    if _NO_EN.match(s):
        return "no"
    if _NEG_EN.search(s):
        return "no"
    return None


# -- comparison options -----------------------------------------------------------------

_CLAUSE = re.compile(r"[,;，；。]|\b(?:while|whereas|but|although)\b", re.I)
_THAN = re.compile(r"\bthan\b|比", re.I)


def _names(text: str, option: str, other: str) -> bool:
    """Whether ``text`` names ``option`` (its own words, not those it shares with ``other``)."""
    if option.lower() in text.lower():
        return True
    if HAN.search(option):
        return False
    own = content_tokens(option) - content_tokens(other)
    toks = content_tokens(text)
    return bool(own) and len(own & toks) * 2 >= len(own)


#: lower-case words that belong in names and titles ("Leonardo da Vinci", "Lord of the Rings")
_NAME_PARTICLES = frozenset(
    [
        "of",
        "the",
        "a",
        "an",
        "and",
        "de",
        "da",
        "di",
        "del",
        "della",
        "van",
        "von",
        "der",
        "den",
        "la",
        "le",
        "du",
        "y",
        "bin",
        "al",
    ]
)


def _not_a_name(short: str, option: str) -> bool:
    """Whether ``short`` has a lower-case word beyond ``option``'s own that no name has."""
    if HAN.search(short):
        return False
    own = {w.lower() for w in option.split()}
    words = (w.strip(".,;:!?\"'()") for w in short.split())
    return any(w[:1].islower() and w not in own and w not in _NAME_PARTICLES for w in words)


def fit_option(short: str, options: tuple[str, ...]) -> str | None:
    """The option (as the question writes it) that ``short`` picks, or None."""
    if len(options) != 2:
        return None
    a, b = options
    has_a, has_b = _names(short, a, b), _names(short, b, a)
    if has_a != has_b:
        pick = a if has_a else b
        # a name, not a sentence ("Ernst Willi Messerschmid" for the option "Ernst Messerschmid"), stays as written;
        # a span with words that are no part of a name ("Marsilea the genus of") is not a name
        sentence = _NEG_EN.search(short) or any(w.lower() in _LINK for w in short.split())
        return pick if sentence or _not_a_name(short, pick) else short
    if not has_a:
        return None
    m = _THAN.search(short)  # "A was born earlier than B"
    if m:
        before, after = short[: m.start()], short[m.end() :]
        for x, y in ((a, b), (b, a)):
            if _names(before, x, y) and not _names(before, y, x) and _names(after, y, x):
                return x
    pos: set[str] = set()
    neg: set[str] = set()
    for clause in _CLAUSE.split(short):  # "A did not enjoy boxing, while B did"
        named = [x for x, y in ((a, b), (b, a)) if clause and _names(clause, x, y)]
        if len(named) == 1:
            (neg if _NEG_EN.search(clause) or "不" in clause else pos).add(named[0])
    if len(pos) == 1 and neg == {a, b} - pos:
        return pos.pop()
    return None


# -- cutting a sentence to its span -----------------------------------------------------

_LINK = frozenset(
    [
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "became",
        "become",
        "becomes",
        "has",
        "have",
        "had",
        "did",
        "does",
        "do",
        "located",
        "born",
        "called",
        "known",
        "named",
        "made",
    ]
)
_GLUE = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "in",
        "on",
        "at",
        "to",
        "for",
        "from",
        "by",
        "with",
        "and",
        "as",
        "into",
        "s",
        "'s",
        "its",
        "his",
        "her",
        "their",
    ]
)


def _echoes(word: str, qtok: set[str]) -> bool:
    toks = _WORD.findall(word.lower())
    return all(
        t in qtok or t in _GLUE or t in _LINK or (len(t) == 1 and t.isalpha()) or _stem_in(t, qtok) for t in toks
    )


def _capital(word: str) -> bool:
    w = word.lstrip("\"'“‘(")
    return bool(w) and w[0].isupper()


def _stem_in(t: str, qtok: set[str]) -> bool:
    """``t`` is a question word with another ending ("entered" for "enter")."""
    return len(t) >= 4 and any(len(q) >= 4 and (t.startswith(q) or q.startswith(t)) for q in qtok)


_INFLECTED = re.compile(r"^[a-z]+(?:ed|es|s|ing)$")


def _is_link(word: str, qtok: set[str]) -> bool:
    """A verb that makes the words before it a restated clause: a copula, or an inflected
    question verb written in lower case ("entered", "bundles")."""
    if word in _LINK:
        return True
    return bool(_INFLECTED.match(word)) and word not in qtok and any(len(q) >= 4 and word.startswith(q) for q in qtok)


def _cut(words: list[str], qtok: set[str]) -> list[str] | None:
    """``words`` without a leading run that restates the question; None when there is none."""
    i = 0
    while i < len(words) and _echoes(words[i], qtok):
        i += 1
    while 0 < i < len(words) and _capital(words[i]) and _capital(words[i - 1]):
        i -= 1  # never cut a name in two ("Rochester is in New York City")
    head, rest = words[:i], words[i:]
    if not rest or not head:
        return None
    if not any(_is_link(w, qtok) for w in head):
        return None
    if not any(t in qtok for w in head for t in _WORD.findall(w.lower())):
        return None
    return rest


def trim_restatement(question: str, short: str) -> str:
    """Cut a sentence that restates the question down to the words that answer it."""
    words = short.split()
    if len(words) < 3 or HAN.search(short):
        return short
    qtok = content_tokens(question)
    rest = _cut(words, qtok)
    if rest is not None:
        words = rest
    back = _cut(words[::-1], qtok)
    if back is not None:
        words = back[::-1]
    out = " ".join(words).strip(" ,;:")
    if out.count('"') == 1:
        out = out.replace('"', "")
    return out.strip() or short


_SECOND = re.compile(r"(?<=[a-z0-9]{3})\.\s+(?=[A-Z])")
_PAREN = re.compile(r"\s*[（(][^()（）]*[)）]\s*$")


def first_sentence(short: str) -> str:
    parts = _SECOND.split(short, maxsplit=1)
    return parts[0] if parts[0].strip() else short


def drop_parenthesis(short: str) -> str:
    t = _PAREN.sub("", short)
    return t if t.strip() else short


# -- numbers, years, places -------------------------------------------------------------

_NUM = re.compile(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w])|(?<![\w.,])\d+(?:\.\d+)?(?![\w,])")
_NUM_WORD = re.compile(
    r"\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen"
    r"|sixteen|seventeen|eighteen|nineteen|twenty)\b",
    re.I,
)
_YEAR = re.compile(r"(?<!\d)(1[0-9]{3}|20[0-9]{2})(?!\d)")


#: a scale word is part of the number it follows ("140 million"; Chinese: ``_fit_zh``'s unit)
_SCALE = re.compile(r"\s*(?:hundred|thousand|million|billion|trillion)\b", re.I)


def only_number(short: str) -> str | None:
    """The one number in ``short`` (digits or a small number word) with its scale word, when it
    has exactly one ("over 140 million records" -> "140 million")."""
    found = list(_NUM.finditer(short)) or list(_NUM_WORD.finditer(short))
    if len(found) != 1:
        return None
    m = found[0]
    scale = _SCALE.match(short, m.end())
    number = short[m.start() : scale.end() if scale else m.end()]
    return number if number != short else None


def only_year(short: str) -> str | None:
    years = set(_YEAR.findall(short))
    return years.pop() if len(years) == 1 and short.strip() not in years else None


def last_part(short: str) -> str:
    """ "Stockholm, Sweden" -> "Sweden" (the country of a comma-separated place)."""
    if re.search(r"\b(?:and|or)\b", short):  # a list of places, not one place's hierarchy
        return short
    parts = [p.strip() for p in short.split(",") if p.strip()]
    return parts[-1] if 1 < len(parts) <= 3 and len(parts[-1].split()) <= 4 else short


_ZH_SENT = re.compile(r"(?<=[。！；])")
_ZH_NUM = re.compile(
    r"\d+(?:\.\d+)?\s*(?:%|％|个自然日|个工作日|自然日|工作日|天|日|年|个月|月|元|万元|人|次|个|倍|岁)?"
)


def _fit_zh(short: str, t: AnswerType) -> str:
    """Chinese: the first sentence; for a number question the one number (with its unit) it states."""
    s = next((p for p in _ZH_SENT.split(short) if p.strip()), short).rstrip("。！； ").strip() or short
    if t.kind == NUMBER and t.detail != LIST:
        nums = _ZH_NUM.findall(s)
        if len(nums) == 1 and nums[0] != s:
            return nums[0].strip()
    return s


_PLURAL_Q = re.compile(
    r"\b(?:are|were|have|both|all|list|name\s+\w+)\b|\b\w+(?:ies|[^s]s)\s+(?:are|were|did|do)\b", re.I
)
_ITEMS = re.compile(r",\s*(?:and\s+)?|\s+and\s+|\s*;\s*")


def first_item(question: str, short: str) -> str:
    """The first of several names listed for a question that asks for one ("Who was …?").

    A list of short items ("Karl Renner and Adolf Schärf") is the model hedging; its first
    item is the one it put first.  A question in the plural, or a long item, keeps the list.
    """
    if _PLURAL_Q.search(question):
        return short
    items = [p.strip() for p in _ITEMS.split(short) if p.strip()]
    if len(items) < 2 or any(len(p.split()) > 5 for p in items):
        return short
    return items[0]


def first_part(short: str) -> str:
    """ "Seattle, Washington" -> "Seattle" (the city of a comma-separated place)."""
    parts = [p.strip() for p in short.split(",") if p.strip()]
    return parts[0] if 1 < len(parts) <= 3 and len(parts[0].split()) <= 4 else short


# -- together -------------------------------------------------------------------------------


def fit_short(question: str, short: str, atype: AnswerType | None = None) -> str:
    """``short`` fitted to what ``question`` expects (see the module docstring); never longer."""
    s = (short or "").strip()
    if not s or len(s) > 2000:  # nothing to fit, or no span at all: left as it is
        return short
    t = atype or answer_type(question)
    if t.kind == CHOICE:
        return fit_option(s, t.options) or s
    if t.kind == YESNO:
        yn = fit_yes_no(s)
        return s if yn is None or yn == s.lower() else yn  # "Yes" stays as written
    if HAN.search(s):
        return _fit_zh(s, t)
    s = drop_parenthesis(first_sentence(s))
    s = trim_restatement(question, s)
    if t.detail == LIST:  # several parts asked for: every one stays
        return s
    if t.kind == NUMBER and t.detail == "count":
        s = only_number(s) or s
    elif t.kind == DATE and t.detail == "year":
        s = only_year(s) or s
    elif t.kind == PLACE and t.detail == "country":
        s = last_part(s)
    elif t.kind == PLACE and t.detail == "city":
        s = first_part(s)
    elif t.kind in (PERSON, ENTITY):
        s = first_item(question, s)
    return s


def fitted_note(question: str, short: str) -> dict[str, Any] | None:
    """The fields of the ``short_answer_fitted`` note when fitting ``short`` to ``question`` changes it
    (``fitted`` is the new short answer; the note keeps the span as written); None when it does not."""
    t = answer_type(question)
    fitted = fit_short(question, short, t)
    if not short or fitted == short:
        return None
    return {
        "type": "short_answer_fitted",
        "message": f"short answer fitted to the expected {t.kind}",
        "expected": t.kind,
        "written": short,
        "fitted": fitted,
    }
