"""What Self-Ask reads in a question: a comparison's options, and whether a follow-up repeats another.

Self-Ask decomposes a question into simpler follow-ups (Press et al., 2023); for a
comparison ("Who lived longer, Muhammad Ali or Alan Turing?") that is one follow-up per
option asking the compared attribute, then the comparison.  Small models often skip the
decomposition: the follow-up restates the whole comparison, asks about neither option, or
asks only "Who is X?".  This module finds the options a question names (English and
Chinese question forms) and classifies a follow-up against them; it is Self-Ask's own,
minimal answer-type detection (the options, and whether the answer is yes/no).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from sleuth.strategies.answer_type import CHOICE, answer_type
from sleuth.strategies.text import content_tokens

#: "..., A or B?", "..., A or B, ...", "... in A or B"
_OR = re.compile(r"\s+or\s+", re.I)
_OR_ZH = re.compile(r"还是")
#: "Between A and B, who ...?" / "Between A and B who ...?"
_BETWEEN = re.compile(
    r"^\s*(?:in\s+)?between\s+(?P<a>.+?)\s+and\s+(?P<b>.+?)(?:\s*[,?]|\s+(?=(?:who|which|what|whose|when|where|how)\b))",
    re.I,
)
#: yes/no questions: they start with an auxiliary verb
_AUX = re.compile(r"^\s*(?:are|is|was|were|do|does|did|can|could|has|have|had|will|would|should)\b", re.I)
#: "Are A and B both ...", "Are both A and B ...", "Do A and B ...", "A and B are both ..."
_BOTH = re.compile(
    r"^\s*(?i:(?:are|is|was|were|do|does|did|have|has)\s+(?:both\s+)?(?:the\s+)?)?(?P<a>.+?)\s+and\s+(?i:the\s+)?"
    r"(?P<b>.+?)(?:\s+both\b|\s+(?:are|were)\s+both\b|\s+(?=[a-z]))",
)
#: a capitalised adjective, by its ending: a nationality or a creed ("British", "American", "Christian",
#: "Japanese", "Korean"), which belongs to the predicate after the options, not to the second option
_ADJECTIVE = re.compile(r"^[A-Z][a-z]+(?:ish|ese|ian|ean|ican)$")
#: "... both A and B ..." anywhere in the question
_BOTH_IN = re.compile(r"\bboth\s+(?:the\s+)?(?P<a>[A-Z].*?)\s+and\s+(?:the\s+)?(?P<b>[A-Z].*?)(?:\s+(?=[a-z])|[?,]|$)")
_QUOTED = re.compile(r"[\"“]([^\"“”]+)[\"”]")
_LEAD_AUX = re.compile(r"^\s*(?:(?:is|are|was|were|do|does|did)\s+)?(?:the\s+)?", re.I)
#: "A和B谁更…" / "A与B哪个…更…": two names, then who/which, then a comparative
_ZH_AND = re.compile(
    r"^(?P<a>[^，,？?和与跟]{1,20})(?:和|与|跟)(?P<b>[^，,？?和与跟的]{1,20}?)(?:之间|两者|两人|中|当中)?"
    r"(?:谁|哪)[^，,？?]*?(?:更|比较|较|最|先|早于|晚于)"
)
_CAP_RUN = re.compile(r"(?:[A-Z0-9\"'“][\w'’.&-]*(?:\s+(?:of|the|de|del|la|le|von|van|and|in|on|for|'s)\s+|\s+)?)+")
_LEAD = re.compile(r"^(?:the\s+)?(?:both\s+)?", re.I)
_MAX_WORDS = 8
_MAX_CHARS = 400  # a comparison is a short question; bounded work on anything longer

#: what a question asks for (its question word): a follow-up asking another kind of fact is not a repeat
_ASKS = (
    ("when", re.compile(r"\b(?:when|what\s+(?:year|date|time))\b|何时|什么时候|哪一?年|哪天|几月", re.I)),
    ("where", re.compile(r"\bwhere\b|哪里|在哪|何处|哪个(?:国家|城市|地方)", re.I)),
    ("how", re.compile(r"\bhow\b|多少|几", re.I)),
    ("why", re.compile(r"\bwhy\b|为什么", re.I)),
)
#: the yes or no a yes/no answer starts with
YES_NO = re.compile(r"^\W*(?P<v>yes|no|是|否|不是)(?![a-z])", re.I)


def _asks(question: str) -> str:
    """The kind of fact a question asks: when, where, how (much/many/old), why, or an entity."""
    return next((kind for kind, rx in _ASKS if rx.search(question)), "entity")


def asks_nothing_new(new: str, old: str, threshold: float = 0.9) -> bool:
    """Whether follow-up ``new`` repeats ``old``: the same kind of fact, and no word ``old`` lacks
    (or nearly the same words).  A follow-up that adds words ("When was Yanka Dyagileva born?" after
    "Who was Yanka Dyagileva?") or asks another kind of fact ("Where is X from?" after "Who is X?")
    asks something new: it is the next hop, not a repeat."""
    if _asks(new) != _asks(old):
        return False
    a, b = content_tokens(new), content_tokens(old)
    if not a or not b:
        return (new or "").strip().lower() == (old or "").strip().lower()
    j = len(a & b) / len(a | b)
    return j >= threshold or (a <= b and j >= 0.5)


@dataclass(frozen=True)
class Comparison:
    """The options a comparison question names.

    ``choice``: the answer is one of them ("A or B", "between A and B"); ``yes_no``: the
    answer is yes or no ("Are A and B both ..."); neither: the answer is what they share.
    """

    options: tuple[str, ...]
    choice: bool
    yes_no: bool


def _tidy(option: str) -> str:
    o = option.strip().strip(",.?？，。:：;\"'“”「」 ")
    return _LEAD.sub("", o).strip() if not o[:1].isupper() or o.lower().startswith("the ") else o


def _cap_run(text: str, last: bool) -> str:
    """The last (or first) run of capitalized words in ``text``: a name inside a clause."""
    runs = [m.group(0).strip() for m in _CAP_RUN.finditer(text) if m.group(0).strip()]
    if not runs:
        return ""
    run = runs[-1] if last else runs[0]
    return re.sub(r"\s+(?:of|the|de|del|la|le|von|van|and|in|on|for)$", "", run)


def _plausible(option: str) -> bool:
    words = option.split()
    return 0 < len(words) <= _MAX_WORDS and any(ch.isalnum() for ch in option)


def _or_options(question: str) -> tuple[str, str] | None:
    parts = _OR.split(question)
    if len(parts) < 2:
        return None
    # "Which restaurant chain or pizza franchise is based further north, Pizza Inn or Papa Gino's?": the last "or"
    left, right = " or ".join(parts[:-1]), parts[-1]
    ql, qr = _QUOTED.findall(left), _QUOTED.findall(right)
    if ql and qr and left.rstrip(" ,").endswith(('"', "”")):
        return ql[-1].strip(), qr[0].strip()
    left = left.rstrip(" ,")
    # after a colon the options begin, commas and all ("older: University of California, Berkeley or ...")
    left = left.rsplit(":", 1)[1] if ":" in left else re.split(r",|\bbetween\b", left)[-1]
    left = _LEAD_AUX.sub("", re.split(r"\bbetween\b", left)[-1])
    right = re.split(r"[,?]", right)[0]
    if len(left.split()) > 4 or not left.strip()[:1].isupper():
        left = _cap_run(left, last=True)
    if len(right.split()) > 4 or not right.strip()[:1].isupper():
        right = _cap_run(right, last=False)
    a, b = _tidy(left), _tidy(right)
    return (a, b) if _plausible(a) and _plausible(b) else None


def _zh_options(question: str) -> tuple[str, str] | None:
    parts = _OR_ZH.split(question)
    if len(parts) == 2:
        left = re.split(r"[，,：:是]", parts[0])[-1]
        right = re.split(r"[，,？?]", parts[1])[0]
        right = re.split(r"(?:谁|哪|更|比较|的)", right)[0] or right
        a, b = left.strip(), right.strip()
        if 0 < len(a) <= 20 and 0 < len(b) <= 20:
            return a, b
    m = _ZH_AND.match(question.strip())
    if m and 0 < len(m.group("a")) <= 20 and 0 < len(m.group("b")) <= 20:
        return m.group("a").strip(), m.group("b").strip()
    return None


def _pair(a: str, b: str) -> tuple[str, str] | None:
    a, b = _tidy(a), _tidy(b)
    if a[:1].islower():
        a = _cap_run(a, last=True)
    if len(b.split()) > 4 or b[:1].islower():
        b = _cap_run(b, last=False) or b
    ok = _plausible(a) and _plausible(b) and not a[:1].isdigit() and not b[:1].isdigit()
    return (a, b) if ok and a.lower() != b.lower() else None


def _predicate_off(a: str, b: str, rest: str, yes_no: bool) -> str:
    """The second option ``b`` without the capitalised words of the predicate that follows it (``rest``).

    Nothing but the predicate follows "Are both A and B": capitalised adjectives before a
    lower-case noun belong to it ("Are both Deerhunter and Nine Lashes American Christian rock
    bands?"), and so does the last word when the question ends after the options ("Are both
    Jonathan Marray and Wayne Black British?": a yes/no question needs a predicate).  The options
    are alike, so ``b`` keeps as many words as ``a`` has, up to two ("Katherine Sarafian" stays a
    name); after "both" the predicate follows it ("Are A and B both Armenian?").
    """
    words = b.split()
    if re.match(r"\s+(?:(?:are|were)\s+)?both\b", rest, re.I):
        return b
    keep = min(2, len(a.split()))
    while len(words) > keep and _ADJECTIVE.match(words[-1]):
        words.pop()
    if yes_no and not rest.strip(" ?") and len(words) == len(b.split()) > 1:
        words.pop()
    return " ".join(words)


def find_comparison(question: str) -> Comparison | None:
    """The options ``question`` names ("A or B", "between A and B", "are A and B both", "first of A
    and B"), or ``None``.  A choice that only :func:`~sleuth.strategies.answer_type.answer_type`
    reads ("Who was born first of A and B") is the same choice here: one reading of a question."""
    q = unicodedata.normalize("NFKC", (question or "")[:_MAX_CHARS]).strip()
    if re.search(r"[\u4e00-\u9fff]", q):
        zh = _zh_options(q)
        if not zh:
            return None
        yes_no = bool(re.search(r"(?:吗|是否|是不是)[？?]?$", q))
        return Comparison(zh, choice=not yes_no, yes_no=yes_no)
    yes_no = bool(_AUX.match(q))
    m = _BETWEEN.search(q)
    found = _pair(m.group("a"), m.group("b")) if m else None
    if found is None and _OR.search(q):
        found = _or_options(q)
    if found is not None:
        return Comparison(found, choice=True, yes_no=False)
    m = _BOTH_IN.search(q) or (_BOTH.match(q) if yes_no or re.search(r"\bboth\b", q, re.I) else None)
    found = _pair(m.group("a"), _predicate_off(m.group("a"), m.group("b"), q[m.end("b") :], yes_no)) if m else None
    if found is not None and found[0][:1].isupper() and found[1][:1].isupper():
        return Comparison(found, choice=False, yes_no=yes_no)
    t = answer_type(q)
    if t.kind == CHOICE and len(t.options) == 2 and all(o[:1].isupper() for o in t.options):
        return Comparison(t.options, choice=True, yes_no=False)
    return None


def names(text: str, option: str, others: tuple[str, ...] = ()) -> bool:
    """Whether ``text`` names ``option``: verbatim, or at least half of the words that set it
    apart from the ``others`` ("Salmita Mine" / "Kanichee Mine": "mine" names neither)."""
    if option.lower() in (text or "").lower():
        return True
    want = content_tokens(option)
    for other in others:
        if other != option:
            want -= content_tokens(other)
    if not want:
        return False
    hits = len(want & content_tokens(text))
    return hits * 2 > len(want) or (len(want) >= 2 and hits * 2 >= len(want))


def named(text: str, options: tuple[str, ...]) -> list[str]:
    """The options ``text`` names, in the order it names them."""
    low = (text or "").lower()
    hits = [o for o in options if names(text, o, options)]

    def where(o: str) -> int:
        i = low.find(o.lower())
        if i >= 0:
            return i
        found = [low.find(t) for t in content_tokens(o) if low.find(t) >= 0]
        return min(found) if found else len(low)

    return sorted(hits, key=where)


def off_attribute(follow_up: str, cmp: Comparison, asked_before: int) -> bool:
    """Whether a follow-up skips the decomposition a choice or yes/no comparison needs.

    It restates the comparison (names two options or more), or it is the first follow-up of
    a choice question ("Which band was formed first, Wavves or Social Code?": the model's own
    first follow-up asked the compared attribute in 2 of the 14 recorded choice runs, and one
    option's founder, lead singer or who it is, like "Who is the founder of Wavves?", otherwise),
    or the first follow-up of a yes/no question names no option.  A question whose answer is
    what the options share ("Cranium and Twin Tin Bots are both what?") is left to the model.
    """
    if not (cmp.choice or cmp.yes_no):
        return False
    hit = named(follow_up, cmp.options)
    if len(hit) >= 2:
        return True
    if asked_before:
        return False
    return cmp.choice or not hit


# -- questions asking several parts ("…分别是…", "the A and the B of …, respectively") ---------------
def first_question(line: str) -> str:
    """The line up to its first question mark: a small model runs on past its question into the
    next example ("How old is Philippe Perrin? About Jaws: Which country is the film Jaws from?")."""
    m = re.match(r"([^?？]*[?？])", line)
    return m.group(1) if m else line


_PART_LINE = re.compile(r"^\s*(?:\d{1,2}\s*[.、)）:：]|[-*•])\s*(?P<q>\S.*)")
_MAX_PARTS = 4


def parse_parts(text: str, question: str) -> list[str]:
    """The one-part questions a model listed for a multi-part ``question`` ("1. …" / "- …" lines),
    each cut at its question mark; none when fewer than two differ from the question itself."""
    parts: list[str] = []
    for line in (text or "")[: _MAX_CHARS * 4].splitlines():
        m = _PART_LINE.match(line)
        if not m:
            continue
        q = m.group("q").strip("\"'“”「」 \t")[:_MAX_CHARS]
        q = first_question(q)
        if q and q not in parts and content_tokens(q) != content_tokens(question):
            parts.append(q)
    return parts[:_MAX_PARTS] if len(parts) >= 2 else []
