"""The embedded model: llama.cpp's own OpenAI-compatible server (``xllamacpp``) on 127.0.0.1, spoken to with
:class:`~sleuth.llm.client.OpenAICompatLLM`, prompt cache on.

Modes ``subprocess`` (default; the child exits when its stdin closes) and ``inprocess`` (can deadlock if
stopped with a request in flight); docs/llm.md says why.  ``OMP_WAIT_POLICY=PASSIVE`` is set before the
engine loads.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from sleuth.config import settings
from sleuth.llm.base import LLMUnavailable
from sleuth.llm.models import EmbeddedModel, ensure_model, get_model
from sleuth.llm.settings import embedded_mode
from sleuth.llm.settings import threads as _threads

#: context tokens per slot
DEFAULT_CTX_SIZE = 8192


def _import_engine() -> Any:
    settings.set_default("OMP_WAIT_POLICY", "PASSIVE")  # before the import: OpenMP reads it at load time
    try:
        import xllamacpp
    except ImportError as e:
        raise LLMUnavailable(
            "The embedded engine is not installed: pip install 'sleuth[local]' (xllamacpp), "
            "or point SLEUTH_LLM_BASE_URL at an OpenAI-compatible server."
        ) from e
    return xllamacpp


def _build_params(
    xlc: Any, *, path: str, alias: str, n_parallel: int, ctx_size: int, threads: int, slot_dir: str | None = None
) -> Any:
    """Engine parameters; ``slot_dir`` makes the server *isolatable* (see :meth:`EmbeddedServer.erase_slots`)."""
    p = xlc.CommonParams()
    p.model.path = path
    p.port = 0  # the OS picks a free port
    p.hostnames = ["127.0.0.1"]
    p.n_parallel = n_parallel
    p.n_ctx = ctx_size * n_parallel  # llama.cpp splits n_ctx across slots
    p.cpuparams.n_threads = threads
    p.cpuparams_batch.n_threads = threads
    p.cache_prompt = True
    p.cont_batching = True
    p.verbosity = -1  # quiet: llama.cpp logs every request otherwise
    p.warmup = False
    p.endpoint_slots = False
    p.endpoint_metrics = True
    if slot_dir is not None:
        # isolatable: no host-memory prompt cache (it would bring back other requests' KV
        # after an erase) and the /slots endpoint, whose erase action needs a save path
        p.cache_ram_mib = 0
        p.endpoint_slots = True
        p.slot_save_path = slot_dir
    with contextlib.suppress(Exception):
        p.model_alias = {alias}
    return p


@dataclass(frozen=True)
class _Key:
    path: str
    n_parallel: int
    ctx_size: int
    threads: int
    mode: str
    isolated: bool = False


class EmbeddedServer:
    """One running llama.cpp server for one model file.

    Use :func:`get_server` to share one per process; this class is for callers
    that need an instance of their own (benchmarks).
    """

    def __init__(
        self,
        model: str | EmbeddedModel | Path,
        *,
        n_parallel: int = 1,
        ctx_size: int = DEFAULT_CTX_SIZE,
        threads: int | None = None,
        cache_dir: str | Path | None = None,
        mode: str | None = None,
        start_timeout: float = 300.0,
        isolated: bool = False,
    ) -> None:
        if isinstance(model, Path):
            self.path = model
            self.name = model.stem
        else:
            m = get_model(model) if isinstance(model, str) else model
            self.name = m.name
            self.path = ensure_model(m, cache_dir)
            ctx_size = min(ctx_size, m.n_ctx_train)
        self.n_parallel = max(2 if isolated else 1, int(n_parallel))  # see get_server
        self.ctx_size = int(ctx_size)
        self.threads = _threads(threads)
        self.mode = embedded_mode(mode)
        if self.mode not in ("inprocess", "subprocess"):
            raise ValueError(f"embedded mode must be 'inprocess' or 'subprocess', not {self.mode!r}")
        self.start_timeout = start_timeout
        #: requests can be isolated from each other's KV cache (:meth:`erase_slots`)
        self.isolated = bool(isolated)
        self._slot_dir: tempfile.TemporaryDirectory[str] | None = None
        self.base_url: str | None = None
        self.load_s: float = 0.0
        self._server: Any = None
        self._proc: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"EmbeddedServer({self.name!r}, base_url={self.base_url!r}, mode={self.mode!r}, n_parallel={self.n_parallel})"

    @property
    def pid(self) -> int | None:
        """Process id serving the model (the child's in ``subprocess`` mode)."""
        if self._proc is not None:
            return self._proc.pid
        return os.getpid() if self._server is not None else None

    @property
    def running(self) -> bool:
        return self.base_url is not None

    def start(self) -> EmbeddedServer:
        """Load the model and start serving (idempotent); health-checked."""
        with self._lock:
            if self.base_url is not None:
                return self
            t0 = time.perf_counter()
            if self.isolated and self._slot_dir is None:
                self._slot_dir = tempfile.TemporaryDirectory(prefix="sleuth-slots-")
            spec = {  # the engine's settings, also the subprocess's one argument (as JSON)
                "path": str(self.path),
                "alias": self.name,
                "n_parallel": self.n_parallel,
                "ctx_size": self.ctx_size,
                "threads": self.threads,
                "slot_dir": self._slot_dir.name if self._slot_dir is not None else None,
            }
            if self.mode == "inprocess":
                xlc = _import_engine()
                try:
                    self._server = xlc.Server(_build_params(xlc, **spec))
                except Exception as e:  # the engine reports load failures as RuntimeError
                    raise LLMUnavailable(f"The embedded engine could not load {self.path.name}: {e}") from e
                url = str(self._server.listening_address).rstrip("/")
            else:
                url = self._start_subprocess(spec)
            try:
                _wait_healthy(url, self.start_timeout)
            except LLMUnavailable:
                self._shutdown()
                raise
            self.base_url = url
            self.load_s = time.perf_counter() - t0
            return self

    def erase_slots(self) -> int:
        """Wipe every slot's KV cache so that the next request is computed from scratch (a reused prefix can
        flip a greedy token: docs/llm.md); returns the number of tokens erased.
        """
        if not self.isolated:
            raise LLMUnavailable("this embedded server was not started with isolated=True; it cannot erase its slots")
        if self.base_url is None:
            return 0
        erased = 0
        for i in range(self.n_parallel):
            r = httpx.post(f"{self.base_url}/slots/{i}", params={"action": "erase"}, timeout=60)
            if r.status_code != 200:
                raise LLMUnavailable(
                    f"erasing slot {i} of the embedded server failed: HTTP {r.status_code} {r.text[:200]}"
                )
            erased += int(r.json().get("n_erased", 0))
        return erased

    def _start_subprocess(self, spec: dict[str, Any]) -> str:
        env_ = settings.environ()
        env_.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        cmd = [sys.executable, "-m", "sleuth.llm.embedded", json.dumps(spec)]
        self._proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env_
        )
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline().strip()
        if not line.startswith("http"):
            self._shutdown()
            raise LLMUnavailable(f"The embedded engine subprocess failed to start for {self.path.name}.")
        return line.rstrip("/")

    def _shutdown(self) -> None:
        if self._server is not None:
            srv, self._server = self._server, None
            del srv  # xllamacpp stops the HTTP server and frees the model in its destructor
            gc.collect()
        if self._proc is not None:
            proc, self._proc = self._proc, None
            with contextlib.suppress(Exception):
                assert proc.stdin is not None
                proc.stdin.close()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.terminate()
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()

    def stop(self) -> None:
        """Stop serving and free the model (idempotent)."""
        with self._lock:
            self._shutdown()
            self.base_url = None
            if self._slot_dir is not None:
                with contextlib.suppress(Exception):
                    self._slot_dir.cleanup()
                self._slot_dir = None

    def __enter__(self) -> EmbeddedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _wait_healthy(url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    last = ""
    with httpx.Client(timeout=5.0) as c:
        while time.monotonic() < deadline:
            try:
                r = c.get(url + "/health")
                if r.status_code == 200:
                    return
                last = f"HTTP {r.status_code}"
            except httpx.HTTPError as e:
                last = type(e).__name__
            time.sleep(0.1)
    raise LLMUnavailable(f"The embedded server at {url} did not become healthy within {timeout:.0f}s ({last}).")


_servers: dict[_Key, EmbeddedServer] = {}
_servers_lock = threading.Lock()


def get_server(
    model: str | EmbeddedModel,
    *,
    n_parallel: int = 1,
    ctx_size: int = DEFAULT_CTX_SIZE,
    threads: int | None = None,
    cache_dir: str | Path | None = None,
    mode: str | None = None,
    isolated: bool = False,
) -> EmbeddedServer:
    """The process-wide running server for these settings, started on first use; ``isolated``: one whose KV
    cache can be wiped between tasks (:meth:`EmbeddedServer.erase_slots`), with at least two slots.
    """
    m = get_model(model) if isinstance(model, str) else model
    path = ensure_model(m, cache_dir)
    mode_ = embedded_mode(mode)
    # an isolated server has no host-memory prompt cache, so it keeps two slots at least: two
    # interleaved prompt lineages (Self-Ask's scaffold and its extraction calls, Search-o1's
    # reasoning and Reason-in-Documents) then each keep their own KV cache between calls
    slots = max(2 if isolated else 1, n_parallel)
    key = _Key(str(path), slots, min(ctx_size, m.n_ctx_train), _threads(threads), mode_, bool(isolated))
    with _servers_lock:
        srv = _servers.get(key)
        if srv is None:
            srv = EmbeddedServer(
                m,
                n_parallel=key.n_parallel,
                ctx_size=key.ctx_size,
                threads=key.threads,
                cache_dir=cache_dir,
                mode=mode_,
                isolated=key.isolated,
            )
            _servers[key] = srv
    return srv.start()


def _stop_where(match: Callable[[EmbeddedServer], bool]) -> int:
    """Stop and forget the shared servers ``match`` picks; returns how many."""
    with _servers_lock:
        servers = [_servers.pop(k) for k, s in list(_servers.items()) if match(s)]
    for s in servers:
        with contextlib.suppress(Exception):
            s.stop()
    return len(servers)


def stop_model(model: str) -> int:
    """Stop the shared servers of one embedded model (by registry name); returns how many."""
    return _stop_where(lambda s: s.name == model)


def stop_server(base_url: str) -> bool:
    """Stop the shared server listening at ``base_url`` (e.g. ``get_llm(...).base_url``)."""
    url = base_url.rstrip("/").removesuffix("/v1")
    return bool(_stop_where(lambda s: s.base_url == url))


def stop_all() -> None:
    """Stop every server started through :func:`get_server` (also run at exit)."""
    _stop_where(lambda s: True)


atexit.register(stop_all)


def _child_main(argv: list[str] | None = None) -> None:
    """Entry point of the ``subprocess`` mode (``python -m sleuth.llm.embedded SPEC``, the settings as JSON):
    serve until stdin closes."""
    spec = json.loads((argv if argv is not None else sys.argv[1:])[0])
    xlc = _import_engine()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group: the parent decides
    server = xlc.Server(_build_params(xlc, **spec))
    print(str(server.listening_address), flush=True)
    sys.stdin.read()  # returns when the parent closes the pipe or dies
    # no destructor: with a request in flight it blocks (it joins the HTTP thread); the OS frees the engine
    os._exit(0)


if __name__ == "__main__":
    _child_main()
