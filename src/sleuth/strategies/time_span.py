"""The time span of a time-sensitive question ("between Aug 2012 and Sep 2012", "2004年3月至2005年10月").

Step-back's paper task, TimeQA, asks what held at one time ("Who acted as M between
Aug 2012 and Sep 2012?"); its step-back question asks for the whole history ("Who
played M over the years?"), so the documents found hold the timeline the answer is
read from.  The 1.5B default model often paraphrases instead and keeps the span
("Who was M between August 2012 and September 2012 in James Bond films?"), which is
no step back.  :func:`drop_time_span` removes the span, so what is left asks for the
history; :func:`has_time_span` says whether a question has one.
"""

from __future__ import annotations

import re

_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|"
    r"Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\.?"
)
# "Aug 2012", "2 March 1911", "March 2, 1911", "1950s", "early 2000s", "the late 1980s", "Jun 170"
_DATE = (
    rf"(?:the\s+)?(?:(?:early|mid|late)[\s-]+)?(?:\d{{1,2}}\s+{_MONTH}\s+|{_MONTH}\s+(?:\d{{1,2}},?\s+)?)?"
    r"\d{3,4}s?"
)
# a date that fixes a time rather than naming an event's year ("in Dec 1964", "in the early 1970s", not "in 1952")
_DATE_POINT = (
    rf"(?:the\s+)?(?:(?:(?:early|mid|late)[\s-]+)\d{{3,4}}s?|\d{{3,4}}s"
    rf"|(?:\d{{1,2}}\s+{_MONTH}\s+|{_MONTH}\s+(?:\d{{1,2}},?\s+)?)\d{{3,4}})"
)
_EN_SPAN = re.compile(
    rf",?\s*\b(?:(?:between|from|(?:during\s+)?the\s+period)\s+(?:the\s+years\s+)?{_DATE}\s+(?:and|to|until|till|-|–)\s+"
    rf"{_DATE}|(?:before|after|until|till|since|during|as\s+of|spanning\s+the\s+months\s+in)\s+{_DATE}"
    rf"|(?:in|by|around|circa)\s+{_DATE_POINT}(?:\s*(?:-|–|to)\s*{_DATE})?)\b",
    re.I,
)
_ZH_DATE = r"\d{3,4}年(?:\d{1,2}月)?(?:\d{1,2}日)?"
_ZH_RANGE = rf"{_ZH_DATE}(?:至|到|—|－|-|~){_ZH_DATE}"
_ZH_AFTER = r"(?:期间|的时候|时|以前|之前|以后|之后|起)"
# a range, a month, or a year with 在/于/从 before or 期间/时/以前/之后 after it; not "2022年G20峰会" (an event's year)
_ZH_SPAN = re.compile(
    rf"(?:(?:在|于|从)?{_ZH_RANGE}{_ZH_AFTER}?|(?:在|于|从)?\d{{3,4}}年\d{{1,2}}月(?:\d{{1,2}}日)?{_ZH_AFTER}?"
    rf"|(?:在|于|从)\d{{3,4}}年{_ZH_AFTER}?|\d{{3,4}}年{_ZH_AFTER})[，,]?"
)


def has_time_span(text: str) -> bool:
    return bool(_EN_SPAN.search(text or "") or _ZH_SPAN.search(text or ""))


def drop_time_span(text: str) -> str:
    """``text`` without its time spans, spaces tidied (unchanged when it has none)."""
    out = _ZH_SPAN.sub("", _EN_SPAN.sub("", text or ""))
    out = re.sub(r"\s+([?？,.])", r"\1", re.sub(r"\s{2,}", " ", out)).strip()
    return out.strip(" ,，")
