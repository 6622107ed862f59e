"""What the /v1/ask and /v1/chat/completions routes share: turning a request into
a run (checking strategy, source, model and scope) and waiting for it."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from sse_starlette import EventSourceResponse, ServerSentEvent

from sleuth.search.base import FilterError, Filters
from sleuth.strategies.options import OptionsError
from sleuth.strategies.result import Event, Result

from .encoding import guard_stream
from .errors import ApiError, forbidden, principal_of
from .principals import Principal
from .runtime import CANCELLED, TIMEOUT, Busy, Job, Runtime
from .scoping import ScopeError, check_source, default_source, duplicated_key, effective_scope

CANONICAL_FILTER_KEYS = {"equals", "ranges", "acl"}


def runtime_of(request: Any) -> Runtime:
    return request.app.state.runtime


class _Malformed(Exception):
    """A filter value of the wrong shape, at ``path`` (``filters.ranges.year``)."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


def _scalar(v: Any) -> bool:
    """A value a filter compares with: text, or a finite number (not a boolean)."""
    if isinstance(v, bool):
        return False
    if isinstance(v, float):
        return math.isfinite(v)
    return isinstance(v, int) or (isinstance(v, str) and bool(v.strip()))


def _values(v: Any, path: str) -> list[Any]:
    vals = v if isinstance(v, list) else [v]
    if not vals:
        raise _Malformed(path, "needs a value or a list of values")
    for i, x in enumerate(vals):
        where = f"{path}[{i}]" if isinstance(v, list) else path
        if not _scalar(x):
            raise _Malformed(where, f"must be text or a number, not {type(x).__name__} {str(x)[:40]!r}")
    return vals


def _check_canonical(raw: dict[str, Any], param: str) -> None:
    """Refuse a canonical scope ({"equals", "ranges", "acl"}) whose parts have the wrong shape,
    naming the path of the first bad value."""
    for part in ("equals", "ranges"):
        table = raw.get(part)
        if table is None:
            continue
        if not isinstance(table, dict):
            raise _Malformed(f"{param}.{part}", "must be an object of field to value(s)")
        for field, v in table.items():
            path = f"{param}.{part}.{field}"
            if part == "equals":
                _values(v, path)
            elif not (isinstance(v, list) and len(v) == 2):
                raise _Malformed(path, "a range must be a list of two bounds [low, high] (null for an open end)")
            else:
                for i, bound in enumerate(v):
                    if bound is not None and not _scalar(bound):
                        raise _Malformed(f"{path}[{i}]", "a bound must be text, a number or null")
    acl = raw.get("acl")
    if acl is not None:
        groups = acl if isinstance(acl, list) else [acl]
        if not groups:
            raise _Malformed(f"{param}.acl", "needs a group name or a list of them")
        for i, g in enumerate(groups):
            if not (isinstance(g, str) and g.strip()):
                where = f"{param}.acl[{i}]" if isinstance(acl, list) else f"{param}.acl"
                raise _Malformed(where, f"an ACL group is a name (text), not {str(g)[:40]!r}")


def parse_filters(raw: Any, param: str = "filters") -> Filters:
    """The request's scope, exactly as given: never merged with anything else.  A malformed one
    is a 422 whose ``param`` is the path of the bad value (``filters.ranges.year``)."""
    if raw is None:
        return Filters()
    try:
        if isinstance(raw, list):
            for i, x in enumerate(raw):
                if not isinstance(x, str):
                    raise _Malformed(f"{param}[{i}]", "a filter list must hold strings like 'acl=all'")
            return Filters.parse(raw)
        if isinstance(raw, dict):
            if set(raw) <= CANONICAL_FILTER_KEYS:
                _check_canonical(raw, param)
                return Filters.from_dict(raw)
            exprs = []
            for k, v in raw.items():
                vals = _values(v, f"{param}.{k}")
                if any("," in str(x) for x in vals):
                    raise _Malformed(f"{param}.{k}", "give several values as a list, not with commas")
                exprs.append(f"{k}=" + ",".join(str(x) for x in vals))
            return Filters.parse(exprs)
    except _Malformed as e:
        raise ApiError(422, f"{e.path}: {e.message}", param=e.path) from None
    except FilterError as e:
        raise ApiError(422, f"{param}: {e}", param=param) from None
    except (TypeError, ValueError) as e:
        raise ApiError(422, f"{param}: malformed scope ({e})", param=param) from None
    raise ApiError(422, f"{param}: must be a list of expressions or an object", param=param)


def refuse(rt: Runtime, principal: Principal, path: str, e: ScopeError) -> ApiError:
    """A 403 for a scope error (and its audit line)."""
    if rt.audit is not None:
        rt.audit.denied(status=403, path=path, reason=e.message, principal=principal)
    return forbidden(e.message, param="index" if e.part == "index" else "filters")


def scoped(rt: Runtime, request: Any, raw: Any, *, source: str | None = None, param: str = "filters") -> Filters:
    """The effective scope of a request: its principal's scope narrowed by ``raw`` filters
    (422 for malformed filters, 403 for filters or a source outside the principal's scope)."""
    principal = principal_of(request)
    requested = parse_filters(raw, param)
    try:
        if source is not None:
            check_source(principal, source)
        return effective_scope(principal, requested)
    except ScopeError as e:
        raise refuse(rt, principal, request.url.path, e) from None


async def run_scope(rt: Runtime, request: Any, raw: Any, source: str | None) -> tuple[Filters, str | None]:
    """:func:`scoped` for a run request, after refusing a body that repeats a key; also returns
    the source the run gets (a principal limited to some sources gets the first of them)."""
    dup = duplicated_key(await request.body())
    if dup is not None:
        raise ApiError(422, f"the JSON body repeats the key {dup!r}; send each key once", param=dup)
    principal = principal_of(request)
    if source is None:
        try:
            source = default_source(principal, rt.sources())
        except ScopeError as e:
            raise refuse(rt, principal, request.url.path, e) from None
    return scoped(rt, request, raw, source=source), source


def check_run(rt: Runtime, *, strategy: str, source: str | None, model: str | None, param: str = "strategy") -> None:
    names = list(rt.strategy_factories())
    if strategy not in names and param == "strategy":
        raise ApiError(422, f"unknown strategy {strategy!r}; choose one of: {', '.join(names)}", param=param)
    if strategy not in names:  # a chat completion's model names the strategy
        models = ", ".join("sleuth-" + n for n in names)
        msg = f"the model {strategy!r} does not exist; choose one of: {models}"
        raise ApiError(404, msg, param=param, code="model_not_found")
    if source is not None and source not in rt.sources():
        have = ", ".join(rt.sources()) or "none (start the server with --index or --corpus)"
        raise ApiError(422, f"unknown source {source!r}; this server has: {have}", param="index")
    if model is not None and model not in rt.settings.models:
        allowed = ", ".join(m for m in rt.settings.models if m) or "the server's default only"
        raise ApiError(422, f"model {model!r} is not offered by this server; allowed: {allowed}", param="model")


def run_options(
    rt: Runtime, strategy: str, own: dict[str, Any], extra: dict[str, Any] | None, param: str = "options"
) -> dict[str, Any]:
    """The run's options: the request's own fields (``own``: k, max_steps, ...) and its ``options``
    object, checked against the strategy's options (422 naming the valid ones)."""
    extra = dict(extra or {})
    for key in extra:
        if key.replace("-", "_") in own:
            raise ApiError(422, f"{param}: {key!r} is a field of the request itself, not an option", param=param)
    options = {**extra, **{k: v for k, v in own.items() if v is not None}}
    cls = rt.strategy_class(strategy)
    if cls is not None:  # a factory the app was given checks its own options
        try:
            cls.Options.parse(options, strategy=strategy)
        except OptionsError as e:
            raise ApiError(422, f"{param}: {e}", param=param) from None
    return options


async def new_run(
    rt: Runtime,
    request: Any,
    body: Any,
    *,
    strategy: str,
    own: dict[str, Any],
    conversation: Callable[[], tuple[str, list[dict[str, str]]]],
    endpoint: str,
    model: str | None = None,
    param: str = "strategy",
) -> Job:
    """The checked, admitted run a request asks for (scope, strategy, options; ``own``: its option fields);
    ``conversation()`` gives the question and its history once those have passed."""
    filters, source = await run_scope(rt, request, body.filters, body.index)
    check_run(rt, strategy=strategy, source=source, model=model, param=param)
    options = run_options(rt, strategy, own, body.options)
    question, history = conversation()
    admit(rt)
    job = rt.new_job(
        question=question,
        strategy=strategy,
        filters=filters,
        principal=principal_of(request),
        source=source,
        model=model,
        options=options,
        temperature=body.temperature,
        seed=body.seed,
        history=history,
    )
    job.endpoint, job.stream = endpoint, body.stream
    return job


def event_stream(
    rt: Runtime, job: Job, events: AsyncIterator[ServerSentEvent], on_error: Callable[[], Iterable[ServerSentEvent]]
) -> EventSourceResponse:
    """Start ``job`` and answer with its ``events`` (ending with ``on_error()`` if making one fails)."""
    rt.start(job, stream=True)
    return EventSourceResponse(
        guard_stream(events, on_error, f"run {job.trace_id}"), ping=10, headers={"X-Sleuth-Trace-Id": job.trace_id}
    )


async def result_of(rt: Runtime, job: Job, request: Any) -> Result:
    """The result of a run without streaming (504 past the deadline)."""
    result, timed_out = await wait_result(rt, job, request.receive)
    if timed_out:
        raise ApiError(504, result.error, "timeout", code="timeout", trace_id=job.trace_id)
    return result


def failure(job: Job) -> dict[str, Any]:
    """The error body that ends a stream whose run failed after it started."""
    return ApiError(500, "internal error; see the server log", "server_error", trace_id=job.trace_id).body()


def admit(rt: Runtime) -> None:
    try:
        rt.acquire()
    except Busy as e:
        raise ApiError(
            429, str(e), "rate_limit_error", code="busy", headers={"Retry-After": str(e.retry_after)}
        ) from None


async def _disconnected(receive: Any) -> None:
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            return


async def wait_result(rt: Runtime, job: Job, receive: Any = None) -> tuple[Result, bool]:
    """Run to the end, the deadline, or the client's departure; returns (result, timed_out)."""
    fut = rt.start(job, stream=False)
    waiters: set[asyncio.Future[Any]] = {fut}
    watch = asyncio.ensure_future(_disconnected(receive)) if receive is not None else None
    if watch is not None:
        waiters.add(watch)
    try:
        remaining = max(0.0, job.stop.deadline - time.monotonic())
        done, _ = await asyncio.wait(waiters, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if watch is not None:
            watch.cancel()
    if fut in done and job.result is not None:
        return job.result, job.result.finish_reason == TIMEOUT
    if watch is not None and watch in done:
        return rt.give_up(job, CANCELLED), False
    return rt.give_up(job, TIMEOUT), True


async def stream_job(rt: Runtime, job: Job) -> AsyncIterator[Event | Result]:
    """Each step as it happens, then the result (a partial one past the deadline).
    If the consumer stops early (the client left), the run is told to stop.

    The run must already be started (``rt.start(job, stream=True)``) by the route itself, so
    that its slot is given back even if the response never starts."""
    queue = job._queue
    assert queue is not None
    finished = False
    try:
        while True:
            remaining = job.stop.deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                ev = await asyncio.wait_for(queue.get(), timeout=remaining)
            except TimeoutError:
                break
            if ev is None:
                break
            yield ev
        finished = True
        yield job.result if job.result is not None else rt.give_up(job, TIMEOUT)
    finally:
        if not finished:  # the client left: stop the run at its next step
            rt.give_up(job, CANCELLED)
