"""Helpers for the server tests: run a real uvicorn server on 127.0.0.1 (random port)
in a thread, and parse Server-Sent Events from a streamed response."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import uvicorn


@contextlib.contextmanager
def running(app: Any) -> Iterator[str]:
    """Serve ``app`` on 127.0.0.1 with a random port; yields the base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 600
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the server thread died while starting")
        if time.monotonic() > deadline:
            raise RuntimeError("the server did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


def sse_events(response: httpx.Response) -> Iterator[tuple[str, Any]]:
    """(event name, decoded data) for each event of a streamed response, as it arrives."""
    name, data = "message", []
    for line in response.iter_lines():
        if line == "":
            if data:
                payload = "\n".join(data)
                yield name, (payload if payload == "[DONE]" else json.loads(payload))
            name, data = "message", []
        elif line.startswith(":"):
            continue
        elif line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))


def policy_model(delay_s: float = 0.0) -> Any:
    """A scripted model for follow-ups over policy_zh (the fake server's ``script``): it rewrites
    "那出境的呢？" from its history into the overseas question and answers from the documents it is
    shown; ``delay_s`` per call, so a page can be watched mid-run."""

    def reply(body: dict[str, Any]) -> str:
        time.sleep(delay_s)
        text = "\n".join(str(m.get("content", "")) for m in body.get("messages") or [])
        if text.rstrip().endswith("完整问题："):
            last = text.rsplit("最后的问题：", 1)[1]
            return "境外出差的报销期限是多久？" if "出境" in last else last.strip().split("\n")[0]
        if "回国后60个自然日" in text and "境外出差的报销期限" in text:
            return "境外出差人员应在回国后60个自然日内提交报销申请[1]。\n所以答案是：回国后60个自然日内"
        if "30个自然日" in text and "国内出差" in text:
            return "员工应在行程结束后30个自然日内提交报销申请[1]。\n所以答案是：行程结束后30个自然日内"
        return "文档中没有相关规定。\n所以答案是：不知道"

    return reply
