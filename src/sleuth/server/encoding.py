"""Everything the server writes can be sent: JSON bodies, stream events and stored traces.

A lone surrogate leaves as a JSON escape (other bodies are exactly ``json.dumps(..., ensure_ascii=False)``),
and a stream that fails after its headers ends with an error event (:func:`guard_stream`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from fastapi.responses import JSONResponse
from sse_starlette import ServerSentEvent

log = logging.getLogger("sleuth.server")
_SURROGATE = re.compile("[\ud800-\udfff]")


def dumps(obj: Any) -> str:
    """``json.dumps(obj, ensure_ascii=False, default=str)``, with any lone surrogate escaped."""
    text = json.dumps(obj, ensure_ascii=False, default=str)
    return json.dumps(obj, default=str) if _SURROGATE.search(text) else text


class SafeJSONResponse(JSONResponse):
    """Starlette's JSONResponse; a body holding a lone surrogate is sent with it escaped."""

    def render(self, content: Any) -> bytes:
        try:
            return super().render(content)
        except UnicodeEncodeError:
            return json.dumps(content, allow_nan=False, separators=(",", ":")).encode()


async def guard_stream(
    events: AsyncIterator[ServerSentEvent], on_error: Callable[[], Iterable[ServerSentEvent]], what: str
) -> AsyncIterator[bytes]:
    """The encoded events of ``events``; if making or encoding one fails, the failure is logged
    and the stream ends with the events of ``on_error()`` (an error event, ``[DONE]``...)."""
    try:
        async with contextlib.aclosing(events):  # type: ignore[type-var]
            async for ev in events:
                yield ev.encode()
    except Exception:
        log.exception("the stream of %s failed", what)
        for ev in on_error():
            yield ev.encode()
