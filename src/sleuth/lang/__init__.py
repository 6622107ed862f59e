"""The language layer: which language a text is in, and each language's word lists and patterns.

:mod:`sleuth.lang.en` and :mod:`sleuth.lang.zh` hold the words (abstention phrases, yes/no words,
question words); this module compiles them once for every layer that reads answers: the strategies,
the citation grounding and the metrics (``sleuth.eval``).  It imports nothing of Sleuth's.
"""

from __future__ import annotations

import re

from sleuth.lang import en, zh

#: a CJK ideograph
CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")

#: a text that says there is no answer, anywhere in it ("… is not mentioned", "无法回答")
ABSTAIN = re.compile(f"{en.ABSTAIN}|{zh.ABSTAIN}", re.I)
#: a text that says the question cannot be answered, in so many words
CANNOT = re.compile(f"{en.CANNOT}|{zh.CANNOT}", re.I)
#: a text that opens by saying it found nothing ("Unknown", "No helpful information found", "没有找到")
NOTHING = re.compile(rf"^\W*(?:{en.NOTHING}|{zh.NOTHING})", re.I)
YES_WORDS = en.YES_WORDS | zh.YES_WORDS
NO_WORDS = en.NO_WORDS | zh.NO_WORDS
#: how a yes or a no answer starts (English and Chinese); a no is checked first ("不是" before "是")
NO_START = re.compile(rf"^(?:{zh.NO_START}|no\b|not\b)", re.I)
YES_START = re.compile(rf"^(?:{zh.YES_START}|yes\b)", re.I)
#: the question words of both languages ("where" in "Where is X from?", 谁)
WH = re.compile(rf"\b{en.WH}\b|{zh.WH}", re.I)
#: a whole answer that is a yes or a no ("Yes.", "不是")
YES_NO_ANSWER = re.compile(rf"^\W*(?:{en.YES_NO_ANSWERS}|{zh.YES_NO_ANSWERS})\W*$", re.I)
#: a question answered by yes or no
YES_NO_QUESTION = re.compile(rf"^{en.AUX}\b|{zh.YES_NO_QUESTION}", re.I)


def detect_lang(text: str) -> str:
    """``"zh"`` when a noticeable share of the letters are CJK ideographs, else ``"en"``."""
    letters = [ch for ch in text if ch.isalpha()]
    if not letters:
        return "en"
    cjk = sum(1 for ch in letters if CJK.match(ch))
    return "zh" if cjk / len(letters) >= 0.2 else "en"


def abstains(text: str) -> bool:
    """Whether ``text`` says there is no answer ("unknown", "not mentioned", "无法回答")."""
    return bool(ABSTAIN.search(text or ""))


def unquoted(text: str) -> str:
    """``text`` without its leading space, quotes and markup ("**“是”" -> "是”")."""
    return re.sub(r"^[\s*_\"'“”「」【】]+", "", text or "")


def polarity(text: str) -> bool | None:
    """True (yes), False (no) or None from how ``text`` starts (after quotes and markup)."""
    s = unquoted(text)
    if NO_START.match(s):
        return False
    if YES_START.match(s):
        return True
    return None
