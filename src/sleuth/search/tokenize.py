"""One deterministic tokenizer for English (lower-cased words) and Chinese (jieba search mode), shared by indexing
and querying; stopwords and punctuation dropped, numbers kept.
"""

from __future__ import annotations

import contextlib
import io
import logging
import re
import threading

__all__ = ["STOPWORDS_EN", "STOPWORDS_ZH", "has_cjk", "tokenize"]

STOPWORDS_EN = frozenset(
    """a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have
    having he her here hers herself him himself his how i if in into is it its itself just me more most my
    myself no nor not now of off on once only or other our ours ourselves out over own same she should so
    some such than that the their theirs them themselves then there these they this those through to too
    under until up very was we were what when where which while who whom why will with would you your
    yours yourself yourselves s t don""".split()  # noqa: SIM905
)

STOPWORDS_ZH = frozenset(
    "的 了 是 在 和 与 及 或 等 也 就 都 而 之 其 对 为 以 于 被 把 由 从 向 个 这 那 有 我 你 他 她 它 们 吗 呢 吧 啊 么 什么 怎么 如何 多少 还 要 能 会 可以".split()  # noqa: SIM905
)

_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_SEGMENTS = re.compile(rf"([{_CJK}]+)|([^\W_{_CJK}]+)", re.UNICODE)
_HAS_CJK = re.compile(rf"[{_CJK}]")
_WORD = re.compile(r"[^\W_]+")

_jieba_lock = threading.Lock()
_jieba = None


def _get_jieba():  # type: ignore[no-untyped-def]
    """Import and initialise jieba once, with its stderr chatter silenced."""
    global _jieba
    if _jieba is None:
        with _jieba_lock:
            if _jieba is None:
                import jieba

                jieba.setLogLevel(logging.WARNING)
                logging.getLogger("jieba").setLevel(logging.WARNING)
                with contextlib.redirect_stderr(io.StringIO()):
                    jieba.initialize()
                _jieba = jieba
    return _jieba


def has_cjk(text: str) -> bool:
    """True if ``text`` contains any Chinese character."""
    return bool(_HAS_CJK.search(text))


def tokenize(text: str) -> list[str]:
    """Search tokens of ``text`` (lower-cased, stopwords and punctuation removed)."""
    if not _HAS_CJK.search(text):  # the fast path: no Chinese at all
        return [w for w in _WORD.findall(text.lower()) if w not in STOPWORDS_EN]
    out: list[str] = []
    for cjk, word in _SEGMENTS.findall(text.lower()):
        if cjk:
            jb = _get_jieba()
            for tok in jb.cut_for_search(cjk, HMM=True):
                if tok and tok not in STOPWORDS_ZH and _HAS_CJK.search(tok):
                    out.append(tok)
        elif word not in STOPWORDS_EN:
            out.append(word)
    return out
