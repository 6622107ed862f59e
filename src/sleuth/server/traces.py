"""A bounded in-memory store of finished runs, each readable only by its owner.

The owner of a trace is the pair (API key that asked, canonical scope the run had).
A read with another key or another scope gets nothing, exactly as if the trace
did not exist, so neither answers nor the existence of a run leak across scopes.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Any


class TraceStore:
    def __init__(self, capacity: int = 256, max_bytes: int = 64 * 1024 * 1024) -> None:
        self.capacity = capacity
        self.max_bytes = max_bytes
        self._items: OrderedDict[str, tuple[tuple[str, str], dict[str, Any], int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def put(self, trace_id: str, owner: tuple[str, str], result: dict[str, Any]) -> None:
        size = len(json.dumps(result, ensure_ascii=False, default=str))
        if size > self.max_bytes:
            return  # one giant run must not evict everything else
        with self._lock:
            old = self._items.pop(trace_id, None)
            if old is not None:
                self._bytes -= old[2]
            self._items[trace_id] = (owner, result, size)
            self._bytes += size
            while len(self._items) > self.capacity or self._bytes > self.max_bytes:
                _, (_, _, sz) = self._items.popitem(last=False)
                self._bytes -= sz

    def get(self, trace_id: str, owner: tuple[str, str]) -> dict[str, Any] | None:
        with self._lock:
            item = self._items.get(trace_id)
            if item is None or item[0] != owner:
                return None
            return item[1]

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    @property
    def nbytes(self) -> int:
        return self._bytes
