"""What the MCP tools do, over the server's :class:`~sleuth.server.runtime.Runtime`, as the caller's principal.

The same rules as the REST routes (text checks, :func:`~sleuth.server.scoping.effective_scope`, the
strategy and option checks of ``POST /v1/ask``, guarded worker threads).  A caller mistake raises
:class:`~mcp.server.mcpserver.exceptions.ToolError`; an outage is a finish reason.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server.mcpserver.exceptions import ResourceError, ToolError

from sleuth.search.base import Filters, Passage, SearchError, SearchUnavailable
from sleuth.server.errors import ApiError
from sleuth.server.principals import ANONYMOUS, Principal
from sleuth.server.runtime import Busy, Runtime, owner_of
from sleuth.server.scoping import ScopeError, check_source, default_source, effective_scope
from sleuth.server.service import check_run, parse_filters, refuse, run_options, stream_job
from sleuth.strategies.base import BadQuestion, validate_question
from sleuth.strategies.conversation import BadHistory, parse_history
from sleuth.strategies.result import Event, Result
from sleuth.text_input import BadText, check_text, check_tree

log = logging.getLogger("sleuth.server")
OnStep = Callable[[int, str], Awaitable[None]]
#: the passage fields a tool result shows (provenance first, then the text)
PASSAGE_FIELDS = ("id", "doc_id", "title", "source", "section", "version", "region", "url", "score", "found_by")
SHORT = 160
#: index statistics that name the server's folders or files (shown over stdio only: the local user's own)
SERVER_PATHS = ("path", "sources")


def passage_out(p: Passage | dict[str, Any]) -> dict[str, Any]:
    d = p.to_dict() if isinstance(p, Passage) else dict(p)
    out = {k: d.get(k) for k in PASSAGE_FIELDS if d.get(k) not in (None, "", [])}
    out["text"] = d.get("text", "")
    return out


def step_message(ev: Event) -> str:
    """One short line for a progress notification: the step's kind and what it is about."""
    data = ev.data if isinstance(ev.data, dict) else {}
    for key in ("query", "question", "follow_up", "answer", "text", "message", "error", "route"):
        v = data.get(key)
        if isinstance(v, str) and v.strip():
            v = " ".join(v.split())
            return f"{ev.kind}: {v[:SHORT]}{'…' if len(v) > SHORT else ''}"
    return ev.kind


def _checked(value: Any, field: str) -> Any:
    try:
        return check_tree(value, field)
    except BadText as e:
        raise ToolError(f"{e.field} {e.reason}") from None


class Tools:
    """The tools of one MCP server; ``endpoint`` names it in the audit log (``mcp:stdio``, ``/mcp``)."""

    def __init__(self, rt: Runtime, *, endpoint: str, local: bool) -> None:
        self.rt = rt
        self.endpoint = endpoint
        self.local = local

    # -- scope ------------------------------------------------------------------------
    def scope(self, principal: Principal, raw: Any, source: str | None) -> tuple[Filters, str | None]:
        """The effective scope and source of a call (an error result naming the part refused)."""
        _checked(raw, "filters")
        _checked(source, "source")
        try:
            requested = parse_filters(raw)
        except ApiError as e:
            raise ToolError(e.message) from None
        try:
            if source is None:
                source = default_source(principal, self.rt.sources())
            if source is not None:
                check_source(principal, source)
            return effective_scope(principal, requested), source
        except ScopeError as e:
            refuse(self.rt, principal, self.endpoint, e)  # audited as on /v1
            raise ToolError(f"{e.message} (a scope may only be narrowed)") from None

    def _retriever(self, source: str | None) -> Any:
        try:
            r = self.rt.retriever(source)
        except KeyError:
            have = ", ".join(self.rt.sources()) or "none"
            raise ToolError(f"unknown source {source!r}; this server has: {have}") from None
        except Exception as e:
            raise ToolError(f"the source {source!r} could not be opened: {e}") from None
        if r is None:
            raise ToolError("this server has no source to search (start it with --index or --corpus)")
        return r

    # -- tools ----------------------------------------------------------------------------
    async def search(
        self, principal: Principal, query: str, k: int, filters: Any, source: str | None, mode: str | None
    ) -> dict[str, Any]:
        _checked(query, "query")
        if not query.strip():
            raise ToolError("query is empty")
        scope, source = self.scope(principal, filters, source)
        r = self._retriever(source)
        kw: dict[str, Any] = {}
        if mode is not None:
            params = inspect.signature(r.search).parameters
            if "mode" not in params and not any(p.kind is p.VAR_KEYWORD for p in params.values()):
                raise ToolError(f"the source {source or self.rt.sources()[0]!r} does not take a search mode")
            kw["mode"] = mode
        try:
            found = await asyncio.to_thread(r.search, query, k, scope, **kw)
        except SearchUnavailable as e:  # an outage: a finish reason, as for a run
            return {"query": query, "passages": [], "finish_reason": e.reason, "error": str(e)}
        except SearchError as e:  # a search this source cannot do (a mode without vectors, ...)
            raise ToolError(f"search: {e}") from None
        passages = [p for p in found if scope.matches(p)]  # nothing outside the scope leaves the server
        if self.rt.audit is not None:
            self.rt.audit.searched(principal=principal, scope=scope, source=source, endpoint=self.endpoint,
                                   passage_ids=[p.id for p in passages])  # fmt: skip
        return {"query": query, "source": source or self.rt.sources()[0], "finish_reason": "finished",
                "passages": [passage_out(p) for p in passages]}  # fmt: skip

    async def ask(
        self,
        principal: Principal,
        question: str,
        *,
        strategy: str | None,
        filters: Any,
        k: int | None,
        max_steps: int | None,
        source: str | None,
        options: dict[str, Any] | None,
        on_step: OnStep,
        history: Any = None,
        mode: str | None = None,
    ) -> dict[str, Any]:
        try:
            question = validate_question(question)
            turns = [t.to_dict() for t in parse_history(history)]
        except (BadQuestion, BadHistory) as e:
            raise ToolError(str(e)) from None
        if strategy is not None:
            _checked(strategy, "strategy")
        _checked(options, "options")
        strategy = strategy or self.rt.settings.default_strategy
        scope, source = self.scope(principal, filters, source)
        try:
            check_run(self.rt, strategy=strategy, source=source, model=None)
            own = {"k": k, "max_steps": max_steps} | ({"mode": mode} if mode is not None else {})
            opts = run_options(self.rt, strategy, own, options)
            self.rt.acquire()
        except (ApiError, Busy) as e:  # a caller mistake, or a full server
            raise ToolError(str(e)) from None
        job = self.rt.new_job(question=question, strategy=strategy, filters=scope, principal=principal,
                              source=source, model=None, options=opts, history=turns)  # fmt: skip
        job.owner = self.owner(principal)
        job.endpoint, job.stream = self.endpoint, True
        self.rt.start(job, stream=True)
        result: Result | None = None
        n = 0
        async for item in stream_job(self.rt, job):  # a cancelled call stops the run at its next step
            if isinstance(item, Event):
                n += 1
                msg = step_message(item)
                await on_step(n, f"{msg} (trace://{job.trace_id})" if item.kind == "start" else msg)
            else:
                result = item
        assert result is not None
        return self.result_out(result)

    def owner(self, principal: Principal) -> tuple[str, str]:
        """Runs asked over MCP belong to their principal under its widest scope (``trace://`` reads them)."""
        return owner_of(principal, effective_scope(principal, Filters()))

    def result_out(self, result: Result) -> dict[str, Any]:
        d = result.to_dict()
        return {
            "trace_id": result.id,
            "trace": f"trace://{result.id}",
            "answer": d.get("answer", ""),
            "short_answer": d.get("short_answer", ""),
            "finish_reason": result.finish_reason,
            "error": result.error or "",
            "strategy": result.strategy,
            "citations": [{"n": i, **passage_out(p)} for i, p in enumerate(d.get("citations") or [], 1)],
        }

    def sources(self, principal: Principal) -> dict[str, Any]:
        out = []
        names = [n for n in self.rt.sources() if principal.may_use(n)]
        scope = effective_scope(principal, Filters())
        for i, name in enumerate(names):
            entry: dict[str, Any] = {"name": name, "default": i == 0}
            if name == self.rt.settings.quickstart_source:
                from sleuth.server.settings import QUICKSTART_NOTE

                entry.update(quickstart=True, note=QUICKSTART_NOTE)
            try:
                r: Any = self.rt.retriever(name)
            except Exception as e:  # a source that cannot open is listed with the reason (over HTTP: in the log)
                r, entry["error"] = None, f"cannot open: {e}" if self.local else "cannot open (see the server log)"
                if not self.local:
                    log.error("source %r cannot open: %s", name, e)
            entry["kind"] = self.rt.source_kind(name)
            stats = getattr(r, "stats", None)
            if callable(stats):
                try:
                    s = dict(stats(scope if not scope.is_empty() else None))
                except Exception as e:
                    s = {"error": f"no statistics: {e}"}
                if not self.local:
                    for key in SERVER_PATHS:  # the server's folders and files are its own business
                        s.pop(key, None)
                entry["stats"] = s
            out.append(entry)
        return {"default_strategy": self.rt.settings.default_strategy,
                "strategies": [s["name"] for s in self.rt.strategy_info()], "sources": out}  # fmt: skip

    def trace(self, principal: Principal, trace_id: str) -> dict[str, Any]:
        try:
            check_text(trace_id, "trace id")
        except BadText as e:
            raise ResourceError(str(e)) from None
        found = self.rt.traces.get(trace_id, self.owner(principal))
        if found is None:
            why = " (runs of callers without a key are not kept)" if principal.kind == ANONYMOUS else ""
            raise ResourceError(f"no trace {trace_id!r} for this caller{why}")
        return found
