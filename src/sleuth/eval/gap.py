"""The compositionality gap (Press et al., "Measuring and Narrowing the Compositionality Gap").

Definition, as in the Self-Ask paper: among the compositional questions for which
the model answers **all** sub-questions correctly, the share whose composed
question it answers **incorrectly**::

    gap = #(all sub-questions right and composed question wrong) / #(all sub-questions right)

Sub-questions come from MuSiQue's ``question_decomposition``; a reference to an
earlier hop (``#1``, ``#2``...) is replaced by that hop's *gold* answer, so each
sub-question stands alone (the paper asks the two sub-questions independently),
and a hop written as a Wikidata triple (``"Hello Love >> performer"``) is asked as
the question it means (``"Who is the performer of Hello Love?"``).
Computed per strategy from the result records alone, so reports regenerate from
the JSONL.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sleuth.eval.datasets import OPEN, Item

SUB_SEP = "::sub"
_REF = re.compile(r"#(\d+)")


def substitute(question: str, answers: list[str]) -> str:
    """Replace ``#k`` by the k-th answer (1-based); unknown references are left as written."""

    def rep(m: re.Match[str]) -> str:
        k = int(m.group(1))
        return answers[k - 1] if 1 <= k <= len(answers) and answers[k - 1] else m.group(0)

    return " ".join(_REF.sub(rep, question).split())


# MuSiQue writes about 40 % of its hops as Wikidata triples; asked verbatim, a model reads them as noise and
# every such miss shrinks the gap's denominator for a reason that has nothing to do with composition.
_TRIPLE = re.compile(r"^(?P<subject>.+?)\s*>>\s*(?P<relation>[^>]+?)\s*\??$")
_RELATION_QUESTIONS = {
    "place of birth": "Where was {s} born?",
    "place of death": "Where did {s} die?",
    "location": "Where is {s} located?",
    "located in the administrative territorial entity": "In which administrative territorial entity is {s} located?",
    "located in or next to body of water": "Which body of water is {s} located in or next to?",
    "country": "Which country is {s} in?",
    "continent": "Which continent is {s} on?",
    "part of": "What is {s} part of?",
    "instance of": "What is {s} an instance of?",
    "shares border with": "What shares a border with {s}?",
    "educated at": "Where was {s} educated?",
    "member of sports team": "Which sports team was {s} a member of?",
    "member of political party": "Which political party was {s} a member of?",
    "capital of": "What is {s} the capital of?",
    "follows": "What does {s} follow?",
    "followed by": "What is {s} followed by?",
    "conflict": "Which conflict was {s} involved in?",
    "sport": "Which sport does {s} play?",
    "applies to jurisdiction": "Which jurisdiction does {s} apply to?",
    "licensed to broadcast to": "Where is {s} licensed to broadcast to?",
    "location of formation": "Where was {s} formed?",
    "mouth of the watercourse": "Where does {s} flow into?",
    "headquarters location": "Where is the headquarters of {s}?",
    "employer": "Who was the employer of {s}?",
    "record label": "Which record label released {s}?",
    "publisher": "Who published {s}?",
    "manufacturer": "Who manufactured {s}?",
    "owned by": "Who owns {s}?",
    "founded by": "Who founded {s}?",
    "inception": "When was {s} founded?",
    "date of birth": "When was {s} born?",
    "date of death": "When did {s} die?",
    "publication date": "When was {s} published?",
}
_PERSON_RELATIONS = {
    "performer", "author", "composer", "producer", "director", "screenwriter", "creator", "developer",
    "spouse", "father", "mother", "sibling", "child", "lyricist", "architect", "designer",
}  # fmt: skip


def as_question(hop: str) -> str:
    """A MuSiQue hop as a question: ``"X >> performer"`` -> ``"Who is the performer of X?"``.

    Hops already written as questions are returned with their spacing tidied
    (``"... of #1 ?"`` -> ``"... of #1?"``); an unknown property becomes
    ``"What is the <property> of X?"``.
    """
    text = re.sub(r"\s+([?.!,;:])", r"\1", " ".join(hop.split()))
    m = _TRIPLE.match(text)
    if not m:
        return text
    subject, relation = m.group("subject").strip(" ,"), m.group("relation").strip()
    who = "Who" if relation.lower() in _PERSON_RELATIONS else "What"
    return _RELATION_QUESTIONS.get(relation.lower(), who + " is the " + relation + " of {s}?").replace("{s}", subject)


def sub_items(item: Item) -> list[Item]:
    """One stand-alone :class:`Item` per hop of ``item``'s decomposition (none when it has no gold answers)."""
    hops = item.decomposition
    if not hops or not all(h.answer for h in hops):
        return []
    gold = [h.answer for h in hops]
    return [
        Item(
            id=f"{item.id}{SUB_SEP}{i}",
            question=as_question(substitute(h.question, gold)),
            answers=list(dict.fromkeys([h.answer, *h.aliases])),
            type=OPEN,
            gold_ids=[h.support_id] if h.support_id else [],
            paragraphs=item.paragraphs,
            filters=item.filters,
            metadata={"parent": item.id, "hop": i, "hops": len(hops), "source_question": h.question},
        )
        for i, h in enumerate(hops, 1)
    ]


_TASK_SUFFIX = re.compile(r"::(?:sub\d+|last|standalone)$")


def question_of(task_id: str) -> str:
    """The dataset question a task belongs to: a hop's composed question (``<qid>::sub2``), a
    conversation baseline's conversation (``<qid>::last``, ``<qid>::standalone``), else the task's own id."""
    return _TASK_SUFFIX.sub("", task_id)


@dataclass
class GapRow:
    """One strategy's counts, over the composed questions with every sub-question answered."""

    questions: int = 0
    subs_all_right: int = 0  # ... of which every sub-question was right
    composed_wrong: int = 0  # ... of which the composed question was wrong
    composed_right_overall: int = 0  # composed questions right, among ``questions``
    hops: int = 0  # sub-questions asked, among ``questions``
    hops_right: int = 0  # ... answered correctly

    @property
    def gap(self) -> float | None:
        return self.composed_wrong / self.subs_all_right if self.subs_all_right else None


def compositionality_gap(records: Iterable[Mapping[str, Any]], metric: str = "em") -> dict[str, GapRow]:
    """Per strategy, from result records (``strategy``, ``qid``, ``scores``).

    A record counts as correct when ``scores[metric] >= 1`` (e.g. ``em``, ``cover_em``).
    Questions whose composed result or any sub-question result is missing are left out.
    """
    main: dict[tuple[str, str], bool] = {}
    subs: dict[tuple[str, str], dict[int, bool]] = defaultdict(dict)
    nhops: dict[str, int] = {}
    for r in records:
        qid, strat = str(r["qid"]), str(r["strategy"])
        ok = float((r.get("scores") or {}).get(metric) or 0.0) >= 1.0
        if SUB_SEP not in qid:
            main[(strat, qid)] = ok
            continue
        parent, hop = qid.split(SUB_SEP, 1)
        subs[(strat, parent)][int(hop)] = ok
        if (r.get("task") or {}).get("hops"):
            nhops[parent] = int(r["task"]["hops"])
    rows: dict[str, GapRow] = {}
    for (strat, qid), composed_ok in sorted(main.items()):
        hops = subs.get((strat, qid))
        if not hops or sorted(hops) != list(range(1, nhops.get(qid, max(hops)) + 1)):
            continue  # no sub-question result, or some is missing
        row = rows.setdefault(strat, GapRow())
        row.questions += 1
        row.composed_right_overall += composed_ok
        row.hops += len(hops)
        row.hops_right += sum(hops.values())
        if all(hops.values()):
            row.subs_all_right += 1
            row.composed_wrong += not composed_ok
    return rows
