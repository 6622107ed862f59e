"""The audit log: one JSON line per run, per search without a run and per refused request, in a rotated file (0600).

The fields of each event are in docs/server.md.  The question is written only with ``audit_questions``; keys
and tokens never are.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import threading
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sleuth.kvcache import private_file
from sleuth.search.base import Filters
from sleuth.strategies.result import Result

log = logging.getLogger("sleuth.server")


def returned_ids(result: Result) -> list[str]:
    """Ids of every passage a result shows: its citations and its trace's search results."""
    ids = {p.id for p in result.citations}
    for ev in result.trace.events:
        passages = ev.data.get("passages") if isinstance(ev.data, dict) else None
        for p in passages or ():
            pid = p.get("id") if isinstance(p, dict) else getattr(p, "id", None)
            if pid:
                ids.add(str(pid))
    return sorted(ids)


class PrivateRotatingFileHandler(logging.handlers.RotatingFileHandler):
    """A rotating file whose every file (the live one, each one rotation starts) is created 0600
    whatever the umask: a refusal's reason or a configured question may quote restricted text."""

    def _open(self) -> Any:
        private_file(self.baseFilename)
        return super()._open()

    def rotate(self, source: str, dest: str) -> None:
        super().rotate(source, dest)
        if Path(dest).exists():
            private_file(dest)


class AuditLog:
    """Writes the lines through a :class:`~logging.handlers.RotatingFileHandler` of its own."""

    def __init__(self, path: str | Path, *, max_bytes: int = 10 * 1024 * 1024, backups: int = 5,
                 questions: bool = False) -> None:  # fmt: skip
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        self.path = p
        self.questions = questions
        self._logger = logging.getLogger(f"sleuth.audit.{uuid.uuid4().hex[:8]}")
        self._logger.propagate = False
        self._logger.setLevel(logging.INFO)
        self._handler = PrivateRotatingFileHandler(p, maxBytes=max_bytes, backupCount=backups,
                                                   encoding="utf-8")  # fmt: skip
        self._handler.setFormatter(logging.Formatter("%(message)s"))
        self._logger.addHandler(self._handler)
        self._lock = threading.Lock()

    def _write(self, record: dict[str, Any]) -> None:
        line = json.dumps({"time": datetime.now(UTC).isoformat(timespec="milliseconds"), **record},
                          ensure_ascii=False, default=str)  # fmt: skip
        try:
            with self._lock:
                self._logger.info(line)
        except Exception as e:  # the audit must never take a request down
            log.error("could not write the audit log %s: %s", self.path, e)

    def run(self, *, principal: Any, scope: Filters, job: Any, result: Result) -> None:
        try:
            record: dict[str, Any] = {
                "event": "run",
                "principal": principal.name,
                "kind": principal.kind,
                "scope": scope.to_dict(),
                "strategy": job.strategy,
                "source": job.source,
                "endpoint": job.endpoint,
                "stream": job.stream,
                "trace_id": job.trace_id,
                "passage_ids": returned_ids(result),
                "outcome": result.finish_reason,
            }
            if self.questions:
                record["question"] = job.question
        except Exception as e:  # the audit must never take a run down
            log.error("could not write the audit log %s: %s", self.path, e)
            return
        self._write(record)

    def searched(self, *, principal: Any, scope: Filters, source: str | None, endpoint: str,
                 passage_ids: list[str]) -> None:  # fmt: skip
        """A search without a run (the MCP ``search`` tool): the passages it showed."""
        self._write({"event": "search", "principal": principal.name, "kind": principal.kind,
                     "scope": scope.to_dict(), "source": source, "endpoint": endpoint,
                     "passage_ids": sorted(set(passage_ids))})  # fmt: skip

    def denied(self, *, status: int, path: str, reason: str, principal: Any = None) -> None:
        self._write(
            {
                "event": "denied",
                "status": status,
                "principal": principal.name if principal is not None else None,
                "kind": principal.kind if principal is not None else None,
                "path": path,
                "reason": reason,
            }
        )

    def close(self) -> None:
        self._logger.removeHandler(self._handler)
        self._handler.close()


def open_audit(settings: Any) -> AuditLog | None:
    if not settings.audit_log:
        return None
    return AuditLog(settings.audit_log, max_bytes=settings.audit_max_bytes, backups=settings.audit_backups,
                    questions=settings.audit_questions)  # fmt: skip
