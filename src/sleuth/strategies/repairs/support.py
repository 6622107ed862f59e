"""The short-answer fail-safe: a short answer whose words the run's own texts (the question, the
long answer, the passages it saw) do not state is not returned, and the long answer stands.

The failure it fixes: a short-answer call that names something the run never saw (on a MuSiQue
tuning question RAT's extraction gave "JFK Airport", stated by none of the run's texts; gold
"Stockholm Arlanda Airport"). Words are compared in one spelling (accents, "U.S." = "US", 1,200 = 1200,
"1.4 million", number words and Chinese numerals, ordinals, months, plurals, shared stems); Chinese by
character pairs.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from typing import Any

from sleuth.lang import abstains, en, polarity, zh
from sleuth.strategies.grounding import Claim, is_yes_no
from sleuth.strategies.text import query_tokens

_DOTTED = re.compile(r"\b(?:[A-Za-z]\.){2,}")  # "U.S." -> "US"
_THOUSANDS = re.compile(r"(?<=\d)[,，](?=\d{3}(?!\d))")
_SCALED = re.compile(r"(\d+(?:\.\d+)?)\s*(thousand|million|billion|万|亿)")
_SCALES = {"thousand": 10**3, "million": 10**6, "billion": 10**9, "万": 10**4, "亿": 10**8}
_ZH_NUMERAL = re.compile(f"[{zh.NUMERAL_CHARS}]+")
_ORDINAL = re.compile(r"^(\d+)(?:st|nd|rd|th)$")
#: a run of capitalised words (lower-case name particles inside): what an acronym abbreviates
_CAPS_RUN = re.compile(r"[A-Z][\w'’-]*(?:\s+(?:(?:of|the|and|for|de|du|la)\s+)*[A-Z][\w'’-]*)+")
_ACRONYM = re.compile(r"\b[A-Z]{2,6}\b")
_LIST_ITEMS = re.compile(r"\s*(?:[,，;；、/和与及]|\band\b)\s*")


def _normal(text: str) -> str:
    """Lower case without accents, "U.S." as "us", 1,000 as 1000, Chinese numerals as digits."""
    t = _DOTTED.sub(lambda m: m.group(0).replace(".", ""), unicodedata.normalize("NFKC", text or ""))
    t = _ZH_NUMERAL.sub(lambda m: zh.numeral(m.group(0)), _THOUSANDS.sub("", t))
    t = "".join(ch for ch in unicodedata.normalize("NFKD", t) if not unicodedata.combining(ch))
    return t.lower()


def _canon(word: str) -> str:
    """One spelling per word: number words and ordinals as digits, months by three letters, no plural -s."""
    if word in en.NUMBER_WORDS:
        return en.NUMBER_WORDS[word]
    if m := _ORDINAL.match(word):
        return m.group(1)
    if word in en.MONTHS or word == "sept":
        return word[:3]
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    return word[:-1] if word.endswith("s") and len(word) > 3 and not word.endswith("ss") else word


def _support_tokens(text: str) -> set[str]:
    """The words (Chinese: character bigrams, :func:`~sleuth.strategies.text.query_tokens`) a text
    states, in one spelling; a scaled number also as its value ("140 million" -> 140000000).  A single
    letter or Han character is no word to check: an initial, or a unit ("45天" for "45个自然日")."""
    t = _SCALED.sub(lambda m: f" {round(float(m.group(1)) * _SCALES[m.group(2)])} ", _normal(text))
    return {_canon(w) for w in query_tokens(t) if len(w) > 1 or w.isdigit()}


def _acronyms(text: str) -> tuple[set[str], set[str]]:
    """The acronyms a text writes ("USA", "U.S."), and the initials of its capitalised runs
    ("United States of America": usa, us, sa, ...)."""
    t = _DOTTED.sub(lambda m: m.group(0).replace(".", ""), text or "")
    initials: set[str] = set()
    for run in _CAPS_RUN.findall(t):
        caps = [w[0].lower() for w in run.split() if w[:1].isupper()]
        initials.update("".join(caps[i:j]) for i in range(len(caps)) for j in range(i + 2, min(len(caps), i + 6) + 1))
    return {a.lower() for a in _ACRONYM.findall(t)}, initials


def _kin(word: str, seen: set[str]) -> bool:
    """Whether ``seen`` has a word of the same stem: a common start of at least four letters and half the
    shorter word ("Norway" for "Norwegian", "Italy" for "Italian", "directed" for "director")."""
    if len(word) < 4 or not word.isalpha():
        return False
    short = (w for w in seen if w.startswith(word[:4]))
    return any(2 * _common(word, v) >= min(len(word), len(v)) for v in short)


def _common(a: str, b: str) -> int:
    """The length of the start ``a`` and ``b`` share."""
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def support(question: str, short: str, answer: str, passages: Iterable[str], yes_no: bool = False) -> tuple[int, int]:
    """How many of ``short``'s words the question, the long answer and the passages state, of how
    many: (found, words).  Equal when the span is found as written (after :func:`_normal`), an
    abstention or a yes/no (for a yes/no question, ``yes_no``, or as the long answer says it)."""
    s = (short or "").strip()
    if not s or abstains(s):
        return 0, 0
    texts = [question, answer, *passages]
    if is_yes_no(s):
        said = polarity(answer)
        ok = yes_no or (said is not None and said == polarity(s))
        return (1, 1) if ok else (0, 1)
    flats = [" ".join(re.findall(r"\w+", _normal(t))) for t in texts if t]
    items = [" ".join(re.findall(r"\w+", _normal(x))) for x in _LIST_ITEMS.split(s)]
    if all(x and any(x in f for f in flats) for x in items):  # as written, or each item of a list ("D组和C组")
        return len(items), len(items)
    words = _support_tokens(s)
    seen = set().union(*(_support_tokens(t) for t in texts))
    found = {w for w in words if w in seen or _kin(w, seen)}
    if words - found:
        written, initials = (set().union(*sets) for sets in zip(*(_acronyms(t) for t in texts), strict=True))
        found |= {w for w in words if w in written | initials}  # "UK" for "United Kingdom"
        own = "".join(w[0] for w in s.split() if w[:1].isupper()).lower()
        if len(own) == len(s.split()) >= 2 and own in written:
            found = set(words)  # "United States" for "U.S."
    return len(found), len(words)


def unsupported_note(
    question: str, short: str, answer: str, passages: Iterable[str], yes_no: bool = False
) -> dict[str, Any] | None:
    """The ``short_answer_unsupported`` note when no more than half of ``short``'s words are stated
    by the question, the long answer or the passages the run saw (a name the model made up, such as
    "JFK Airport" on a MuSiQue tuning question); None when it is supported.  The short
    answer is then not returned: the long answer stands (``refused`` keeps the span)."""
    found, words = support(question, short, answer, list(passages), yes_no)
    if found * 2 > words or not words:
        return None
    return {
        "message": "the short answer is not stated by the question, the answer or the passages; the answer stands",
        "refused": short,
        "found": found,
        "words": words,
    }


def seen_passages(claims: Iterable[Claim], events: Iterable[Any]) -> list[str]:
    """The passages a run saw: its claims' (whole) and its ``search`` events' (as recorded), titled."""
    texts = [f"{p.title}\n{p.text}" for c in claims for p in c.passages]
    for e in events:
        if e.kind == "search":
            texts += [f"{p.get('title') or ''}\n{p.get('text') or ''}" for p in e.data.get("passages") or ()]
    return texts
