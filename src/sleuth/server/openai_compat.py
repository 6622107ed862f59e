"""The OpenAI protocol: ``/v1/chat/completions`` (the model name picks the strategy)
and ``/v1/models``, so that any OpenAI SDK or chat client works unchanged.

The last user message is the question; the user and assistant messages before it are the
conversation's history, from which the question is first rewritten to stand alone (system and
tool messages are not part of it, and nothing in a message changes the scope).  Reasoning steps go in ``reasoning_content``
(streamed as they happen); the answer is the ``content``, followed by a numbered
source list; the extra field ``sleuth`` carries citations, trace id and finish reason.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from sse_starlette import ServerSentEvent

from sleuth.strategies.base import BadQuestion, validate_question
from sleuth.strategies.conversation import BadHistory, parse_history
from sleuth.strategies.result import FINISHED, Event, Result

from .encoding import SafeJSONResponse, dumps
from .errors import ApiError, checked_param, error_responses
from .render import citation_dicts, citations_block, step_line
from .runtime import Runtime
from .schemas import ChatCompletion, ChatRequest, ModelCard, ModelList
from .service import event_stream, failure, new_run, result_of, runtime_of, stream_job

router = APIRouter()
PREFIX = "sleuth-"
STARTED = int(time.time())


#: a model name ending in it runs the strategy in the paper mode (``sleuth-self-ask-paper``)
PAPER = "-paper"


def strategy_of(model: str) -> str:
    name = model[len(PREFIX) :] if model.startswith(PREFIX) else model
    return name.removesuffix(PAPER)


def conversation_of(req: ChatRequest) -> tuple[str, list[dict[str, str]]]:
    """The last user message and the user/assistant turns before it (system, tool and other roles
    are left out: they never reach the question or the scope)."""
    users = [i for i, m in enumerate(req.messages) if m.role == "user"]
    if not users:
        raise ApiError(422, "messages: there is no user message to answer", param="messages")
    where = f"messages.{users[-1]}.content"
    try:
        question = validate_question(req.messages[users[-1]].text())
    except BadQuestion as e:
        raise ApiError(422, f"{where}: {e}", param=where) from None
    turns = [
        {"role": m.role, "content": m.text()}
        for m in req.messages[: users[-1]]
        if m.role in ("user", "assistant") and m.text().strip()
    ]
    try:
        history = [t.to_dict() for t in parse_history(turns)]
    except BadHistory as e:
        raise ApiError(422, f"messages: {e}", param="messages") from None
    return question, history


def openai_finish(reason: str) -> str:
    return "stop" if reason == FINISHED else "length"


def answer_text(r: Result) -> str:
    text = r.answer.strip() or r.short_answer.strip()
    if not text:
        text = f"(no answer: {r.finish_reason}{' - ' + r.error if r.error else ''})"
    return text + citations_block(r.citations)


def sleuth_extra(r: Result) -> dict[str, Any]:
    return {
        "citations": citation_dicts(r.citations),
        "trace_id": r.id,
        "finish_reason": r.finish_reason,
        "strategy": r.strategy,
    }


def usage(r: Result) -> dict[str, int]:
    return {
        "prompt_tokens": r.usage.prompt_tokens,
        "completion_tokens": r.usage.completion_tokens,
        "total_tokens": r.usage.prompt_tokens + r.usage.completion_tokens,
    }


@router.get(
    "/v1/models",
    response_model=ModelList,
    summary="The sleuth-* models (one per strategy)",
    responses=error_responses(401),
)
async def list_models(request: Request) -> dict[str, Any]:
    names = runtime_of(request).strategy_factories()
    return {"object": "list", "data": [_card(n) for n in names]}


@router.get(
    "/v1/models/{model}", response_model=ModelCard, summary="One sleuth-* model", responses=error_responses(401, 404)
)
async def get_model(model: str, request: Request) -> dict[str, Any]:
    checked_param(model, "model")
    if strategy_of(model) not in runtime_of(request).strategy_factories() or not model.startswith(PREFIX):
        raise ApiError(404, f"the model {model!r} does not exist", code="model_not_found", param="model")
    return {**_card(strategy_of(model)), "id": model}  # sleuth-self-ask-paper: the same strategy, paper mode


def _card(name: str) -> dict[str, Any]:
    return {"id": PREFIX + name, "object": "model", "created": STARTED, "owned_by": "sleuth"}


@router.post(
    "/v1/chat/completions",
    response_model=ChatCompletion,
    summary="OpenAI-compatible chat completion; the model name selects the strategy",
    description="With `stream: true`: `chat.completion.chunk` objects as `data:` lines (reasoning steps in "
    "`delta.reasoning_content`, the answer in `delta.content`, `sleuth` on the last chunk), then `data: [DONE]`. "
    'If the server fails after the stream started: one `data: {"error": {...}}`, then `data: [DONE]`.',
    responses={
        200: {"content": {"text/event-stream": {"schema": {"type": "string"}}}, "description": "the completion"},
        **error_responses(401, 403, 404, 413, 422, 429, 504),
    },
)
async def chat_completions(body: ChatRequest, request: Request) -> Any:
    rt = runtime_of(request)
    own = {"k": body.k, "max_steps": body.max_steps, "max_tokens": body.max_completion_tokens or body.max_tokens}
    mode = "paper" if body.model.endswith(PAPER) else body.mode
    if mode is not None:
        own["mode"] = mode
    job = await new_run(
        rt,
        request,
        body,
        strategy=strategy_of(body.model),
        own=own,
        conversation=lambda: conversation_of(body),
        endpoint="/v1/chat/completions",
        param="model",
    )
    cid = "chatcmpl-" + job.trace_id
    created = int(time.time())
    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        chunks = _chunks(rt, job, cid, created, body.model, include_usage)
        return event_stream(
            rt, job, chunks, lambda: [ServerSentEvent(data=dumps(failure(job))), ServerSentEvent(data="[DONE]")]
        )
    result = await result_of(rt, job, request)
    reasoning = "\n".join(line for ev in result.trace.events if (line := step_line(ev)))
    message = {"role": "assistant", "content": answer_text(result), "reasoning_content": reasoning}
    choice = {"index": 0, "message": message, "finish_reason": openai_finish(result.finish_reason), "logprobs": None}
    return SafeJSONResponse(
        {
            **_head(cid, created, body.model, "chat.completion"),
            "choices": [choice],
            "usage": usage(result),
            "sleuth": sleuth_extra(result),
        },
        headers={"X-Sleuth-Trace-Id": job.trace_id},
    )


def _head(cid: str, created: int, model: str, obj: str) -> dict[str, Any]:
    return {"id": cid, "object": obj, "created": created, "model": model}


async def _chunks(
    rt: Runtime, job: Any, cid: str, created: int, model: str, include_usage: bool
) -> AsyncIterator[ServerSentEvent]:
    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> ServerSentEvent:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        return ServerSentEvent(
            data=dumps({**_head(cid, created, model, "chat.completion.chunk"), "choices": [choice], **extra})
        )

    yield chunk({"role": "assistant", "content": ""})
    async for item in stream_job(rt, job):
        if isinstance(item, Event):
            line = step_line(item)
            if line:
                yield chunk({"reasoning_content": line + "\n"})
        elif isinstance(item, Result):
            yield chunk({"content": answer_text(item)})
            yield chunk({}, openai_finish(item.finish_reason), sleuth=sleuth_extra(item))
            if include_usage:
                u = {**_head(cid, created, model, "chat.completion.chunk"), "choices": [], "usage": usage(item)}
                yield ServerSentEvent(data=json.dumps(u))
    yield ServerSentEvent(data="[DONE]")
