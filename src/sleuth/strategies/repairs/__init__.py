"""The repairs: every step a strategy takes that is not its paper's method, declared in one place.

Each :class:`Repair` has a name, the strategies it applies to, the failure it fixes (with an example from a tuning
split) and what a paired on/off run on tuning data measured.  Each is switched by the option of its name (``--opt
final_read=false``); ``mode=paper`` switches every one off and runs each strategy as published
(:mod:`sleuth.strategies.options`).  A strategy calls a repair at a named point of its ``solve`` only when
``self.opts.<name>`` is on, and every repair that changes something records one ``repair`` event (:func:`fired`) with
its name, so a trace shows each one that acted.  docs/strategies.md has the table.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sleuth.lang import WH
from sleuth.strategies.text import normalize_query, query_similarity

if TYPE_CHECKING:
    from sleuth.strategies.base import RunState

ALL = ("direct", "cot", "rag", "self-ask", "rat", "step-back", "search-o1")


@dataclass(frozen=True)
class Repair:
    """One declared repair: ``name`` is also its option."""

    name: str
    strategies: tuple[str, ...]
    fixes: str
    measured: str


REPAIRS: tuple[Repair, ...] = (
    Repair(
        "extract_short",
        ("cot", "rag", "rat"),
        "a reply with no 'So the answer is:' line has no short answer; one short call reads it from the reply "
        "(4 of 20 RAG replies on hotpotqa/train, --limit 20 --seed 3, had no answer line)",
        "RAG, 20 hotpotqa/train questions (distractor, seed 3): F1 0.270 -> 0.288, +0.018 [-0.009, +0.065], "
        "1 better, 1 worse; 0.15 more calls a question",
    ),
    Repair(
        "short_support",
        ALL,
        "a short answer that neither the question, the long answer nor the passages state is not returned (the long "
        "answer stands): RAT's extraction gave 'JFK Airport' for a MuSiQue tuning question, gold 'Stockholm Arlanda "
        "Airport'",
        "replayed on 806 tuning records (MuSiQue tuning half, TimeQA, policy_zh): 9 refused, all 9 wrong; F1 "
        "0.121 -> 0.120 (partial credit); RAG on 20 hotpotqa/train questions 0.272 either way",
    ),
    Repair(
        "grounding",
        ("rag", "self-ask", "rat", "step-back", "search-o1"),
        "citations are the passages the answer rests on, not every passage retrieved (a reply over five passages "
        "that uses one cites one)",
        "on/off, the same answers: RAG, 20 hotpotqa/train questions (distractor, seed 3): citation precision 0.320 "
        "-> 0.575, recall 0.800 -> 0.375; policy_zh tuning half: evidence precision 0.267 -> 0.926 (RAG), 0.221 -> "
        "0.870 (Step-back), recall 1.000 -> 0.778 / 0.870",
    ),
    Repair(
        "repeat_guard",
        ("self-ask", "search-o1"),
        "the small model asks the same follow-up or query again and loops until the step limit; the repeat is not "
        "searched again, it gets the earlier answer and a push to something new (a second repeat ends the loop)",
        "policy_zh tuning half, 16 questions (--limit 16 --seed 0), Self-Ask and Search-o1: conclusion accuracy the "
        "same on and off (7 and 2 of 16); it acted on 4 Search-o1 questions, which ended after 5-7 calls instead of "
        "15 at the step limit, with the same answers: Search-o1's prompt tokens 72,148 -> 29,689",
    ),
    Repair(
        "final_read",
        ("self-ask", "search-o1"),
        "the scaffold's answer is composed from one-line intermediate answers and is lost with one of them; the "
        "question is answered once more, RAG's way, from the question's own search and the follow-ups' passages "
        "(on for Self-Ask, opt-in for Search-o1)",
        "Self-Ask, hotpotqa/train 40 questions (--limit 40 --seed 1, open, hybrid, qwen2.5-1.5b): F1 0.459 -> 0.489, "
        "+0.030 [-0.062, +0.123]",
    ),
    Repair(
        "rule_form",
        ("step-back",),
        "the paper's one answer form over a policy: documents that are rules (clause numbering, normative wording, "
        "on half the passages found) get the prompts general rule / specific clause / conclusion (policy_zh "
        "tuning: every question's passages are rule-like); the detection runs either way (rerank and verdict read it)",
        "policy_zh tuning half, Step-back with the verdict (which reads only the detection of rules): the paper's "
        "prompts 0.688, the rule form 0.844 (5 better, none worse); without the verdict 0.500 -> 0.469",
    ),
    Repair(
        "abstention_reread",
        ("step-back",),
        "over general documents the answer says the documents do not answer with the answer in its own "
        "background ('Noam Chomsky ... has written over 100 books', hotpotqa/train); it is read again, RAG's way",
        "hotpotqa/train 40 questions (--limit 40 --seed 1, the three abstentions made again): F1 0.392 -> 0.453, "
        "+0.062 [0.000, +0.133] (3 better, none worse)",
    ),
    Repair(
        "verdict",
        ("step-back",),
        "over rules the form's conclusion contradicts its own clause ('专门条款：无 / 结论：是'); a yes/no question "
        "is decided from its deciding clause in one short call, which the answer quotes",
        "policy_zh tuning half, 15 yes/no questions: right polarity 1 of the first 5 with the form, 11 of 15 with "
        "the verdict; with the answerability check and the clauses ranked by both questions, conclusion accuracy "
        "on all 32: 0.594 -> 0.844",
    ),
    Repair(
        "rerank",
        ("step-back",),
        "ten passages from two routes cost the answer (the model reads twice RAG's context); the pool is reranked by "
        "reciprocal-rank fusion and the first k_original shown, the best of each route kept",
        "hotpotqa/train 40 questions (--limit 40 --seed 1): F1 0.363 (10 passages) -> 0.392 (5 reranked), "
        "+0.028; half the prompt tokens",
    ),
)
BY_NAME = {r.name: r for r in REPAIRS}


def fired(st: RunState, name: str, **data: Any) -> None:
    """Record that the repair ``name`` acted in this run (one ``repair`` event)."""
    assert name in BY_NAME, name
    st.emit("repair", name=name, **data)


#: content-word Jaccard overlap at which a follow-up or query repeats an earlier one (``repeat_guard``)
NEAR_DUPLICATE = 0.8


def repeat_of(query: str, earlier: Iterable[str]) -> str | None:
    """Repair ``repeat_guard``: the earlier follow-up or query that ``query`` repeats: the same content
    words, or an overlap of at least :data:`NEAR_DUPLICATE` (:func:`~sleuth.strategies.text.query_similarity`:
    Chinese by character bigrams, so "北京 冬残奥会 开幕日期" after "北京 冬奥会 开幕日期" is new).  Only one
    that asks with the same question words repeats it: "Where is X from?" after "Who is X?" is a new hop."""
    asks = {w.lower() for w in WH.findall(query)}
    earlier = [q for q in earlier if {w.lower() for w in WH.findall(q)} == asks]
    key = normalize_query(query)
    same = next((q for q in earlier if normalize_query(q) == key), None)
    if same is not None:
        return same
    best = max(earlier, key=lambda q: query_similarity(query, q), default=None)
    return best if best is not None and query_similarity(query, best) >= NEAR_DUPLICATE else None
