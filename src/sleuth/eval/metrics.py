"""Scores of one answer against its gold: EM, F1, cover-EM (SQuAD normalisation; Chinese answers
character-level after Chinese normalisation), RGB's every-part check, multiple-choice and yes/no
accuracy, must-mention checks, retrieval recall, citation precision and cost.

Every function is pure; :func:`score` combines them for one (item, result) pair
and names the item's *primary* score (what plots and confidence intervals use).
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sleuth.config import settings
from sleuth.eval.items import LETTERS, MC, YESNO, Item
from sleuth.eval.policy import abstains, conclusion_score, contains, mentions, passage_ids, scope_violations
from sleuth.lang import NO_WORDS, YES_WORDS

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_CJK = re.compile(r"([\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff])")
_PUNCT = set(string.punctuation) | set("，。、；：？！（）“”‘’《》—…")


def normalize_answer(s: str) -> str:
    """SQuAD normalisation: lower-case, drop punctuation and articles, collapse whitespace."""
    s = unicodedata.normalize("NFKC", str(s)).lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)  # deleted, as the official script does ("1,000" -> "1000")
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def tokens(s: str) -> list[str]:
    """Normalised tokens; CJK ideographs count one token each (Chinese has no spaces)."""
    return _CJK.sub(r" \1 ", normalize_answer(s)).split()


def exact_match(pred: str, golds: Iterable[str]) -> float:
    return em_zh(pred, golds, normalize_answer)


def f1(pred: str, golds: Iterable[str]) -> float:
    return f1_zh(pred, golds, tokens)


def cover_em(pred: str, golds: Iterable[str]) -> float:
    """1 when a normalised gold answer appears (on token boundaries) in the normalised prediction."""
    p = f" {' '.join(tokens(pred))} "
    return float(any((t := " ".join(tokens(g))) and f" {t} " in p for g in golds))


# --------------------------------------------------------------------------- Chinese answers
# Chinese has no spaces, so a word-level F1 scores a whole sentence as one token: an answer is normalised
# (:func:`normalize_zh`; "131万" and "1310000" compare equal) and split into characters, a run of Latin
# letters or digits staying one token ("G20峰会" -> ``g20 峰 会``). Used for items whose gold answers are Chinese.
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


def cover_zh(pred: str, golds: Iterable[str]) -> float:
    """1 when a normalised gold answer appears in the normalised prediction."""
    p = normalize_zh(pred)
    return float(any(contains(p, normalize_zh(g)) for g in golds))


def part_hits(answer: str, parts: Sequence[Sequence[str]]) -> list[bool]:
    """For each answer part (a list of accepted variants): is one of them mentioned in ``answer``?"""
    a = normalize_zh(answer)
    return [any(contains(a, normalize_zh(v)) for v in variants) for variants in parts]


_MC_PATTERNS = [
    re.compile(r"answer\s*(?:is|:)?\s*[:：]?\s*\(?([A-D])\)?(?![A-Za-z])", re.I),
    re.compile(r"^\s*\(?([A-D])\)?\s*(?:[.):：]|$|\s)"),
    re.compile(r"\(([A-D])\)"),
    re.compile(r"(?<![A-Za-z])([A-D])(?![A-Za-z])"),
]


def parse_choice(answer: str, choices: Sequence[str] = ()) -> str:
    """The option letter an answer picks ("" when none): explicit letters first, then option text."""
    text = (answer or "").strip()
    if not text:
        return ""
    m = _MC_PATTERNS[0].search(text) or _MC_PATTERNS[1].match(text) or _MC_PATTERNS[2].search(text)
    if m:
        return m.group(1).upper()
    norm, options = normalize_answer(text), [normalize_answer(c) for c in choices]
    hits = [LETTERS[i] for i, c in enumerate(options) if c and c == norm]
    if not hits:
        hits = [LETTERS[i] for i, c in enumerate(options) if len(c) > 1 and f" {c} " in f" {norm} "]
    if len(hits) == 1:
        return hits[0]
    m = _MC_PATTERNS[3].search(text)
    return m.group(1).upper() if m else ""


def parse_yesno(answer: str) -> str:
    """ "yes", "no" or "" from the first decisive word of an answer."""
    for tok in tokens(answer):
        if tok in YES_WORDS:
            return "yes"
        if tok in NO_WORDS:
            return "no"
    return ""


# --------------------------------------------------------------------------- retrieval
def retrieved_passages(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every passage a run saw: its citations plus the passages of its trace's search events."""
    seen: list[dict[str, Any]] = list(result.get("citations") or [])
    for ev in result.get("trace") or []:
        if ev.get("kind") == "search":
            seen.extend((ev.get("data") or {}).get("passages") or [])
    return seen


def recall(gold: Sequence[str], passages: Sequence[Mapping[str, Any]], *, by: str) -> float | None:
    """Share of gold titles (``by="title"``) or paragraph ids (``by="id"``) among the passages."""
    if not gold:
        return None
    if by == "title":
        have = {normalize_answer(str(p.get("title") or "").strip().strip('"')) for p in passages}
        gold = [normalize_answer(g) for g in gold]
    else:
        have = set().union(*map(passage_ids, passages))
    return sum(g in have for g in gold) / len(gold)


def cited_documents(citations: Sequence[Mapping[str, Any]]) -> list[set[str]]:
    """The distinct documents among ``citations``, each as the set of ids it answers to.

    A passage is a chunk of a document (``"Title#0"`` of document ``"Title"``); two chunks of
    one document are one citation of it.
    """
    docs: dict[str, set[str]] = {}
    for p in citations:
        ids = passage_ids(p)
        if not ids:
            continue
        key = str(p.get("doc_id") or "") or str(p.get("id") or "").rsplit("#", 1)[0] or min(ids)
        docs.setdefault(key, set()).update(ids)
    return list(docs.values())


def citation_precision(gold: Sequence[str], citations: Sequence[Mapping[str, Any]]) -> float | None:
    """Share of the cited documents that are gold supporting passages (by id).

    None (undefined, not 0) when nothing is cited or there is no gold: a mean over records
    skips it, so it is the precision of the answers that cite something.  Its partner, the
    citation recall, is :func:`recall` over the citations (``cited_recall_id``).
    """
    docs = cited_documents(citations)
    if not gold or not docs:
        return None
    want = set(gold)
    return sum(bool(ids & want) for ids in docs) / len(docs)


# --------------------------------------------------------------------------- cost
@dataclass(frozen=True)
class Prices:
    """USD per million tokens; cached prompt tokens default to the prompt price."""

    prompt: float = 0.0
    completion: float = 0.0
    cached_prompt: float | None = None

    @property
    def configured(self) -> bool:
        return bool(self.prompt or self.completion)

    @classmethod
    def parse(cls, spec: str | None) -> Prices:
        """``"PROMPT,COMPLETION[,CACHED]"`` in USD per 1M tokens; None reads
        ``SLEUTH_PRICE_PROMPT`` / ``SLEUTH_PRICE_COMPLETION`` / ``SLEUTH_PRICE_CACHED_PROMPT``."""
        if spec is None:
            vals = settings.prices()
        else:
            vals = [v.strip() for v in spec.split(",")]
            if len(vals) not in (2, 3):
                raise ValueError("prices must be PROMPT,COMPLETION[,CACHED] in USD per million tokens")
        try:
            nums = [float(v) if v else None for v in vals] + [None] * (3 - len(vals))
        except ValueError as e:
            raise ValueError(f"prices must be numbers: {spec!r}") from e
        if any(n is not None and n < 0 for n in nums):
            raise ValueError("prices cannot be negative")
        return cls(nums[0] or 0.0, nums[1] or 0.0, nums[2])

    def cost(self, usage: Mapping[str, Any]) -> float:
        cached = int(usage.get("cached_prompt_tokens", 0)) if self.cached_prompt is not None else 0
        prompt = (int(usage.get("prompt_tokens", 0)) - cached) * self.prompt + cached * (self.cached_prompt or 0.0)
        return (prompt + int(usage.get("completion_tokens", 0)) * self.completion) / 1e6


# --------------------------------------------------------------------------- combined
PRIMARY = {
    "f1": "F1",
    "em": "EM",
    "cover_em": "cover-EM",
    "acc": "accuracy",
    "mention": "must-mention",
    "parts": "all-parts",
    "conclusion": "conclusion accuracy",
}


def primary_metric(item: Item) -> str:
    if item.type in (MC, YESNO):
        return "acc"
    if item.metadata.get("answer_parts"):
        return "parts"
    if item.metadata.get("policy"):
        return "conclusion"
    if item.must_mention or item.must_not_mention:
        return "mention"
    return "f1"


def score(item: Item, result: Mapping[str, Any], prices: Prices | None = None) -> dict[str, Any]:
    """All applicable scores of one result (a :meth:`Result.to_dict`) for ``item``."""
    answer = str(result.get("answer") or "")
    short = str(result.get("short_answer") or "") or answer
    s: dict[str, Any] = {}
    if item.type == MC:
        s["pred"] = parse_choice(short, item.choices) or parse_choice(answer, item.choices)
        s["acc"] = float(s["pred"] in item.answers)
    elif item.type == YESNO:
        s["pred"] = parse_yesno(short) or parse_yesno(answer)
        s["acc"] = float(s["pred"] in [normalize_answer(a) for a in item.answers])
        s["em"] = exact_match(short, item.answers)
    elif not item.answerable and not item.answers:
        s["abstained"] = float(abstains(short))
        s["em"] = s["f1"] = s["cover_em"] = s["abstained"]
    else:  # EM, F1 and cover-EM; Chinese answers character by character, after Chinese normalisation
        # cover-EM on the final answer only: a long answer also quotes evidence and reasoning (Step-back's
        # "Specific clause: …", CoT's candidates), which would credit a gold string the strategy did not
        # answer (and a short alias like "NO" would match the word "no")
        fns = (em_zh, f1_zh, cover_zh) if any(is_chinese(a) for a in item.answers) else (exact_match, f1, cover_em)
        s.update({k: fn(short, item.answers) for k, fn in zip(("em", "f1", "cover_em"), fns, strict=True)})
    if item.must_mention or item.must_not_mention:
        s["mention"] = mentions(answer, item.must_mention, item.must_not_mention)
    parts = item.metadata.get("answer_parts")
    passages = retrieved_passages(result)
    if parts:  # RGB: right when the reply mentions every part (any variant of it)
        hits = part_hits(answer, parts)
        s["parts"] = float(all(hits))
        s["part_rate"] = sum(hits) / len(hits)
        seen: set[str] = set().union(*map(passage_ids, passages))
        part_ids = item.metadata.get("part_ids") or []
        if part_ids:
            s["part_recall"] = sum(any(i in seen for i in ids) for ids in part_ids) / len(part_ids)
    if item.metadata.get("policy"):  # policy questions: the conclusion, and the asker's scope kept
        s.update(_policy(item, result, answer, passages))
    if item.gold_titles:
        s["recall_title"] = recall(item.gold_titles, passages, by="title")
    if item.gold_ids:
        s["recall_id"] = recall(item.gold_ids, passages, by="id")
        cited = list(result.get("citations") or [])
        s["cited_recall_id"] = recall(item.gold_ids, cited, by="id")
        s["cite_precision"] = citation_precision(item.gold_ids, cited)
    usage = result.get("usage") or {}
    s.update({k: int(usage.get(k, 0)) for k in ("prompt_tokens", "completion_tokens", "processed_prompt_tokens")})
    s["llm_calls"] = int(result.get("llm_calls", 0))
    # calls answered by the response cache cost no model time: timings of such runs are not comparable
    s["cached_llm_calls"] = sum(
        1 for ev in result.get("trace") or [] if ev.get("kind") == "llm" and (ev.get("data") or {}).get("from_cache")
    )
    s["searches"] = int(result.get("searches", 0))
    s["seconds"] = float(result.get("elapsed_s", 0.0))
    if prices is not None and prices.configured:
        s["cost_usd"] = prices.cost(usage)
    s["primary"] = primary_metric(item)
    s["score"] = s.get(s["primary"], 0.0)
    draft = draft_reply(result)
    if draft is not None:  # scored as the answer would be: the last pass's gain is paired
        s["draft_score"] = score(item, draft).get(s["primary"], 0.0)
    return s


def _policy(item: Item, result: Mapping[str, Any], answer: str, passages: Sequence[Mapping[str, Any]]) -> dict:
    """Conclusion accuracy and scope violations of a policy question (:mod:`sleuth.eval.policy`)."""
    meta = item.metadata
    violations = scope_violations(
        item.filters,
        list(result.get("citations") or []),
        passages,
        restricted=meta.get("restricted") or (),
        answer=answer,
        restricted_facts=item.must_not_mention if not item.answerable else (),
    )
    out = conclusion_score(
        expected=meta.get("conclusion"),
        answerable=item.answerable,
        answer=answer,
        short=str(result.get("short_answer") or ""),
        must=item.must_mention,
        must_not=item.must_not_mention,
        violations=violations,
    )
    return out | {"scope_violation": float(bool(violations))} | ({"violations": violations} if violations else {})


def draft_reply(result: Mapping[str, Any]) -> dict[str, str] | None:
    """The draft a strategy answered before its last pass (a ``draft`` event: RAT's before retrieval,
    Self-Ask's scaffold answer before its final reading), when it has a short answer."""
    for ev in result.get("trace") or []:
        if ev.get("kind") == "draft":
            data = ev.get("data") or {}
            if data.get("short_answer") is not None:
                return {"answer": str(data.get("text") or ""), "short_answer": str(data["short_answer"])}
    return None
