"""The "那出境的呢？" conversation over policy_zh on every surface, with a real model.

Turn 1 asks the domestic reimbursement deadline; turn 2 is "那出境的呢？" ("and abroad?").  Searched
on its own it finds nothing; with the conversation it must be read as the overseas question and
answered with the overseas clause (回国后60个自然日内, ``trv-ovs-2025-01``).  This script starts
``sleuth serve`` over policy_zh (the embedded default model unless ``--model``/``--base-url``) and
asks turn 2 through the OpenAI SDK (/v1/chat/completions), /v1/ask (``history``), the MCP ``ask``
tool (``history``, over /mcp), the web page in headless Chromium, and ``sleuth chat`` in a
pseudo-terminal, printing for each the question as rewritten, the answer and the cited ids.

    python benchmarks/follow_up_surfaces.py [--model NAME] [--base-url URL] [--strategy rag]

Exit status 0 when every surface answered with the overseas clause.  The LLM response cache is on
(the default), so a prompt already answered (the same rewrite on two surfaces) is not paid twice;
the cache key is the whole prompt, so the answer is the one the model gave to that prompt.
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import re
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("SLEUTH_DATA_DIR", ROOT.parent / "shared" / "data")) / "policy_zh" / "corpus.jsonl"
FIRST, FOLLOW = "国内出差的报销期限是多久？", "那出境的呢？"
SCOPE = ["version=2025", "acl=all"]
EXPECT = "60"  # 回国后60个自然日内 (the overseas clause); the domestic answer is 30
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\r")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def report(surface: str, rewritten: str, answer: str, cited: list[str], t0: float) -> bool:
    ok = EXPECT in answer and "trv-ovs-2025-01" in " ".join(cited)
    print(f"## {surface}: {'ok' if ok else 'NOT the overseas clause'} ({time.monotonic() - t0:.0f} s)")
    print(f"   read as: {rewritten}")
    print(f"   answer:  {' '.join(answer.split())[:300]}")
    print(f"   cited:   {', '.join(cited)}")
    return ok


def openai_sdk(url: str, strategy: str) -> tuple[bool, str]:
    from openai import OpenAI

    t0 = time.monotonic()
    client = OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=1800)
    messages: list[dict[str, Any]] = [{"role": "user", "content": FIRST}]
    first = client.chat.completions.create(model=f"sleuth-{strategy}", messages=messages,
                                           extra_body={"filters": SCOPE})  # fmt: skip
    answer1 = first.choices[0].message.content
    print(f"## turn 1 (OpenAI SDK): {' '.join(answer1.split())[:300]}")
    messages += [{"role": "assistant", "content": answer1}, {"role": "user", "content": FOLLOW}]
    second = client.chat.completions.create(model=f"sleuth-{strategy}", messages=messages,
                                            extra_body={"filters": SCOPE})  # fmt: skip
    steps = second.choices[0].message.model_extra["reasoning_content"].splitlines()
    read = next((s.split(": ", 1)[1] for s in steps if s.startswith("Follow-up read as")), "(no rewrite)")
    cited = [c["id"] for c in second.model_extra["sleuth"]["citations"]]
    return report("OpenAI SDK /v1/chat/completions", read, second.choices[0].message.content, cited, t0), answer1


def ask(url: str, strategy: str, history: list[dict[str, str]]) -> bool:
    t0 = time.monotonic()
    r = httpx.post(url + "/v1/ask", json={"question": FOLLOW, "history": history, "filters": SCOPE,
                                          "strategy": strategy}, timeout=1800).json()  # fmt: skip
    read = next((e["data"]["question"] for e in r["trace"] if e["kind"] == "rewrite"), "(no rewrite)")
    return report("/v1/ask", read, r["answer"], [c["id"] for c in r["citations"]], t0)


def mcp(url: str, strategy: str, history: list[dict[str, str]]) -> bool:
    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    t0 = time.monotonic()
    out: dict[str, Any] = {}
    steps: list[str] = []

    async def progress(n: float, total: float | None, message: str | None) -> None:
        steps.append(message or "")

    async def main() -> None:
        async with (
            httpx2.AsyncClient(timeout=httpx2.Timeout(1800)) as hc,
            Client(streamable_http_client(url + "/mcp", http_client=hc)) as c,
        ):
            r = await c.call_tool("ask", {"question": FOLLOW, "history": history, "filters": SCOPE,
                                          "strategy": strategy}, progress_callback=progress)  # fmt: skip
            out.update(r.structured_content or json.loads(r.content[0].text))

    anyio.run(main)
    read = next((s.removeprefix("rewrite: ") for s in steps if s.startswith("rewrite: ")), "(no rewrite)")
    return report("MCP ask", read, out.get("answer", ""), [c["id"] for c in out.get("citations", [])], t0)


def page(url: str, strategy: str) -> bool:
    from playwright.sync_api import sync_playwright

    t0 = time.monotonic()
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--headless", "--no-sandbox"])
        pg = b.new_page(viewport={"width": 1280, "height": 900})
        pg.goto(url + "/")
        pg.wait_for_selector("#strategy option", state="attached")
        pg.get_by_label("Strategy").select_option(strategy)
        pg.get_by_label("Scope filters").fill(" ".join(SCOPE))
        for n, q in ((1, FIRST), (2, FOLLOW)):
            pg.get_by_label("Question").fill(q)
            pg.get_by_label("Question").press("Control+Enter")
            pg.wait_for_selector(f"#turn{n} article[aria-busy='false']", timeout=1_800_000)
        turn = pg.locator("#turn2")
        read = turn.locator(".step-rewrite q").inner_text() if turn.locator(".step-rewrite").count() else "(none)"
        answer = turn.locator(".answer").inner_text()
        # the passage ids, from each citation's provenance (closed <details>: read the text content)
        cited = [t for t in turn.locator(".citations dd").all_text_contents() if "#" in t]
        (ROOT / "test-artifacts").mkdir(exist_ok=True)
        pg.screenshot(path=str(ROOT / "test-artifacts" / "follow-up-page.png"), full_page=True)
        b.close()
    return report("web page (Chromium)", read, answer, cited, t0)


def chat(args: argparse.Namespace) -> bool:
    t0 = time.monotonic()
    cmd = [sys.executable, "-m", "sleuth", "chat", "--strategy", args.strategy, "--corpus", str(CORPUS),
           *[x for f in SCOPE for x in ("--filter", f)], *(["--model", args.model] if args.model else []),
           *(["--base-url", args.base_url] if args.base_url else [])]  # fmt: skip
    master, slave = pty.openpty()
    env = dict(os.environ, COLUMNS="220", PYTHONUNBUFFERED="1", OMP_WAIT_POLICY="PASSIVE")
    proc = subprocess.Popen(cmd, stdin=slave, stdout=slave, stderr=slave, cwd=ROOT, env=env, start_new_session=True)
    os.close(slave)
    out = ""

    def until(text: str, since: int) -> int:
        nonlocal out
        end = time.monotonic() + 900
        while text not in out[since:]:
            if time.monotonic() > end or proc.poll() is not None:
                raise RuntimeError(f"sleuth chat never printed {text!r}:\n{out[-3000:]}")
            if select.select([master], [], [], 0.5)[0]:
                out += ANSI.sub("", os.read(master, 65536).decode("utf-8", "replace"))
        return out.index(text, since) + len(text)

    try:
        pos = until("you>", 0)
        os.write(master, (FIRST + "\n").encode())
        pos = until("you>", pos)
        os.write(master, (FOLLOW + "\n").encode())
        start, pos = pos, until("you>", pos)
        os.kill(proc.pid, signal.SIGINT)
        until("bye", pos)
        proc.wait(60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        os.close(master)
    turn = out[start:pos]
    read = re.search(r"follow-up read as (.+)", turn)
    answer = turn.split("─ answer ─", 1)[-1]
    cited = re.findall(r"trv-[\w-]+#\d+|fin-[\w-]+#\d+", answer)
    print(f"   (sleuth chat exit status {proc.returncode})")
    return report("sleuth chat (pty)", read.group(1).strip() if read else "(none)", answer, cited, t0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None)
    ap.add_argument("--base-url", default=None)
    ap.add_argument("--strategy", default="rag")
    ap.add_argument("--only", default="sdk,ask,mcp,page,chat")
    args = ap.parse_args()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "sleuth", "serve", "--port", str(port), "--corpus", f"policy={CORPUS}",
           "--timeout", "1800", *(["--model", args.model] if args.model else []),
           *(["--base-url", args.base_url] if args.base_url else [])]  # fmt: skip
    (ROOT / "test-artifacts").mkdir(exist_ok=True)
    log = ROOT / "test-artifacts" / "follow-up-serve.log"
    with log.open("w") as f:  # the server's own output, for when a surface fails
        server = subprocess.Popen(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT)
    only = set(args.only.split(","))
    results = []
    try:
        for _ in range(600):
            try:
                if httpx.get(url + "/healthz", timeout=2).json().get("status") == "ok":
                    break
            except httpx.HTTPError:
                pass
            time.sleep(1)
        ok, answer1 = openai_sdk(url, args.strategy)
        results.append(ok)
        history = [{"role": "user", "content": FIRST}, {"role": "assistant", "content": answer1}]
        if "ask" in only:
            results.append(ask(url, args.strategy, history))
        if "mcp" in only:
            results.append(mcp(url, args.strategy, history))
        if "page" in only:
            results.append(page(url, args.strategy))
    finally:
        server.terminate()
        server.wait(60)
    if "chat" in only:
        results.append(chat(args))
    print(f"{sum(results)} of {len(results)} surfaces answered with the overseas clause")
    return 0 if all(results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
