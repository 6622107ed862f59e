"""What every strategy returns: a :class:`Result` with a structured :class:`Trace` of
:class:`Event` steps, and the finish reasons a run can end with."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from sleuth.llm.base import Usage
from sleuth.search.base import Passage

#: the fields a result's dict holds as they are (``to_dict``/``from_dict``)
_PLAIN = "id answer short_answer finish_reason llm_calls searches llm_seconds search_seconds elapsed_s model lang error"

#: finish reasons shared by all strategies
FINISHED = "finished"  # the scaffold produced a final answer
STEP_LIMIT = "step_limit"  # ran out of steps, answer forced
REPEAT_LIMIT = "repeat_limit"  # kept repeating its own search queries, answer forced
LLM_UNAVAILABLE = "llm_unavailable"
SEARCH_UNAVAILABLE = "search_unavailable"
BAD_INPUT = "bad_input"
ERROR = "error"

Listener = Callable[["Event"], None]


@dataclass
class Event:
    """One step of a run, as recorded in the trace and streamed to listeners.

    ``kind`` is one of: ``start``, ``rewrite``, ``llm``, ``search``, ``follow_up``, ``intermediate_answer``, ``draft``,
    ``revision``, ``step_back``, ``reason_in_documents``, ``verdict``, ``answerable``, ``repair``, ``note``, ``answer``,
    ``error``.
    """

    kind: str
    data: dict[str, Any] = field(default_factory=dict)
    t: float = 0.0  # seconds since the run started
    duration_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Trace:
    events: list[Event] = field(default_factory=list)

    def of(self, kind: str) -> list[Event]:
        return [e for e in self.events if e.kind == kind]


@dataclass
class Result:
    """The same shape for every strategy."""

    question: str
    strategy: str
    answer: str = ""  # the full final answer (may be long-form)
    short_answer: str = ""  # a short span suitable for EM/F1
    citations: list[Passage] = field(default_factory=list)
    trace: Trace = field(default_factory=Trace)
    finish_reason: str = FINISHED
    usage: Usage = field(default_factory=Usage)
    llm_calls: int = 0
    searches: int = 0
    llm_seconds: float = 0.0
    search_seconds: float = 0.0
    elapsed_s: float = 0.0
    model: str = ""
    lang: str = "en"
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in ("id", "question", "strategy", "answer", "short_answer")}
        d |= {"citations": [p.to_dict() for p in self.citations], "finish_reason": self.finish_reason}
        d |= {"usage": self.usage.to_dict()} | {k: getattr(self, k) for k in _PLAIN.split()[4:]}  # llm_calls, ...
        d |= {k: round(getattr(self, k), 4) for k in ("llm_seconds", "search_seconds", "elapsed_s")}
        return d | {"trace": [e.to_dict() for e in self.trace.events]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Result:
        r = cls(question=d["question"], strategy=d["strategy"])
        for k in _PLAIN.split():
            if k in d:
                setattr(r, k, d[k])
        r.citations = [Passage.from_dict(p) for p in d.get("citations", [])]
        r.usage = Usage(**d.get("usage", {}))
        r.trace = Trace([Event(**e) for e in d.get("trace", [])])
        return r
