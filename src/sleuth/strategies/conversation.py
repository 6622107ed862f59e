"""Follow-up questions: the earlier turns of a conversation, and what makes the last question stand alone.

"那出境的呢？" or "Who founded it?" searched on its own finds nothing, so when a request has earlier turns,
one short LLM call (``prompts/<lang>/rewrite.txt``, :meth:`~sleuth.strategies.base.Strategy.standalone`)
rewrites the last user message into a question that stands alone (the history cut to ``history_tokens`` by
:func:`fit`).  The history only ever changes the *question*: the run's filters (the caller's identity-bound
scope) are the same for every turn, so an earlier turn cannot name a document into the answer that the
scope does not let the caller see.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sleuth.text_input import BadText, check_text, without_refused

ROLES = ("user", "assistant")
#: at most this many turns are accepted in one request (each is also length-checked)
MAX_TURNS = 200
MAX_TURN_CHARS = 20_000
#: tokens of the rewritten question (a question, one line)
REWRITE_MAX_TOKENS = 96

_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff\u3000-\u303f\uff00-\uffef]")
_LABEL = re.compile(
    r"^\s*(?:standalone question|rewritten question|question|完整问题|改写后的问题|问题)\s*[:：]\s*", re.IGNORECASE
)
_SPEAKER = {"en": {"user": "User", "assistant": "Assistant"}, "zh": {"user": "用户", "assistant": "助手"}}


class BadHistory(ValueError):
    """The history is not a list of ``{role, content}`` turns (a caller's mistake, one sentence)."""


@dataclass(frozen=True)
class Turn:
    role: str  # "user" | "assistant"
    content: str

    def to_dict(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


def parse_history(history: Iterable[Any] | None) -> list[Turn]:
    """Earlier turns as :class:`Turn` s: dicts (or objects) with ``role`` ``user``/``assistant`` and text ``content``.

    Raises :class:`BadHistory` for anything else; empty turns are skipped."""
    if history is None:
        return []
    if isinstance(history, str | bytes | Mapping):
        raise BadHistory("history must be a list of {role, content} turns")
    turns: list[Turn] = []
    for i, t in enumerate(history, 1):
        role = t.get("role") if isinstance(t, Mapping) else getattr(t, "role", None)
        content = t.get("content") if isinstance(t, Mapping) else getattr(t, "content", None)
        if role not in ROLES:
            raise BadHistory(f"history turn {i} has role {role!r}; use 'user' or 'assistant'")
        content = "" if content is None else content
        if not isinstance(content, str):
            raise BadHistory(f"history turn {i} has no text content")
        if role == "assistant":  # a model's earlier answer, sent back: control characters it emitted are dropped
            content = without_refused(content)
        try:
            check_text(content, f"history turn {i}")
        except BadText as e:
            raise BadHistory(str(e)) from None
        if len(content) > MAX_TURN_CHARS:
            raise BadHistory(f"history turn {i} is {len(content)} characters long; the limit is {MAX_TURN_CHARS}")
        if content.strip():
            turns.append(Turn(role, content.strip()))
    if len(turns) > MAX_TURNS:
        raise BadHistory(f"the history has {len(turns)} turns; the limit is {MAX_TURNS}")
    return turns


def estimate_tokens(text: str) -> int:
    """A model-independent token estimate: one per CJK character, one per four other characters."""
    cjk = len(_CJK.findall(text))
    return cjk + (len(text) - cjk + 3) // 4


@dataclass(frozen=True)
class Window:
    """The turns the rewrite reads, and what the token budget left out."""

    kept: list[Turn]
    dropped_turns: int
    dropped_tokens: int
    trimmed: bool  # the oldest kept turn was cut to fit (its end kept)


def fit(turns: Sequence[Turn], budget: int) -> Window:
    """The most recent turns whose estimated tokens fit ``budget``; the newest turn is always kept,
    cut to the budget (its end) when it alone is longer."""
    kept: list[Turn] = []
    used = 0
    trimmed = False
    for t in reversed(turns):
        n = estimate_tokens(t.content)
        if used + n <= budget:
            kept.append(t)
            used += n
            continue
        if not kept:  # the newest turn alone is too long: keep its end
            chars = max(1, len(t.content) * budget // max(1, n))
            kept.append(Turn(t.role, "…" + t.content[-chars:]))
            trimmed = True
        break
    kept.reverse()
    dropped = list(turns[: len(turns) - len(kept)])
    return Window(kept, len(dropped), sum(estimate_tokens(t.content) for t in dropped), trimmed)


def render_history(turns: Sequence[Turn], lang: str) -> str:
    names = _SPEAKER.get(lang, _SPEAKER["en"])
    colon = "：" if lang == "zh" else ": "
    return "\n".join(f"{names[t.role]}{colon}{' '.join(t.content.split())}" for t in turns)


def parse_rewrite(text: str, question: str) -> str:
    """The rewritten question from the model's reply: its first non-empty line, labels and quotes
    stripped; the original question when nothing usable came back."""
    for line in text.splitlines():
        line = _LABEL.sub("", line).strip().strip("\"'“”「」").strip()
        if line:
            return question if len(line) > 4 * len(question) + 400 else line  # a rambling reply is no question
    return question


#: words by which a short message leans on the conversation ("那出境的呢？", "Who founded it?")
_LEANS_ZH = re.compile(r"呢|那|这|它|他|她|该|此|上述|同样")
_LEANS_EN = re.compile(r"\b(it|its|he|him|his|she|her|they|them|their|that|this|these|those|there|then|same)\b", re.I)
SHORT_ZH, SHORT_EN = 14, 8


def leans_on_context(question: str) -> bool:
    """A short message that refers to something it does not name (a pronoun, "那…呢")."""
    cjk = len(_CJK.findall(question))
    if cjk:
        return cjk <= SHORT_ZH and bool(_LEANS_ZH.search(question))
    return len(question.split()) <= SHORT_EN and bool(_LEANS_EN.search(question))


def _same(a: str, b: str) -> bool:
    norm = re.compile(r"[\s\W_]+", re.UNICODE)
    return norm.sub("", a).lower() == norm.sub("", b).lower()


def resolved_nothing(rewritten: str, question: str, turns: Sequence[Turn]) -> bool:
    """The model's rewrite of a message that leans on the conversation only repeats that message or an
    earlier question (what a small model often does), so it names nothing the message lacked."""
    if not leans_on_context(question):
        return False
    return _same(rewritten, question) or any(_same(rewritten, t.content) for t in turns if t.role == "user")


def with_context(question: str, turns: Sequence[Turn]) -> str:
    """The fallback question: the last earlier user question, then the message (search sees both)."""
    prev = next((t.content for t in reversed(turns) if t.role == "user"), "")
    if not prev:
        return question
    sep = "" if _CJK.search(prev[-1:]) else " "
    return f"{prev}{sep}{question}"


#: an earlier answer this short is an entity ("Tesla.", "曹雪芹。") that a reference can stand for
ENTITY_WORDS, ENTITY_CHARS = 8, 60
_NOUNS_EN = (
    "person|man|woman|people|author|writer|artist|singer|actor|actress|player|director|founder|company|firm|"
    "organi[sz]ation|institution|band|group|team|club|party|school|university|college|place|location|city|town|"
    "village|country|nation|state|province|county|region|area|continent|island|river|lake|mountain|building|"
    "year|date|time|film|movie|book|novel|work|song|album|show|series|game|sport|language|war|conflict|"
    "event|label|publisher|network|station|airport|league|church|museum|species|thing|one"
)
#: "that city", "that fictional work", "the same person"; "he", "she", "him", "his"; "那个城市", "他".
#: Not "this" ("this year" is rarely the previous answer), nor "there" / "那里" (as often the earlier question's place)
_REF_PHRASE_EN = re.compile(rf"\b(?:that|the same|the said)\s+(?:[a-z]+\s+)?(?:{_NOUNS_EN})\b", re.IGNORECASE)
_REF_PERSON_EN = re.compile(r"\b(he|she|him)\b", re.IGNORECASE)
_REF_PERSON_POSS_EN = re.compile(r"\b(his)\b", re.IGNORECASE)
_REFS_EN = ((_REF_PHRASE_EN, False), (_REF_PERSON_EN, False), (_REF_PERSON_POSS_EN, True))  # tried in this order
_REF_ZH = re.compile(
    r"(?:那个|这个|那位|这位|该|此)(?:人|作者|城市|地方|国家|公司|机构|组织|学校|大学|地区|省|州|河|湖|山|电影|书|作品|"
    r"歌曲|球队|政党|部门)|他们|她们|他|她"
)
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(re.sub(r"['’]s\b", "", text))]


def previous_entity(turns: Sequence[Turn]) -> str:
    """The last assistant turn when it is a short answer (an entity: "Tesla.", "曹雪芹。"), else ''."""
    last = next((t.content for t in reversed(turns) if t.role == "assistant"), "")
    last = last.strip().rstrip(".。!！")
    short = len(last) <= ENTITY_CHARS and (_CJK.search(last) or len(last.split()) <= ENTITY_WORDS)
    return last if short and not re.search(r"[\n.。;；:：?？]", last) else ""  # one line, one phrase


def names(text: str, entity: str) -> bool:
    """``text`` contains ``entity`` (its words in order, case, punctuation and "'s" aside; CJK: as a substring)."""
    if _CJK.search(entity):
        return re.sub(r"\s+", "", entity) in re.sub(r"\s+", "", text)
    want, have = _words(entity), _words(text)
    return bool(want) and any(have[i : i + len(want)] == want for i in range(len(have) - len(want) + 1))


def find_reference(question: str) -> tuple[re.Match[str], bool] | None:
    """The first reference of ``question`` that most often stands for the previous answer, and whether it is
    possessive ("his": the entity gets "'s"): a typed one ("that city", "the same person", "那个城市") or a
    personal pronoun ("he", "他").

    "it", "they" and "它" are left out: after "Who founded Lumen Works? — Ayla Brandt.", "When did it
    open?" means the studio, so they are only the rewrite model's to resolve."""
    kinds = ((_REF_ZH, False),) if _CJK.search(question) else _REFS_EN
    return next(((m, possessive) for pattern, possessive in kinds if (m := pattern.search(question))), None)


def kept_entity(rewritten: str, question: str, turns: Sequence[Turn]) -> str | None:
    """The check after the rewrite (option ``rewrite_check``): when the message refers to the previous short answer
    (:func:`find_reference`: "Which continent is that river on?" after "Atbara River.") and the model's rewrite does
    not name it (it kept "that river", named another entity, or repeated a question), the message with the reference
    replaced by the answer ("Which continent is Atbara River on?"); None when the rewrite stands or it does not apply."""
    entity = previous_entity(turns)
    ref = find_reference(question)
    if not entity or not ref or names(rewritten, entity) or names(question, entity):
        return None
    m, possessive = ref
    out = question[: m.start()] + (f"{entity}'s" if possessive else entity) + question[m.end() :]
    return out[:1].upper() + out[1:] if m.start() == 0 else out


def split_messages(messages: Any) -> tuple[str, list[dict[str, str]]]:
    """A conversation's messages as (the last user message, the turns before it, as dicts); trailing assistant
    turns are dropped (nothing asks about them).  :class:`BadHistory` when malformed or without a user message."""
    turns = parse_history(messages)
    last = next((i for i in range(len(turns) - 1, -1, -1) if turns[i].role == "user"), None)
    if last is None:
        raise BadHistory("the messages hold no user message")
    return turns[last].content, [t.to_dict() for t in turns[:last]]
