"""Bad text in requests (issue 33): lone surrogates, NUL and other control characters through
every door - the Python API, the CLI, the HTTP API (plain and streamed, on one kept-alive
connection, as real clients send them) - and a property test that sends arbitrary Unicode
strings, surrogates included, to every text field of every endpoint.  Expected everywhere: a
4xx JSON error naming the field (or one CLI sentence), never a 500, a reset connection or a
torn stream, and the server keeps serving.  Output side: text the server did not get from the
request (a model's answer holding a lone surrogate) still leaves as valid JSON, and a failure
after a stream started ends with an error event and a proper end of stream."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import openai
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as hs

from serverkit import running, sse_events
from sleuth.search.base import FilterError, Filters
from sleuth.server import ServerSettings, create_app
from sleuth.strategies import BAD_INPUT, BadQuestion, get_strategy
from sleuth.strategies.base import RunState, Strategy
from sleuth.strategies.search_o1 import SearchO1
from sleuth.text_input import BadText, check_text, check_tree, text_problem

from .conftest import ALL_STRATEGIES, TALLY, ScriptedModel, fast_client

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
#: each kind of refused text, with what its message must say
BAD_TEXTS: dict[str, tuple[str, str]] = {
    "lone high surrogate": (
        "\U000103ff\ud800 abc",
        "lone surrogate U+D800 at position 1",
    ),  # JSON "\\ud800\\udfff\\ud800 abc"
    "lone low surrogate": ("abc \udc80 def", "lone surrogate U+DC80 at position 4"),
    "half an emoji": ("smile \ud83d", "lone surrogate U+D83D at position 6"),
    "NUL": ("\x00", "NUL (U+0000) at position 0"),
    "NUL inside": ("who is\x00this", "NUL (U+0000) at position 6"),
    "escape": ("\x1b[31mred\x1b[0m?", "U+001B at position 0"),
    "DEL": ("a\x7fb", "U+007F at position 1"),
    "C1 control": ("a\x85b", "U+0085 at position 1"),
}


# ------------------------------------------------------------------ one place: sleuth.text_input
def test_check_text_names_field_kind_and_position(tally) -> None:
    for label, (text, expect) in BAD_TEXTS.items():
        tally.add("bad_inputs")
        tally.add("bad_text")
        with pytest.raises(BadText) as e:
            check_text(text, "question")
        assert e.value.field == "question" and expect in e.value.reason, (label, str(e.value))
        assert "\n" not in str(e.value) and str(e.value).isascii()
    for fine in ("", "tab\tnew line\ncarriage\r", "中文？", "e\u0301", "\ufeff\u200b\u202e", "\ufffe\uffff\U0010ffff",
                 "\U0001f600 a surrogate pair from JSON"):  # fmt: skip
        assert check_text(fine, "x") is fine  # accepted unchanged: no repair, no normalisation
    assert text_problem("ok") is None
    with pytest.raises(BadText, match="must be text"):
        check_text(b"bytes", "question")
    with pytest.raises(BadText) as e:
        check_tree({"acl": ["all", "x\x00"]}, "filters")
    assert e.value.field == "filters.acl[1]"
    with pytest.raises(BadText) as e:
        check_tree({"a\ud800": 1}, "filters")
    assert e.value.field == "a key of filters"
    assert check_tree({"year": 2001, "ok": [True, None, 1.5]}, "filters") == {"year": 2001, "ok": [True, None, 1.5]}


def test_python_filters_refuse_bad_text(tally) -> None:
    """Filters built in Python (parsed, made or read back) follow the same rule."""
    for make in (lambda: Filters.parse(["acl=\ud800"]), lambda: Filters.parse(["version=20\x0025"]),
                 lambda: Filters.make({"region": ["a\x1b"]}), lambda: Filters.from_dict({"acl": ["all", "\udfff"]}),
                 lambda: Filters.make(ranges={"year\x7f": (1, 2)})):  # fmt: skip
        tally.add("bad_inputs")
        tally.add("bad_text")
        with pytest.raises(FilterError, match=r"filters.* contains"):
            make()
    assert Filters.parse(["acl=all", "region=境内,境外", "year>=2001"]).acl == frozenset({"all"})


# ------------------------------------------------------------------ Python API
@pytest.mark.parametrize("name", ALL_STRATEGIES)
def test_python_refuses_bad_text(name: str, fake_llm, policy_index, tally) -> None:
    srv = fake_llm()
    s = get_strategy(name, fast_client(srv.base_url), policy_index)
    for label, (text, expect) in BAD_TEXTS.items():
        tally.add("bad_inputs")
        tally.add("bad_text")
        with pytest.raises(BadQuestion, match="the question contains") as e:
            s.run(text)
        assert expect in str(e.value), (label, str(e.value))
    assert srv.stats.requests == 0, "bad text never reaches the model"


def test_search_o1_batch_marks_bad_text(fake_llm, policy_index, tally) -> None:
    s = SearchO1(fast_client(fake_llm().base_url), policy_index, lang="en")
    out = s.run_batch(["\ud800 abc", "Who directed Jaws?", "abc \x00"])
    tally.add("bad_inputs", 2)
    tally.add("bad_text", 2)
    assert [r.finish_reason for r in out] == [BAD_INPUT, "finished", BAD_INPUT]


# ------------------------------------------------------------------ CLI
def test_cli_bytes_that_are_not_utf8_get_one_sentence(fake_llm, tmp_path: Path, policy_corpus: Path, tally) -> None:
    """Real processes given raw argv bytes: Python holds undecodable bytes as lone surrogates."""
    env = {"SLEUTH_LLM_BASE_URL": fake_llm().base_url, "SLEUTH_LLM_MODEL": "fake", "SLEUTH_CACHE_DIR": str(tmp_path),
           "COLUMNS": "250", "SLEUTH_LLM_CACHE": "0", "OMP_WAIT_POLICY": "PASSIVE"}  # fmt: skip
    cases: list[tuple[list[str | bytes], str]] = [
        (
            [b"ask", b"\xed\xa0\x80 abc", b"-s", b"direct"],
            "the question contains a lone surrogate U+DCED at position 0",
        ),
        ([b"ask", b"who\xffis", b"-s", b"direct"], "the question contains a lone surrogate U+DCFF at position 3"),
        ([b"ask", "a\x85b".encode(), b"-s", b"direct"], "the question contains the binary control character U+0085"),
        ([b"search", b"\xff", b"--corpus", str(policy_corpus).encode()], "the query contains a lone surrogate"),
        ([b"search", b"x", b"--corpus", str(policy_corpus).encode(), b"-f", b"acl=\xff"], "--filter contains"),
    ]
    for args, expect in cases:
        tally.add("bad_inputs")
        tally.add("bad_text")
        p = subprocess.run([sys.executable, "-m", "sleuth", *args], capture_output=True, timeout=120, cwd=ROOT,
                           env={**os.environ, **env})  # fmt: skip
        err = p.stderr.decode("utf-8", "replace").strip()
        assert p.returncode == 2 and "Traceback" not in err, (args, p.returncode, err[-1500:])
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("error:") and expect in lines[0], (args, err)


# ------------------------------------------------------------------ HTTP: the requests of issue 33
@pytest.fixture(scope="module")
def service(module_fake_llm, policy_index, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``sleuth serve`` in a thread: a fast scripted model, the policy_zh index, traces in SQLite."""
    db = tmp_path_factory.mktemp("traces") / "traces.db"
    app = create_app(
        ServerSettings(max_concurrency=8, timeout_s=30, trace_db=str(db)),
        llm=fast_client(module_fake_llm().base_url, timeout=5.0),
        retrievers={"policy": policy_index},
    )
    with running(app) as url:
        yield url


Q = '"\\ud800\\udfff\\ud800 abc"'


def ask_q(strategy: str, extra: str = "") -> str:
    return f'{{"question": {Q}, "strategy": "{strategy}"{extra}}}'


def chat_q(model: str, content: str, extra: str = "") -> str:
    return f'{{"model": "sleuth-{model}", "messages": [{{"role": "user", "content": {content}}}]{extra}}}'


#: (label, path, raw JSON body - escapes exactly as a client sends them, field named, words in the message)
ISSUE_CASES: list[tuple[str, str, str, str, str]] = [
    ("ask rag", "/v1/ask", ask_q("rag"), "question", "lone surrogate U+D800"),
    ("ask self-ask", "/v1/ask", ask_q("self-ask"), "question", "lone surrogate U+D800"),
    ("ask stream", "/v1/ask", ask_q("rag", ', "stream": true'), "question", "U+D800"),
    ("ask self-ask stream", "/v1/ask", ask_q("self-ask", ', "stream": true'), "question",
     "U+D800"),
    ("chat surrogate", "/v1/chat/completions", chat_q("rag", '"abc \\udc80 def"', ""), "messages.0.content",
     "lone surrogate U+DC80 at position 4"),
    ("chat surrogate stream", "/v1/chat/completions", chat_q("rag", '"abc \\udc80 def"', ', "stream": true'),
     "messages.0.content", "U+DC80"),
    ("chat NUL", "/v1/chat/completions", chat_q("rag", '"\\u0000"', ""), "messages.0.content", "NUL (U+0000)"),
    ("chat NUL stream", "/v1/chat/completions", chat_q("self-ask", '"\\u0000"', ', "stream": true'),
     "messages.0.content", "NUL (U+0000)"),
    ("chat NUL self-ask", "/v1/chat/completions", chat_q("self-ask", '"\\u0000"', ""), "messages.0.content", "NUL"),
    ("chat content part", "/v1/chat/completions",
     chat_q("rag", '[{"type": "text", "text": "a\\ud83d"}]', ""), "messages.0.content", "U+D83D"),
    ("ask C1 control", "/v1/ask", '{"question": "a\\u0085b", "strategy": "rag"}', "question", "U+0085"),
    ("ask DEL", "/v1/ask", '{"question": "a\\u007fb", "strategy": "rag"}', "question", "U+007F"),
    ("ask strategy", "/v1/ask", '{"question": "Who?", "strategy": "rag\\ud800"}', "strategy", "U+D800"),
    ("ask model", "/v1/ask", '{"question": "Who?", "model": "\\u0000"}', "model", "NUL"),
    ("ask index", "/v1/ask", '{"question": "Who?", "index": "p\\udfff"}', "index", "U+DFFF"),
    ("ask filters item", "/v1/ask", '{"question": "Who?", "filters": ["acl=\\ud800"]}', "filters", "[0] contains"),
    ("ask filters key", "/v1/ask", '{"question": "Who?", "filters": {"a\\u0000": "b"}}', "filters", "a key"),
    ("ask filters value", "/v1/ask", '{"question": "Who?", "filters": {"acl": ["all", "\\udc00"]}}', "filters",
     "acl[1]"),
    ("chat model", "/v1/chat/completions", chat_q("rag\\ud800", '"Who?"', ""), "model", "U+D800"),
    ("chat filters", "/v1/chat/completions", chat_q("rag", '"Who?"', ', "filters": ["acl=\\u001b"]'), "filters",
     "U+001B"),
]  # fmt: skip
GET_CASES: list[tuple[str, str, str, str]] = [
    ("trace id NUL", "/v1/traces/%00", "trace_id", "NUL"),
    ("trace scope NUL", "/v1/traces/abc?filters=acl%3D%00", "filters", "NUL"),
    ("model id control", "/v1/models/sleuth-%01", "model", "U+0001"),
]


def test_issue_33_requests_get_422_and_the_connection_lives(service: str, tally) -> None:
    """Every request on one kept-alive connection (a 500 used to close it under the next request)."""
    with httpx.Client(base_url=service, timeout=60) as c:
        for label, path, body, field, words in ISSUE_CASES:
            json.loads(body)  # each body is valid JSON
            tally.add("bad_inputs")
            tally.add("bad_text")
            tally.add("requests")
            try:
                r = c.post(path, content=body.encode(), headers={"Content-Type": "application/json"})
            except httpx.TransportError:
                tally.add("server_errors")
                raise
            assert r.status_code == 422, (label, r.status_code, r.text[:400])
            err = r.json()["error"]
            assert err["param"] == field and err["message"].startswith(field + ":"), (label, err)
            assert words in err["message"] and err["message"].isascii(), (label, err["message"])
        for label, path, field, words in GET_CASES:
            tally.add("bad_inputs")
            tally.add("bad_text")
            tally.add("requests")
            r = c.get(path)
            assert r.status_code == 422 and r.json()["error"]["param"] == field, (label, r.status_code, r.text)
            assert words in r.json()["error"]["message"], label
        tally.add("requests", 2)
        ok = c.post("/v1/ask", json={"question": "Who directed Jaws?", "strategy": "rag"})
        assert ok.status_code == 200 and ok.json()["finish_reason"] == "finished", ok.text[:300]
        assert c.get("/healthz").json()["status"] == "ok"


def test_openai_sdk_gets_a_clear_422(service: str, tally) -> None:
    cl = openai.OpenAI(base_url=service + "/v1", api_key="x", max_retries=0, timeout=60)
    for content in ("\x00", "a\x1bb"):  # (the SDK itself cannot send a lone surrogate: it encodes UTF-8)
        tally.add("bad_inputs")
        tally.add("bad_text")
        tally.add("requests")
        with pytest.raises(openai.UnprocessableEntityError, match=r"messages\.0\.content"):
            cl.chat.completions.create(model="sleuth-rag", messages=[{"role": "user", "content": content}])


# ------------------------------------------------------------------ output side and failures after the headers
def test_a_model_answer_with_a_lone_surrogate_still_leaves_as_json(fake_llm, policy_index, tmp_path, tally) -> None:
    """Text not from the request (here the model's) may hold a lone surrogate: answers, streams
    and stored traces carry it as a JSON escape instead of failing to encode."""
    srv = fake_llm(script=ScriptedModel(answer="Arnold \ud83d Spielberg"))
    app = create_app(
        ServerSettings(max_concurrency=4, timeout_s=30, trace_db=str(tmp_path / "t.db")),
        llm=fast_client(srv.base_url),
        retrievers={"policy": policy_index},
    )
    with running(app) as url, httpx.Client(base_url=url, timeout=60) as c:
        tally.add("requests", 4)
        r = c.post("/v1/ask", json={"question": "Who directed Jaws?", "strategy": "rag"})
        assert r.status_code == 200 and b"\\ud83d" in r.content, r.text[:300]
        assert "\ud83d" in r.json()["short_answer"]
        t = c.get(f"/v1/traces/{r.json()['id']}")
        assert t.status_code == 200 and t.json()["answer"] == r.json()["answer"]
        with c.stream(
            "POST", "/v1/ask", json={"question": "Who directed Jaws?", "strategy": "rag", "stream": True}
        ) as s:
            names = [name for name, _ in sse_events(s)]
        assert names[-1] == "result" and "error" not in names
        ch = c.post(
            "/v1/chat/completions", json={"model": "sleuth-rag", "messages": [{"role": "user", "content": "Q?"}]}
        )
        assert ch.status_code == 200 and "\ud83d" in ch.json()["choices"][0]["message"]["content"]


class _Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("a bug: this value cannot be shown")

    __repr__ = __str__


class BuggyStrategy(Strategy):
    """A plugin strategy with a bug: one of its steps carries a value nothing can serialise."""

    name = "buggy"

    def solve(self, question: str, st: RunState) -> None:
        st.emit("note", message="about to fail", value=_Unprintable())
        st.result.answer = st.result.short_answer = "never shown"


def test_an_unforeseen_failure_is_a_500_or_an_error_event_never_a_cut(fake_llm, tally) -> None:
    llm = fast_client(fake_llm().base_url)
    strategies = {"buggy": BuggyStrategy, "direct": lambda llm, retriever=None, **kw: get_strategy("direct", llm, **kw)}
    app = create_app(ServerSettings(max_concurrency=4, timeout_s=30), llm=llm, strategies=strategies)
    ask = {"question": "Who directed Jaws?", "strategy": "buggy"}
    chat = {"model": "sleuth-buggy", "messages": [{"role": "user", "content": "Who directed Jaws?"}]}
    with running(app) as url, httpx.Client(base_url=url, timeout=60) as c:
        tally.add("fault_scenarios", 4)
        tally.add("requests", 6)
        for path, body in (("/v1/ask", ask), ("/v1/chat/completions", chat)):
            r = c.post(path, json=body)  # the JSON 500, and the same connection serves the next request
            assert r.status_code == 500 and r.json()["error"]["type"] == "server_error", r.text[:300]
        with c.stream("POST", "/v1/ask", json={**ask, "stream": True}) as s:
            events = list(sse_events(s))  # a torn chunked body would raise here
        assert events[-1][0] == "error" and events[-1][1]["error"]["type"] == "server_error", events
        assert events[-1][1]["error"]["trace_id"] and all(name != "result" for name, _ in events)
        with c.stream("POST", "/v1/chat/completions", json={**chat, "stream": True}) as s:
            events = list(sse_events(s))
        assert events[-1][1] == "[DONE]" and events[-2][1]["error"]["type"] == "server_error", events
        ok = c.post("/v1/ask", json={**ask, "strategy": "direct"})
        assert ok.status_code == 200 and ok.json()["finish_reason"] == "finished"
        cl = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=60)
        tally.add("requests")
        with pytest.raises(openai.APIError, match="internal error"):  # the SDK reads the error chunk
            for _ in cl.chat.completions.create(model="sleuth-buggy", messages=chat["messages"], stream=True):
                pass


# ------------------------------------------------------------------ property test: every text field, any Unicode
ANY_CHAR = hs.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=())  # Cs and Cc included
SURROGATE = hs.characters(categories=["Cs"])  # (rare in ANY_CHAR, which favours low code points)
CONTROL = hs.characters(categories=["Cc"])
PRINTABLE = hs.characters(exclude_categories=["Cs", "Cc"])
EDGES = hs.sampled_from("\t\n\r \u3000\ufeff\ufffe\uffff\U0010ffff\U0001f600中？=,")


def _joined(*chars: hs.SearchStrategy[str]) -> hs.SearchStrategy[str]:
    # lists, not text(alphabet=one_of(...)): text merges the alphabets and then favours low code points
    return hs.lists(hs.one_of(*chars), max_size=40).map("".join)


ANY_TEXT = hs.one_of(
    hs.text(alphabet=ANY_CHAR, max_size=40),
    _joined(PRINTABLE, SURROGATE, EDGES),  # lone surrogates without controls
    _joined(PRINTABLE, CONTROL, SURROGATE, EDGES),
)

Builder = Callable[[str], tuple[str, str, Any]]
ASK = {"question": "Who directed Jaws?", "strategy": "direct"}
USER = [{"role": "user", "content": "Who directed Jaws?"}]


def _chat(**kw: Any) -> dict[str, Any]:
    return {"model": "sleuth-direct", "messages": USER, **kw}


def _path(t: str) -> str:
    return quote(t.encode("utf-8", "surrogatepass"), safe="")


FIELDS: dict[str, Builder] = {
    "ask question": lambda t: ("POST", "/v1/ask", {**ASK, "question": t}),
    "ask question (stream)": lambda t: ("POST", "/v1/ask", {**ASK, "question": t, "stream": True}),
    "ask strategy": lambda t: ("POST", "/v1/ask", {**ASK, "strategy": t}),
    "ask index": lambda t: ("POST", "/v1/ask", {**ASK, "index": t}),
    "ask model": lambda t: ("POST", "/v1/ask", {**ASK, "model": t}),
    "ask lang": lambda t: ("POST", "/v1/ask", {**ASK, "lang": t}),
    "ask filters item": lambda t: ("POST", "/v1/ask", {**ASK, "filters": ["acl=" + t]}),
    "ask filters key": lambda t: ("POST", "/v1/ask", {**ASK, "filters": {t: "all"}}),
    "ask filters value": lambda t: ("POST", "/v1/ask", {**ASK, "filters": {"acl": [t]}}),
    "chat content": lambda t: ("POST", "/v1/chat/completions", _chat(messages=[{"role": "user", "content": t}])),
    "chat content (stream)": lambda t: (
        "POST", "/v1/chat/completions", _chat(messages=[{"role": "user", "content": t}], stream=True)),
    "chat content part": lambda t: (
        "POST", "/v1/chat/completions", _chat(messages=[{"role": "user", "content": [{"type": "text", "text": t}]}])),
    "chat earlier message": lambda t: (
        "POST", "/v1/chat/completions", _chat(messages=[{"role": "system", "content": t}, *USER])),
    "chat role": lambda t: ("POST", "/v1/chat/completions", _chat(messages=[{"role": t, "content": "Who?"}])),
    "chat model": lambda t: ("POST", "/v1/chat/completions", _chat(model=t)),
    "chat index": lambda t: ("POST", "/v1/chat/completions", _chat(index=t)),
    "chat filters": lambda t: ("POST", "/v1/chat/completions", _chat(filters=[t + "=all"])),
    "chat user": lambda t: ("POST", "/v1/chat/completions", _chat(user=t)),
    "trace id": lambda t: ("GET", "/v1/traces/" + _path(t), None),
    "trace filters": lambda t: ("GET", "/v1/traces/abc?filters=" + _path(t), None),
    "model id": lambda t: ("GET", "/v1/models/" + _path(t), None),
}  # fmt: skip
SEEN: Counter[str] = Counter()
FIELDS_RUN: set[str] = set()


def _send(c: httpx.Client, method: str, path: str, body: Any) -> tuple[int, list[tuple[str, Any]]]:
    """(status, stream events) - a 5xx, a reset or a torn stream raise."""
    content = json.dumps(body).encode() if body is not None else None  # lone surrogates as JSON escapes
    headers = {"Content-Type": "application/json"} if body is not None else {}
    with c.stream(method, path, content=content, headers=headers) as r:
        if r.headers.get("content-type", "").startswith("text/event-stream"):
            return r.status_code, list(sse_events(r))
        r.read()
        if r.status_code >= 400:
            assert r.json()["error"]["message"], r.text
        return r.status_code, []


def _failed(events: list[tuple[str, Any]]) -> bool:
    """An error event (/v1/ask) or an error chunk (/v1/chat/completions) ended the stream."""
    return any(name == "error" or (name == "message" and isinstance(d, dict) and "error" in d) for name, d in events)


@pytest.mark.parametrize("field", list(FIELDS))
def test_any_unicode_in_any_text_field_never_gets_a_5xx(field: str, service: str) -> None:
    build = FIELDS[field]
    FIELDS_RUN.add(field)
    with httpx.Client(base_url=service, timeout=60) as c:

        @settings(max_examples=50, deadline=None, database=None, phases=[Phase.explicit, Phase.generate],
                  suppress_health_check=list(HealthCheck))  # fmt: skip
        @given(text=ANY_TEXT)
        def one(text: str) -> None:
            TALLY.add("text_examples")
            TALLY.add("requests")
            try:
                status, events = _send(c, *build(text))
            except httpx.TransportError:
                TALLY.add("server_errors")
                SEEN["5xx"] += 1
                raise
            if status >= 500 or _failed(events):
                TALLY.add("server_errors")
                SEEN["5xx"] += 1
            assert status < 500, (field, ascii(text), status)
            assert not _failed(events), (field, ascii(text), events[-2:])
            assert not events or events[-1][0] == "result" or events[-1][1] == "[DONE]", (field, events[-1:])
            SEEN["4xx" if status >= 400 else "2xx"] += 1
            if text_problem(text) is not None:
                SEEN["bad text"] += 1

        try:
            one()
        finally:
            _note()
        assert c.get("/healthz").json()["status"] == "ok"  # and it still serves, on the same connection


def _note() -> None:
    """One line in the summary table, kept up to date after each field."""
    TALLY.notes[:] = [n for n in TALLY.notes if not n.startswith("property test:")]
    TALLY.note(
        f"property test: {SEEN['2xx'] + SEEN['4xx'] + SEEN['5xx']} arbitrary Unicode strings over "
        f"{len(FIELDS_RUN)} text fields ({SEEN['bad text']} holding a lone surrogate "
        f"or a control character): {SEEN['2xx']} answered, {SEEN['4xx']} refused with a 4xx JSON error, "
        f"{SEEN['5xx']} 5xx or broken streams"
    )
