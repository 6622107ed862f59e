"""The OpenAI wire format: request bodies, and completions read from response bodies (pure functions, no I/O)."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from typing import Any

import httpx

from sleuth.llm.base import Completion, GenParams, LLMBadResponse, Message, Usage
from sleuth.llm.stops import cut_at_stop

#: OpenAI accepts at most 4 stop strings; the rest are applied client-side
MAX_SERVER_STOPS = 4


def build_body(
    model: str,
    payload: str | Sequence[Message],
    params: GenParams,
    *,
    stream: bool,
    extra: dict[str, Any],
) -> dict[str, Any]:
    """The JSON body of one call; ``payload`` is a prompt (completion) or messages (chat).

    ``params`` must be resolved (no ``None`` but ``seed``).  Key order is part of
    the contract: bodies are byte-identical to those of earlier Sleuth versions.
    """
    body: dict[str, Any] = {}
    if model:
        body["model"] = model
    if isinstance(payload, str):
        body["prompt"] = payload
    else:
        body["messages"] = [dict(m) for m in payload]
    body["max_tokens"] = params.max_tokens
    body["temperature"] = params.temperature
    if params.seed is not None:
        body["seed"] = params.seed
    stops = [s for s in params.stop or () if s]
    if stops:
        body["stop"] = stops[:MAX_SERVER_STOPS]
    if params.schema:
        body["response_format"] = response_format(params.schema)
    if stream:
        body["stream"] = True
    body.update(extra)
    return body


def response_format(schema: dict[str, Any]) -> dict[str, Any]:
    """OpenAI's structured-output field for ``schema`` (llama.cpp's server turns it into a grammar); its name is
    the schema's ``title`` when that is a valid name, else ``answer``."""
    title = str(schema.get("title") or "")
    name = title if re.fullmatch(r"[A-Za-z0-9_-]{1,64}", title) else "answer"
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


def estimate_tokens(payload: str | Sequence[Message], params: GenParams) -> int:
    """Tokens a call may use, before it is made (prompt chars / 4 + ``max_tokens``)."""
    chars = len(payload) if isinstance(payload, str) else sum(len(m.get("content") or "") for m in payload)
    return chars // 4 + (params.max_tokens or 0)


def server_message(resp: httpx.Response) -> str:
    """A short error message from a JSON or text error body."""
    try:
        d = resp.json()
    except (ValueError, UnicodeDecodeError):
        text = resp.text if resp.content else ""
        return " ".join(text.split())[:200]
    if isinstance(d, dict):
        e = d.get("error", d)
        if isinstance(e, dict):
            return str(e.get("message") or e.get("msg") or e)[:200]
        return str(e)[:200]
    return str(d)[:200]


def parse_json(resp: httpx.Response, where: str) -> dict[str, Any]:
    """The body of a successful answer, checked to hold at least one choice."""
    try:
        data = resp.json()
    except (ValueError, UnicodeDecodeError) as e:
        snippet = " ".join(resp.text.split())[:120] if resp.content else "<empty body>"
        raise LLMBadResponse(
            f"{where} returned malformed JSON ({e.__class__.__name__}): {snippet!r}", status=resp.status_code
        ) from None
    if not isinstance(data, dict):
        raise LLMBadResponse(f"{where} returned JSON that is not an object", status=resp.status_code)
    if "error" in data and not data.get("choices"):
        raise LLMBadResponse(f"{where} returned an error: {server_message(resp)}", status=resp.status_code)
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise LLMBadResponse(f"{where} returned no choices", status=resp.status_code)
    return data


def completion_from(
    data: dict[str, Any], chat: bool, params: GenParams, t0: float, model: str, where: str
) -> Completion:
    """The :class:`Completion` in a checked body, cut at the stop strings."""
    ch = data["choices"][0]
    if chat:
        msg = ch.get("message")
        if not isinstance(msg, dict):
            raise LLMBadResponse(f"{where} returned a chat choice without a message")
        text = msg.get("content") or ""
    else:
        text = ch.get("text")
        if text is None:
            raise LLMBadResponse(f"{where} returned a completion choice without text")
    if not isinstance(text, str):
        raise LLMBadResponse(f"{where} returned non-text content")
    finish = ch.get("finish_reason") or "stop"
    text, cut = cut_at_stop(text, params.stop)
    if cut:
        finish = "stop"
    return Completion(
        text=text,
        finish_reason=str(finish),
        usage=usage_from(data),
        latency_s=time.perf_counter() - t0,
        model=model or str(data.get("model") or ""),
    )


def usage_from(data: dict[str, Any]) -> Usage:
    """Token usage from an OpenAI-style body, including cached prompt tokens.

    * ``usage.prompt_tokens_details.cached_tokens`` (OpenAI, vLLM, llama.cpp),
      ``usage.prompt_cache_hit_tokens`` (DeepSeek);
    * llama.cpp's ``timings.prompt_n`` (tokens actually evaluated) and
      ``timings.cache_n`` (tokens reused from the slot's KV cache).
    """
    u = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    t = data.get("timings") if isinstance(data.get("timings"), dict) else {}

    def _int(v: Any) -> int:
        try:
            return int(v or 0)
        except (TypeError, ValueError):
            return 0

    prompt = _int(u.get("prompt_tokens"))
    completion = _int(u.get("completion_tokens"))
    details = u.get("prompt_tokens_details") if isinstance(u.get("prompt_tokens_details"), dict) else {}
    cached = _int(details.get("cached_tokens")) or _int(u.get("prompt_cache_hit_tokens"))
    if t:
        if "cache_n" in t:
            cached = _int(t.get("cache_n"))
        processed = _int(t.get("prompt_n")) if "prompt_n" in t else max(0, prompt - cached)
        if not prompt:
            prompt = processed + cached
        if not completion:
            completion = _int(t.get("predicted_n"))
    else:
        processed = max(0, prompt - cached)
    return Usage(prompt, completion, cached, processed)
