"""Pick the prompt language from the question."""

from __future__ import annotations

import re

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def detect_lang(text: str) -> str:
    """``"zh"`` when a noticeable share of the letters are CJK ideographs, else ``"en"``."""
    letters = [ch for ch in text if ch.isalpha()]
    if not letters:
        return "en"
    cjk = sum(1 for ch in letters if _CJK.match(ch))
    return "zh" if cjk / len(letters) >= 0.2 else "en"
