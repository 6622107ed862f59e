"""Scores for Chinese answers: character-level EM/F1 after Chinese normalisation, and
RGB's "every part mentioned" check.

Chinese has no spaces, so a word-level F1 scores a whole sentence as one token.
Here an answer is normalised (:func:`normalize_zh`: NFKC, which folds full-width
letters, digits and punctuation to half width; lower case; every punctuation
mark, symbol and space removed; Arabic numbers written with 万/亿 expanded, so
"131万" and "1310000" compare equal, and thousands separators dropped) and then
split into characters, except that a run of Latin letters or digits stays one
token ("G20峰会" -> ``g20 峰 会``).  :func:`score_zh` is used for an item whose
gold answers contain Chinese; English items keep the SQuAD metrics.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_WAN = re.compile(r"(\d+(?:\.\d+)?)\s*(万亿|亿|万)")
_SCALE = {"万": 10**4, "亿": 10**8, "万亿": 10**12}
_TOKEN = re.compile(r"[a-z0-9]+(?:\.[0-9]+)?|\S")


def token_f1(pred: Sequence[str], gold: Sequence[str]) -> float:
    """SQuAD's F1 of the multiset overlap of two token lists (the English metrics' too); two empty lists agree."""
    if not pred or not gold:
        return float(list(pred) == list(gold))
    same = sum((Counter(pred) & Counter(gold)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(gold)
    return 2 * precision * recall / (precision + recall)


def is_chinese(text: str) -> bool:
    """True when ``text`` contains a Chinese character."""
    return bool(_CJK.search(text or ""))


def _expand(m: re.Match[str]) -> str:
    num, unit = m.group(1), m.group(2)
    whole, _, frac = num.partition(".")
    scale = _SCALE[unit]
    digits = len(str(scale)) - 1
    if len(frac) > digits:  # more decimals than the unit has zeros: leave it as written
        return m.group(0)
    return str(int(whole) * scale + (int(frac.ljust(digits, "0")) if frac else 0))


def normalize_zh(text: str) -> str:
    """NFKC, lower case, numbers with 万/亿 expanded, punctuation, symbols and spaces removed
    (a decimal point between digits is kept)."""
    s = unicodedata.normalize("NFKC", str(text or "")).lower()
    s = _THOUSANDS.sub("", s)
    s = _WAN.sub(_expand, s)
    s = "".join(ch for ch in s if ch == "." or not (unicodedata.category(ch)[0] in "PSZ" or ch.isspace()))
    return re.sub(r"\.(?!\d)|(?<!\d)\.", "", s)


def tokens_zh(text: str) -> list[str]:
    """Normalised tokens: one per Chinese character, one per run of Latin letters or digits."""
    return _TOKEN.findall(normalize_zh(text))


def em_zh(pred: str, golds: Iterable[str], norm: Callable[[str], str] = normalize_zh) -> float:
    """1 when the prediction equals a gold answer after ``norm`` (the English EM passes SQuAD's)."""
    return float(any(norm(pred) == norm(g) for g in golds))


def f1_zh(pred: str, golds: Iterable[str], tokenize: Callable[[str], list[str]] = tokens_zh) -> float:
    """Token F1 against the best gold: character-level here, the English F1 passes its tokens."""
    return max((token_f1(tokenize(pred), tokenize(g)) for g in golds), default=0.0)


def contains(haystack: str, needle: str) -> bool:
    if not needle:
        return False
    # a number must not be part of a longer number ("30" is not in "300", "5.7" not in "15.7")
    pre = r"(?<![\d.])" if needle[0].isdigit() else ""
    post = r"(?![\d])" if needle[-1].isdigit() else ""
    return re.search(pre + re.escape(needle) + post, haystack) is not None


def cover_zh(pred: str, golds: Iterable[str]) -> float:
    """1 when a normalised gold answer appears in the normalised prediction."""
    p = normalize_zh(pred)
    return float(any(contains(p, normalize_zh(g)) for g in golds))


def part_hits(answer: str, parts: Sequence[Sequence[str]]) -> list[bool]:
    """For each answer part (a list of accepted variants): is one of them mentioned in ``answer``?"""
    a = normalize_zh(answer)
    return [any(contains(a, normalize_zh(v)) for v in variants) for variants in parts]
