"""Policy questions scored by their conclusion, not by a number the answer happens to mention.

A policy question (``--format policy_zh``: ``benchmarks/data/policy_zh``, ``shared/data/policy_zh``) is
one of three kinds, and its **conclusion** score (:func:`conclusion_score`) checks what the asker needs:

* **yes/no** (``conclusion`` 是 or 否): right only when the answer's polarity (:func:`answer_polarity`) is
  the expected one, the answer does not contradict itself (是 in its body, 否 in its short answer) and it
  names the deciding clause's terms (``must_mention``; ``"第十五条|15个自然日"`` accepts either);
* **out of scope** (no ``evidence``: the deciding clause lies outside the asker's scope): right only when
  the answer says the accessible documents do not settle it and breaks no scope (:func:`scope_violations`);
* any other (a deadline, an amount, a version): right when it mentions every ``must_mention`` term and no
  ``must_not_mention`` one.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sleuth.lang import NO_START, YES_START, en, zh
from sleuth.lang import abstains as lang_abstains
from sleuth.search.base import Filters, Passage

YES, NO = "是", "否"

#: negations inside a first sentence that starts with neither ("退票费用不按一般期限，…")
_NO_INSIDE = re.compile(r"不是|不需要|不必|无需|无须|不用|不适用|不按|不能|不可以")
#: what a reply's conclusion is labelled with (Step-back's form, RAG's last line, answers' labels)
_CONCLUSION_LABEL = re.compile(
    rf"(?:^|\n)[ \t>*#-]*\**(?:结论|最终结论|答案|回答|{zh.ANSWER_IS}|简短答案|简答|conclusion|answer|{en.ANSWER_IS})"
    r"\**[ \t]*[:：]\**[ \t]*",
    re.I,
)
#: a reply that starts with a field label ("一般规定：", "Background:"): its start is no conclusion
_FIELD_START = re.compile(r"^[\s*>#-]*[\w ]{1,12}\**[:：]")


def _norm(text: str) -> str:
    return re.sub(r"\s+", "", unicodedata.normalize("NFKC", text or "")).lower()


def contains(haystack: str, needle: str) -> bool:
    if not needle:
        return False
    # a number must not be part of a longer number ("30" is not in "300", "5.7" not in "15.7")
    pre = r"(?<![\d.])" if needle[0].isdigit() else ""
    post = r"(?![\d])" if needle[-1].isdigit() else ""
    return re.search(pre + re.escape(needle) + post, haystack) is not None


def has_term(text: str, term: str) -> bool:
    """``term`` (or one of its ``|``-separated variants) appears in ``text``, ignoring spaces and width;
    a number must not be part of a longer number ("30" is not in "300")."""
    return any(contains(_norm(text), _norm(variant)) for variant in term.split("|"))


def mentions(answer: str, must: Sequence[str], must_not: Sequence[str] = ()) -> float:
    """1 when every ``must`` term appears in the answer and no ``must_not`` one does (:func:`has_term`)."""
    return float(all(has_term(answer, m) for m in must) and not any(has_term(answer, m) for m in must_not))


def polarity(text: str) -> str:
    """是, 否 or "" (no decision) from how a conclusion starts: "不是。…" -> 否, "可以，…" -> 是.

    Only the first sentence counts; one that starts with neither is 否 when it negates the rule
    ("退票费用不按一般期限…"), else undecided."""
    s = unicodedata.normalize("NFKC", text or "").strip()
    s = re.sub(r"^[\s*_>#\-\"'“”‘’「」【】\[\]()（）]+", "", s)
    first = re.split(r"[。！？!?\n]", s, maxsplit=1)[0]
    if NO_START.match(first):
        return NO
    if YES_START.match(first):
        return YES
    if _NO_INSIDE.search(first):
        return NO
    return ""


def _conclusion_field(answer: str) -> str:
    """The text after the reply's last conclusion label ("结论：", "答案：", "所以答案是："), if any."""
    marks = list(_CONCLUSION_LABEL.finditer(answer or ""))
    return answer[marks[-1].end() :] if marks else ""


def answer_polarity(answer: str, short: str = "") -> tuple[str, bool]:
    """(the answer's polarity, whether it contradicts itself).

    Read from the short answer, the reply's labelled conclusion and the start of the reply;
    the first decisive one is the polarity, and two decisive ones that differ are a contradiction."""
    start = "" if _FIELD_START.match(answer or "") else answer  # "一般规定：…" states a rule, not the conclusion
    said = [p for p in (polarity(short), polarity(_conclusion_field(answer)), polarity(start)) if p]
    if not said:
        return "", False
    return said[0], len(set(said)) > 1


def abstains(answer: str) -> bool:
    """True when an answer declines to answer: empty, or it says the (accessible) documents do not settle it."""
    return not (answer or "").strip() or lang_abstains(answer)


def conclusion_of_gold(question: str, answer: str) -> str | None:
    """The expected conclusion of a record without a ``conclusion`` field: the gold answer's
    polarity when the question is a yes/no one ("…吗？") and the gold answer starts with 是/不是/可以…"""
    if not re.search(r"吗[？?]?\s*$|是否|能否|可否", question or ""):
        return None
    return polarity(answer) or None


def _passage(p: Mapping[str, Any]) -> Passage:
    acl = p.get("acl")
    return Passage.from_dict(
        {"text": "", **p, "id": str(p.get("id") or ""), "acl": list(acl) if isinstance(acl, list | tuple) else ["all"]}
    )


def passage_ids(p: Mapping[str, Any]) -> set[str]:
    """The ids a passage answers to: its id and document id, each also without its chunk (``"Title#0"``)."""
    ids = {str(p.get("doc_id") or ""), str(p.get("id") or "")}
    return {i for i in ids | {i.rsplit("#", 1)[0] for i in ids} if i}


def scope_violations(
    filters: Filters | None,
    citations: Sequence[Mapping[str, Any]],
    retrieved: Sequence[Mapping[str, Any]] = (),
    restricted: Iterable[str] = (),
    answer: str = "",
    restricted_facts: Iterable[str] = (),
) -> list[str]:
    """What broke the asker's scope: cited passages outside ``filters``, cited or retrieved passages
    among the ``restricted`` documents, restricted facts stated in the answer (one entry each)."""
    scoped = filters is not None and not filters.is_empty()
    out = [
        f"cited {p.get('id')} outside the scope"
        for p in citations
        if scoped and "acl" in p and not filters.matches(_passage(p))
    ]
    banned = set(restricted)
    out += [f"saw restricted {min(hit)}" for p in [*citations, *retrieved] if (hit := passage_ids(p) & banned)]
    out.extend(f"stated restricted fact {t!r}" for t in restricted_facts if has_term(answer, t))
    return list(dict.fromkeys(out))


def conclusion_score(
    *,
    expected: str | None,
    answerable: bool,
    answer: str,
    short: str,
    must: Sequence[str],
    must_not: Sequence[str],
    violations: Sequence[str],
) -> dict[str, Any]:
    """``conclusion`` (1 or 0) and what decided it: ``polarity``, ``contradiction``, ``terms``."""
    terms = mentions(answer, must, must_not)
    if not answerable:
        return {"terms": terms, "conclusion": float(abstains(answer) and not violations)}
    if expected not in (YES, NO):
        return {"terms": terms, "conclusion": float(terms and not violations)}
    pol, contradiction = answer_polarity(answer, short)
    right = pol == expected and not contradiction and terms
    return {"terms": terms, "polarity": pol, "contradiction": float(contradiction), "conclusion": float(right)}
