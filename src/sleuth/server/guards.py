"""What one run of the server sees: the shared LLM and retrievers behind guards that refuse
further calls once the run must stop (past its deadline, or its client gone)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from sleuth.llm.base import LLM, Completion, GenParams, LLMTimeout, Message, OnDelta
from sleuth.search.base import Filters, Passage, Retriever, SearchUnavailable

TIMEOUT = "timeout"
CANCELLED = "cancelled"


class RunStopped(LLMTimeout):
    """Raised by a stopped run's LLM: the strategy ends with an ``llm_*`` finish reason."""


class _Stop:
    """Why a run must stop, if it must."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.cancelled = threading.Event()

    def reason(self) -> str | None:
        if self.cancelled.is_set():
            return CANCELLED
        if time.monotonic() > self.deadline:
            return TIMEOUT
        return None


class GuardedLLM:
    """The shared LLM, seen by one run: refuses calls once the run must stop and
    fills in the request's sampling defaults."""

    def __init__(self, llm: LLM, stop: _Stop, *, temperature: float | None = None, seed: int | None = None) -> None:
        self._llm = llm
        self._stop = stop
        self._temperature = temperature
        self._seed = seed
        self.model = getattr(llm, "model", "")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._llm, name)

    def _check(self) -> None:
        why = self._stop.reason()
        if why:
            raise RunStopped(f"the run was stopped ({why})")

    def _params(self, params: GenParams | None) -> GenParams:
        p = params or GenParams()
        return p.with_(
            temperature=self._temperature if p.temperature is None else None,
            seed=self._seed if p.seed is None else None,
        )

    def _guard(self, on_delta: OnDelta | None) -> OnDelta | None:
        if on_delta is None:
            return None

        def piece(text: str) -> None:
            self._check()  # a stopped run's stream ends at its next piece
            on_delta(text)

        return piece

    def complete(self, prompt: str, params: GenParams | None = None, *, on_delta: OnDelta | None = None) -> Completion:
        self._check()
        return self._llm.complete(prompt, self._params(params), on_delta=self._guard(on_delta))

    def chat(
        self, messages: Sequence[Message], params: GenParams | None = None, *, on_delta: OnDelta | None = None
    ) -> Completion:
        self._check()
        return self._llm.chat(messages, self._params(params), on_delta=self._guard(on_delta))


class GuardedRetriever:
    """The shared retriever, seen by one run: searches only inside the run's scope
    (whatever filters the strategy passes) and refuses once the run must stop."""

    def __init__(self, retriever: Retriever, stop: _Stop, scope: Filters) -> None:
        self._r = retriever
        self._stop = stop
        self._scope = scope
        self.name = getattr(retriever, "name", "retriever")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._r, name)

    def _check(self) -> None:
        why = self._stop.reason()
        if why:
            raise SearchUnavailable(f"the run was stopped ({why})")

    def _keep(self, passages: list[Passage], filters: Filters) -> list[Passage]:
        # a strategy may narrow the scope; nothing outside the request's scope ever comes back
        return [p for p in passages if self._scope.matches(p) and filters.matches(p)]

    def search(self, query: str, k: int = 5, filters: Filters | None = None) -> list[Passage]:
        self._check()
        f = filters if filters is not None else self._scope
        return self._keep(self._r.search(query, k, f), f)

    def search_batch(self, queries: Sequence[str], k: int = 5, filters: Filters | None = None) -> list[list[Passage]]:
        self._check()
        f = filters if filters is not None else self._scope
        return [self._keep(ps, f) for ps in self._r.search_batch(queries, k, f)]
