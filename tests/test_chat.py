"""``sleuth chat`` as people use it: a separate process in a pseudo-terminal, over policy_zh, a real
index and a real OpenAI-compatible HTTP server on 127.0.0.1 (scripted answers, so it takes seconds)."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from fake_openai_server import FakeOpenAIServer
from serverkit import policy_model

ROOT = Path(__file__).resolve().parents[1]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\r")


class Terminal:
    """A process on a pseudo-terminal: what it printed so far (colours stripped), keys typed into it."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave, cwd=ROOT, env=env,
                                     start_new_session=True)  # fmt: skip
        os.close(slave)
        self.out = ""
        self.pos = 0  # where the next read_until starts looking

    def read_until(self, text: str, timeout: float = 60) -> str:
        """Wait for ``text`` after what earlier calls matched; returns the output up to and including it."""
        end = time.monotonic() + timeout
        while text not in self.out[self.pos :]:
            left = end - time.monotonic()
            if left <= 0:
                raise AssertionError(f"never printed {text!r}; got:\n{self.out[-3000:]}")
            ready, _, _ = select.select([self.master], [], [], min(left, 0.5))
            if ready:
                try:
                    chunk = os.read(self.master, 65536)
                except OSError:  # the process is gone
                    chunk = b""
                if not chunk and self.proc.poll() is not None:
                    raise AssertionError(f"exited ({self.proc.returncode}) before {text!r}:\n{self.out[-3000:]}")
                self.out += ANSI.sub("", chunk.decode("utf-8", "replace"))
        start, self.pos = self.pos, self.out.index(text, self.pos) + len(text)
        return self.out[start : self.pos]

    def type(self, line: str) -> None:
        os.write(self.master, (line + "\n").encode())

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        os.close(self.master)


@pytest.fixture
def terminal(data_dir: Path, tmp_path: Path):
    with FakeOpenAIServer(script=policy_model()) as srv:
        env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", PYTHONUNBUFFERED="1", COLUMNS="200",
                   SLEUTH_HOME=str(tmp_path / "home"), XDG_CACHE_HOME=str(tmp_path / "cache"))  # fmt: skip
        args = [sys.executable, "-m", "sleuth", "chat", "--strategy", "rag", "--corpus",
                str(data_dir / "policy_zh" / "corpus.jsonl"), "--filter", "version=2025", "--filter", "acl=all",
                "--base-url", srv.base_url + "/v1", "--model", "fake"]  # fmt: skip
        t = Terminal(args, env)
        try:
            yield t, srv
        finally:
            t.close()


def test_a_follow_up_in_the_terminal_uses_the_conversation(terminal) -> None:
    t, srv = terminal

    def say(line: str) -> str:
        """Type a line; what the chat printed until its next prompt."""
        t.type(line)
        return t.read_until("you>")

    t.read_until("you>")
    assert "行程结束后30个自然日内" in say("国内出差的报销期限是多久？")
    out = say("那出境的呢？")
    assert "follow-up read as 境外出差的报销期限是多久？" in out and "回国后60个自然日内" in out
    assert "trv-ovs-2025-01" in out and out.count("─ answer ─") == 1  # cited in the answer's table
    rewrite = [r["body"] for r in srv.requests if "完整问题" in str(r["body"])]
    assert len(rewrite) == 1, "one rewrite call, for the follow-up only"
    assert "用户：国内出差的报销期限是多久？" in rewrite[0]["messages"][0]["content"]
    assert "境外差旅费用管理细则" in say("/sources")
    assert "unknown strategy" in say("/strategy nope")
    assert "strategy: direct (the conversation goes on)" in say("/strategy direct")
    assert "a new conversation" in say("/new")
    assert "strategy: rag" in say("/strategy rag")
    n = len(srv.requests)
    out = say("那出境的呢？")  # no history after /new: no rewrite call, the message searched as it is
    assert "不知道" in out and "follow-up read as" not in out
    assert not any("完整问题" in str(r["body"]) for r in srv.requests[n:])
    os.kill(t.proc.pid, signal.SIGINT)  # Ctrl-C at the prompt leaves cleanly
    out = t.read_until("bye")
    assert t.proc.wait(30) == 0
    assert "Traceback" not in t.out


def test_ctrl_c_during_an_answer_stops_it_and_the_chat_goes_on(data_dir: Path, tmp_path: Path) -> None:
    def slow(body: dict[str, Any]) -> str:
        time.sleep(30)
        return "x"

    with FakeOpenAIServer(script=slow) as srv:
        env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", PYTHONUNBUFFERED="1", COLUMNS="200")
        t = Terminal([sys.executable, "-m", "sleuth", "chat", "--strategy", "direct", "--base-url",
                      srv.base_url + "/v1", "--model", "fake"], env)  # fmt: skip
        try:
            t.read_until("you>")
            t.type("Who wrote Hamlet?")
            time.sleep(1.5)
            os.kill(t.proc.pid, signal.SIGINT)
            t.read_until("stopped")
            t.read_until("you>")
            t.type("/quit")
            out = t.read_until("bye")
            assert t.proc.wait(30) == 0 and "Traceback" not in out
        finally:
            t.close()
