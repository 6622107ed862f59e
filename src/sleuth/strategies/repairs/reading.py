"""The repair ``final_read`` (Self-Ask; Search-o1 opt-in): a final reading pass.

After a multi-hop strategy has found its answer, the question is answered once more, RAG's way (``rag.txt``), from
documents: the question's own search first, then the passages the strategy's searches found, as IRCoT's reader reads
every passage its steps retrieved.  The strategy's searches find the second hop's passage that a search for the whole
question misses; its own answer is composed from one-line intermediate answers (Self-Ask) or condensed search results
(Search-o1) and is lost when one of them is.  The strategy's answer is kept as the run's ``draft`` (the report pairs
the two) and stands when nothing was found or the reading says the documents do not answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import zip_longest

from sleuth.lang import NOTHING
from sleuth.search.base import Passage, SearchError
from sleuth.strategies.answers import short_answer
from sleuth.strategies.base import RunState, Strategy
from sleuth.strategies.parsing import parse_cot
from sleuth.strategies.repairs import fired
from sleuth.strategies.text import cited_numbers, clean_short, format_passages

#: the reading pass shows as many passages as the budget gives this many characters each (at least
#: ``k``), by language (Chinese is denser: 2000 characters show six passages, not four)
READ_CHARS_PER_PASSAGE = {"en": 500, "zh": 300}


def interleave(ranked: Sequence[Sequence[Passage]]) -> list[Passage]:
    """Several searches' results by rank: every search's first passage, then every second, ..."""
    return [p for rank in zip_longest(*ranked) for p in rank if p is not None]


def read_passages(strategy: Strategy, st: RunState, question: str, passages: Sequence[Passage]) -> tuple[str, str]:
    """Answer ``question`` RAG's way (``rag.txt``, step ``read``) from ``passages`` within the
    strategy's context budget: the reply's body and its short answer."""
    docs = format_passages(passages, budget=strategy.context_chars(st))
    c = strategy.ask(st, strategy.prompt(st, "rag", question=question, documents=docs), step="read")
    read = short_answer(strategy, st, question, c)
    return parse_cot(c.text)[0], read


def final_read(
    strategy: Strategy, st: RunState, found: Sequence[Sequence[Passage]], answer: str, *, stage: str, found_by: str
) -> tuple[str, str]:
    """Repair ``final_read`` at a strategy's end: its answer and short answer, or, when the option is on and the
    reading answers, the reading's.  The question is answered again from its own search and the passages of
    ``found`` (one list per search of the strategy, by rank); the strategy's answer is recorded as a ``draft`` event
    of stage ``stage``; ``found_by`` names the strategy's searches in the trace note ("the follow-ups'").  A reading
    that answers replaces the run's claims: the answer rests on it now, not on the steps that led to it."""
    short = clean_short(answer)
    if not getattr(strategy.opts, "final_read", False) or strategy.retriever is None:
        return answer, short
    question = st.result.question
    try:
        own = strategy.retrieve(st, question, route="original")
    except SearchError as e:
        st.emit("note", type="search_failed", message=str(e))
        own = []
    budget = strategy.context_chars(st)
    limit = max(strategy.k, budget // READ_CHARS_PER_PASSAGE.get(st.result.lang, 500))
    # the question's passages first, then the strategy's by rank (each search's best first,
    # then each one's second, ...), each once; a third of the places are kept for the
    # strategy's (the hops a search for the whole question misses)
    shown: dict[str, Passage] = {p.id: p for p in own[: limit - limit // 3]}
    for p in interleave(found):
        shown.setdefault(p.id, p)
    if not shown:
        return answer, short
    passages = list(shown.values())[:limit]
    st.emit("draft", text=answer, short_answer=short, stage=stage)
    body, read = read_passages(strategy, st, question, passages)
    fired(
        st,
        "final_read",
        message=f"answered again from {len(passages)} passages (the question's own search, then {found_by})",
        shown=[p.id for p in passages],
        read=read[:300],
    )
    if not read or NOTHING.match(read):
        st.emit("note", type="read_abstained", message=f"the reading found no answer; the {stage}'s answer stands")
        return answer, short
    st.claims.clear()
    st.cite(passages, claim=body, query=question, marks=cited_numbers(body))
    return body or read, clean_short(read)
