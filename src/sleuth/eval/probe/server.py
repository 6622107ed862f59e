"""The probe's model: a scripted, deterministic OpenAI-compatible server on 127.0.0.1.

It answers ``/v1/completions`` and ``/v1/chat/completions`` (plain JSON, or one SSE
chunk when ``stream`` is set) and ``/v1/models``, and records every request it
receives as ``(path, body)``.  The reply is a function of the request body alone
(never of arrival order, so concurrent batch runs get the same replies): a hash of
the body picks one of the canned replies below, which carry every strategy's
scaffold words in English and Chinese, so a probe run walks the strategies'
main branches (follow-ups, final answers, search queries, revisions, step-back
questions, missing answer lines).  A prompt that holds :data:`GIVE_UP_MARK` is
always answered with :data:`GIVE_UP` (the model gives up); one holding :data:`NEAR_QUERY_MARK`
walks a scripted pair of near search queries (:func:`near_queries`), one holding
:data:`RESTATE_MARK` a search whose facts restate the query (:func:`restated_query`), a chat
call holding :data:`RESTATED_SHORT_MARK` a short answer that repeats the question
(:func:`restated_short`).  Like a real server it cuts the reply at the first stop string and at
``max_tokens`` words.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: a word of the probe question the model cannot answer
GIVE_UP_MARK = "Zorblax"
GIVE_UP = "I do not know; I cannot answer this question."

#: a word of the batch-only probe question whose two searches differ by one character
#: ("冬奥会" / "冬残奥会"): its reasoning turns are scripted by :func:`near_queries`, so the probe
#: sees whether Search-o1's repeat guard takes the second search for a copy of the first
NEAR_QUERY_MARK = "冬残奥会"
_NEAR_QUERIES = ("北京 冬奥会 开幕日期", "北京 冬残奥会 开幕日期")


def near_queries(prompt: str) -> str:
    """The reasoning turn of the near-queries question: the first query, then the second, then the answer."""
    asked = [bool(re.search(re.escape(q) + r"\s*<\|end_search_query\|>", prompt)) for q in _NEAR_QUERIES]
    if asked[1]:
        return "最终答案：\\boxed{2022年2月4日、2022年3月4日}"
    q = _NEAR_QUERIES[1] if asked[0] else _NEAR_QUERIES[0]
    return f"我需要查一下。<|begin_search_query|>{q}<|end_search_query|>"


#: the batch-only English probe question whose Reason-in-Documents restates its query
#: ("Don Quixote is a comedy film." for "comedy film Don Quixote", the words spread over two
#: passages): the probe sees whether the grounding check's restated-query rule drops it
RESTATE_MARK = "The Million Dollar Duck or Don Quixote"
RESTATE_QUERY = "comedy film Don Quixote"


def restated_query(prompt: str) -> str:
    """The reasoning turn of the restated-query question: its one query, then the answer."""
    if re.search(re.escape(RESTATE_QUERY) + r"\s*<\|end_search_query\|>", prompt):
        return "Final answer: \\boxed{The Million Dollar Duck}"
    return f"Let me check which one is a comedy. <|begin_search_query|>{RESTATE_QUERY}<|end_search_query|>"


#: a word of the English probe question whose chat replies have no "So the answer is:" line and
#: whose short-answer call only repeats the question's subject (:func:`restated_short`): the probe
#: sees whether the short answer gives way to the reply's own words (strategies/answers.py)
RESTATED_SHORT_MARK = "Pak Sao"


def restated_short(text: str) -> str:
    """The chat reply for the restated-short question: the short-answer call gets the question's
    subject back, Step-back's answer call an abstention (so that its second reader, RAG's prompt,
    runs), every other call a cited sentence without an answer line."""
    if "The question asks for" in text:  # short_answer.txt
        return RESTATED_SHORT_MARK
    if "step-back question" in text:  # step_back_answer.txt (and the step-back question's own call)
        return "Answer: The documents do not answer the question.\nShort answer: unknown"
    return "Pak Sao trains for close range combat [1]."


#: replies to raw completions (Self-Ask and Search-o1 continue an append-only prompt), as
#: (tag, reply): a reply is a candidate when its tag occurs in the request (or is empty)
COMPLETION_REPLIES = (
    ("Follow up", " Yes.\nFollow up: Who directed Jaws?\nIntermediate answer: Steven Spielberg\n"),
    ("Follow up", " Follow up: Who was the father of Steven Spielberg?\n"),
    ("Follow up", " So the final answer is: Arnold Spielberg\n"),
    ("追问", "追问：《大白鲨》的导演是谁？\n中间答案：史蒂文·斯皮尔伯格\n"),
    ("追问", "所以最终答案是：阿诺德·斯皮尔伯格\n"),
    ("begin_search_query", "I should look this up. <|begin_search_query|>director of Jaws<|end_search_query|>"),
    ("begin_search_query", "我需要查一下。<|begin_search_query|>差旅费用报销期限<|end_search_query|>"),
    ("begin_search_query", "Based on the search, the answer is \\boxed{Arnold Spielberg}."),
    ("begin_search_query", "Final answer: 30 days\n"),
    ("", " Arnold Spielberg\n"),
    ("", "Let me think about it more.\n"),
)
#: replies to chat calls (CoT, RAG, RAT, Step-Back, Self-Ask's extraction, Reason-in-Documents)
CHAT_REPLIES = (
    (
        "So the answer is",
        "Jaws was directed by Steven Spielberg [1], whose father was Arnold Spielberg [2].\n"
        "So the answer is: Arnold Spielberg",
    ),
    ("So the answer is", "<short answer>"),
    ("所以答案是", "根据文档[1]，员工应在行程结束后30个自然日内提交报销申请。\n所以答案是：30个自然日"),
    ("Short answer", "Final answer: Arnold Spielberg was an electrical engineer [1].\nShort answer: Arnold Spielberg"),
    ("简短答案", "最终答案：阿诺德·斯皮尔伯格是一名电气工程师[1]。\n简短答案：电气工程师"),
    ("step-back question", "Step-back question: What are the general rules for reimbursing travel expenses?"),
    (
        "",
        "Step 1: Jaws was directed by Steven Spielberg.\n\nStep 2: His father was Arnold Spielberg.\n\n"
        "So the answer is: Arnold Spielberg",
    ),
    ("", "Query: father of Steven Spielberg"),
    ("", "Arnold Spielberg"),
    ("", "No helpful information found."),
    ("", "The documents do not say."),
)


def reply_for(path: str, body: dict[str, Any]) -> str:
    """The scripted reply to one request: a deterministic function of the request."""
    if "chat" in path:
        text = "\n".join(str(m.get("content", "")) for m in body.get("messages") or [])
        replies = CHAT_REPLIES
    else:
        text = str(body.get("prompt", ""))
        replies = COMPLETION_REPLIES
    if GIVE_UP_MARK in text:
        return GIVE_UP
    if NEAR_QUERY_MARK in text and replies is COMPLETION_REPLIES:
        return near_queries(text)
    if RESTATE_MARK in text and replies is COMPLETION_REPLIES:
        return restated_query(text)
    if RESTATED_SHORT_MARK in text and replies is CHAT_REPLIES:
        return restated_short(text)
    if RESTATE_QUERY in text and replies is CHAT_REPLIES:  # its Reason-in-Documents call
        return "Don Quixote is a comedy film. [1] The Million Dollar Duck is a 1971 American comedy film. [2]"
    candidates = [r for tag, r in replies if tag in text]
    digest = hashlib.sha256(canonical({"path": path, "body": body}).encode("utf-8")).digest()
    return candidates[int.from_bytes(digest[:4], "big") % len(candidates)]


def canonical(obj: Any) -> str:
    """Canonical JSON (sorted keys, no spaces, text as is): equal values, equal strings."""
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def shape(text: str, body: dict[str, Any]) -> tuple[str, str]:
    """Cut ``text`` at the first stop string and at ``max_tokens`` words; (text, finish reason)."""
    stops = body.get("stop") or []
    stops = [stops] if isinstance(stops, str) else list(stops)
    cuts = [i for i in (text.find(s) for s in stops if s) if i >= 0]
    if cuts:
        text = text[: min(cuts)]
    words = text.split(" ")
    limit = body.get("max_tokens")
    if isinstance(limit, int) and 0 < limit < len(words):
        return " ".join(words[:limit]), "length"
    return text, "stop"


class _Handler(BaseHTTPRequestHandler):
    server: ProbeServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return None

    def _send(self, obj: Any) -> None:
        data = json.dumps(obj).encode("utf-8")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._send({"object": "list", "data": [{"id": "probe", "object": "model"}]})

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.loads(raw or b"{}")
        path = self.path.split("?", 1)[0]
        self.server.record(path, body)
        text, finish = shape(reply_for(path, body), body)
        prompt_words = len(canonical(body.get("messages") or body.get("prompt") or "").split())
        usage = {"prompt_tokens": prompt_words, "completion_tokens": len(text.split()), "total_tokens": 0}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        chat = "chat" in path
        choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
        if chat:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        answer = {"id": "probe", "object": "chat.completion" if chat else "text_completion", "model": "probe"}
        if not body.get("stream"):
            self._send({**answer, "choices": [choice], "usage": usage})
            return
        if chat:
            choice["delta"] = choice.pop("message")
        chunk = {**answer, "choices": [choice], "usage": usage}
        data = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class ProbeServer(ThreadingHTTPServer):
    """Serve the scripted model on an ephemeral port of 127.0.0.1 in a daemon thread."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self.serve_forever, args=(0.01,), name="sleuth-probe-model", daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def record(self, path: str, body: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append((path, body))

    def take(self) -> list[tuple[str, dict[str, Any]]]:
        """The requests received since the last call, in arrival order."""
        with self._lock:
            out, self.requests = self.requests, []
        return out

    def __enter__(self) -> ProbeServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()
        self._thread.join(timeout=5)
