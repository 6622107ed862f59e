"""Server configuration: one frozen object built by ``sleuth serve`` (or a test)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from pathlib import Path

#: shown beside the quick-start corpus (GET /v1/sources, the MCP sources tool) and printed at start
QUICKSTART_NOTE = (
    "the bundled quick-start corpus (Wikipedia passages), served because no --index was given; "
    "give --index DIR to ask over your own documents"
)


class ServerConfigError(ValueError):
    """A configuration the server refuses to start with (one clear sentence)."""


DEFAULT_MAX_BODY = 256 * 1024


@dataclass(frozen=True)
class ServerSettings:
    """Everything the app factory needs.

    ``sources`` maps a source name (what a request's ``index`` field selects) to the
    spec given to :func:`sleuth.search.open_retriever`; the first one is the default.
    ``api_keys`` are the accepted bearer tokens; none means no auth (loopback only).
    """

    host: str = "127.0.0.1"
    port: int = 8000
    sources: tuple[tuple[str, str], ...] = ()
    #: the name of the source that is the bundled quick-start corpus, served because no index was given
    quickstart_source: str | None = None
    model: str | None = None
    base_url: str | None = None
    #: extra model names a request may pick besides ``model`` (each is opened once, on first use)
    allowed_models: tuple[str, ...] = ()
    api_keys: tuple[str, ...] = field(default=(), repr=False)
    max_concurrency: int = 4
    timeout_s: float = 120.0
    max_body_bytes: int = DEFAULT_MAX_BODY
    #: seconds a client has to send a request's headers, and again its body (then 408 and the connection closes)
    read_timeout_s: float = 15.0
    #: traces kept per principal (its oldest go first), and bytes of traces kept in all
    trace_capacity: int = 256
    trace_max_bytes: int = 64 * 1024 * 1024
    #: a SQLite file for the traces (they then survive a restart); None keeps them in memory
    trace_db: str | None = None
    default_strategy: str = "self-ask"
    #: a principals file (TOML or JSON): each key/token bound to its widest scope (docs/server.md)
    principals: str | None = None
    #: the audit log (JSON lines, rotated); None: no audit log
    audit_log: str | None = None
    audit_max_bytes: int = 10 * 1024 * 1024
    audit_backups: int = 5
    #: write each run's question into the audit log too
    audit_questions: bool = False
    #: vectors from an embedding server (indexes built with one; default SLEUTH_EMBED_*)
    embed_model: str | None = None
    embed_base_url: str | None = None
    #: the rerank stage of every source: None (SLEUTH_RERANK_BASE_URL), "none", "llm" or a rerank server URL
    rerank: str | None = None
    rerank_model: str | None = None
    rerank_depth: int = 20

    def __post_init__(self) -> None:
        if self.max_concurrency < 1:
            raise ServerConfigError(f"max concurrency must be at least 1, not {self.max_concurrency}")
        if not self.timeout_s > 0:
            raise ServerConfigError(f"the request timeout must be positive, not {self.timeout_s}")
        if not 0 < self.read_timeout_s <= 3600:
            raise ServerConfigError(f"the read timeout must be between 0 and 3600 seconds, not {self.read_timeout_s}")
        if self.max_body_bytes < 1024:
            raise ServerConfigError(f"the body size limit must be at least 1024 bytes, not {self.max_body_bytes}")
        if self.trace_capacity < 1:
            raise ServerConfigError("the trace store must hold at least one trace")
        if any(not k or any(c.isspace() for c in k) for k in self.api_keys):
            raise ServerConfigError("an API key must be non-empty and contain no whitespace")
        if self.rerank_depth < 1:
            raise ServerConfigError(f"the rerank depth must be at least 1, not {self.rerank_depth}")
        names = [n for n, _ in self.sources]
        if len(set(names)) != len(names):
            raise ServerConfigError(f"two sources share a name: {names}")

    @property
    def source_names(self) -> list[str]:
        return [n for n, _ in self.sources]

    @property
    def models(self) -> list[str | None]:
        """The model a request gets by default, then the others it may ask for."""
        out: list[str | None] = [self.model]
        out += [m for m in self.allowed_models if m != self.model]
        return out

    def check_bind(self) -> None:
        """Refuse to listen beyond this machine without a key."""
        if not self.api_keys and not self.principals and not is_loopback(self.host):
            raise ServerConfigError(
                f"refusing to listen on {self.host} without an API key: set SLEUTH_SERVER_KEY, pass --api-key "
                "or --principals (or bind 127.0.0.1)"
            )


def is_loopback(host: str) -> bool:
    h = host.strip().strip("[]").lower()
    if h == "localhost":
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


def source_entry(spec: str) -> tuple[str, str]:
    """``NAME=PATH`` or ``PATH`` (named after the file or folder)."""
    name, sep, path = spec.partition("=")
    if sep and name and "/" not in name and not Path(spec).exists():
        return name.strip(), path.strip()
    p = Path(spec)
    return (p.stem if p.suffix else p.name) or spec, spec
