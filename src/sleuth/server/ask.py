"""``POST /v1/ask``: one question, one strategy, the full result (or its steps as SSE)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from sse_starlette import EventSourceResponse, ServerSentEvent

from sleuth.strategies.result import Event, Result

from .encoding import SafeJSONResponse, dumps, guard_stream
from .errors import ApiError, error_responses, principal_of
from .runtime import Runtime
from .schemas import AskRequest, AskResult
from .service import admit, check_run, run_options, run_scope, stream_job, wait_result

router = APIRouter()

SSE_DOC = (
    "With `stream: true`: `event: step` (data: one trace event {kind, data, t, duration_s}) for each step as "
    "it happens, then one `event: result` (data: the full result, as without streaming). If the server fails "
    "after the stream started, it ends with one `event: error` (data: the error body, as for a 500) instead."
)


def _json(obj: Any) -> str:
    return dumps(obj)


def runtime_of(request: Request) -> Runtime:
    return request.app.state.runtime


@router.post(
    "/v1/ask",
    response_model=AskResult,
    summary="Answer a question with one strategy",
    description="Returns the full result: answer, numbered citations with provenance, and the trace. " + SSE_DOC,
    responses={
        200: {"content": {"text/event-stream": {"schema": {"type": "string"}}}, "description": "the result"},
        **error_responses(401, 403, 413, 422, 429, 504),
    },
)
async def ask(body: AskRequest, request: Request) -> Any:
    rt = runtime_of(request)
    strategy = body.strategy or rt.settings.default_strategy
    filters, source = await run_scope(rt, request, body.filters, body.index)
    check_run(rt, strategy=strategy, source=source, model=body.model)
    own = {"k": body.k, "max_steps": body.max_steps, "max_tokens": body.max_tokens, "lang": body.lang}
    if body.mode is not None:
        own["mode"] = body.mode
    options = run_options(rt, strategy, own, body.options)
    admit(rt)
    job = rt.new_job(
        question=body.question,
        strategy=strategy,
        filters=filters,
        principal=principal_of(request),
        source=source,
        model=body.model,
        options=options,
        temperature=body.temperature,
        seed=body.seed,
        history=[t.model_dump() for t in body.history or []],
    )
    job.endpoint, job.stream = "/v1/ask", body.stream
    if body.stream:
        rt.start(job, stream=True)
        events = guard_stream(_sse(rt, job), lambda: [_failed(job)], f"run {job.trace_id}")
        return EventSourceResponse(events, ping=10, headers={"X-Sleuth-Trace-Id": job.trace_id})
    result, timed_out = await wait_result(rt, job, request.receive)
    if timed_out:
        raise ApiError(504, result.error, "timeout", code="timeout", trace_id=job.trace_id)
    return SafeJSONResponse(result.to_dict(), headers={"X-Sleuth-Trace-Id": job.trace_id})


def _failed(job: Any) -> ServerSentEvent:
    err = ApiError(500, "internal error; see the server log", "server_error", trace_id=job.trace_id)
    return ServerSentEvent(data=_json(err.body()), event="error")


async def _sse(rt: Runtime, job: Any) -> AsyncIterator[ServerSentEvent]:
    seq = 0
    async for item in stream_job(rt, job):
        seq += 1
        if isinstance(item, Event):
            yield ServerSentEvent(data=_json(item.to_dict()), event="step", id=str(seq))
        elif isinstance(item, Result):
            yield ServerSentEvent(data=_json(item.to_dict()), event="result", id=str(seq))
