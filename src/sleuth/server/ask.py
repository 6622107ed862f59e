"""``POST /v1/ask``: one question, one strategy, the full result (or its steps as SSE)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from sse_starlette import ServerSentEvent

from sleuth.strategies.result import Event

from .encoding import SafeJSONResponse, dumps
from .errors import error_responses
from .runtime import Runtime
from .schemas import AskRequest, AskResult
from .service import event_stream, failure, new_run, result_of, runtime_of, stream_job

router = APIRouter()

SSE_DOC = (
    "With `stream: true`: `event: step` (data: one trace event {kind, data, t, duration_s}) for each step as "
    "it happens, then one `event: result` (data: the full result, as without streaming). If the server fails "
    "after the stream started, it ends with one `event: error` (data: the error body, as for a 500) instead."
)


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
    own = {"k": body.k, "max_steps": body.max_steps, "max_tokens": body.max_tokens, "lang": body.lang}
    if body.mode is not None:
        own["mode"] = body.mode
    history = [t.model_dump() for t in body.history or []]
    job = await new_run(
        rt,
        request,
        body,
        strategy=body.strategy or rt.settings.default_strategy,
        own=own,
        conversation=lambda: (body.question, history),
        endpoint="/v1/ask",
        model=body.model,
    )
    if body.stream:
        return event_stream(rt, job, _sse(rt, job), lambda: [ServerSentEvent(data=dumps(failure(job)), event="error")])
    result = await result_of(rt, job, request)
    return SafeJSONResponse(result.to_dict(), headers={"X-Sleuth-Trace-Id": job.trace_id})


async def _sse(rt: Runtime, job: Any) -> AsyncIterator[ServerSentEvent]:
    seq = 0
    async for item in stream_job(rt, job):
        seq += 1
        kind = "step" if isinstance(item, Event) else "result"
        yield ServerSentEvent(data=dumps(item.to_dict()), event=kind, id=str(seq))
