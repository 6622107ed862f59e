"""Tavily and SearXNG adapters against real HTTP servers on 127.0.0.1 that answer like
those services (and misbehave on purpose); never the real internet."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from serverkit import running
from sleuth.search import Filters, SearchError, SearchUnavailable, open_retriever
from sleuth.search.cache import CachedRetriever
from sleuth.search.web import SearxngRetriever, TavilyRetriever, _url_id

KEY = "tvly-test-key-123"


def _app(state: dict[str, Any]) -> FastAPI:
    app = FastAPI()

    @app.post("/search")
    async def tavily(request: Request) -> Any:
        state["calls"] = state.get("calls", 0) + 1
        behaviour = state.get("mode", "ok")
        if request.headers.get("authorization") != f"Bearer {KEY}":
            return JSONResponse({"detail": "Unauthorized"}, status_code=401)
        if behaviour == "429-once" and state["calls"] == 1:
            return JSONResponse({"detail": "slow down"}, status_code=429, headers={"Retry-After": "0.1"})
        if behaviour == "500":
            return JSONResponse({"detail": "boom"}, status_code=500)
        if behaviour == "garbage":
            return PlainTextResponse("<html>not json</html>")
        body = await request.json()
        state["last_body"] = body
        n = int(body["max_results"])
        results = [
            {
                "title": f"Result {i} for {body['query']}",
                "url": f"https://example.org/{i}",
                "content": f"Snippet {i} about {body['query']}.",
                "score": 1.0 - i / 10,
                "published_date": "2024-05-01",
            }
            for i in range(n)
        ]
        return {"query": body["query"], "results": results, "response_time": 0.01}

    @app.get("/search")
    async def searxng(q: str, format: str = "html") -> Any:
        state["calls"] = state.get("calls", 0) + 1
        if format != "json":
            return PlainTextResponse("html page")
        if state.get("mode") == "json-disabled":
            return PlainTextResponse("Forbidden", status_code=403)
        return {
            "query": q,
            "number_of_results": 3,
            "results": [
                {
                    "url": "https://a.example/1",
                    "title": "Alpha",
                    "content": f"alpha text on {q}",
                    "engine": "duckduckgo",
                    "score": 1.5,
                },
                {
                    "url": "https://b.example/2",
                    "title": "Beta",
                    "content": f"beta text on {q}",
                    "engine": "wikipedia",
                    "score": 3.0,
                    "publishedDate": "2023-01-02T00:00:00",
                },
                {"url": "https://c.example/3", "title": "", "content": "", "engine": "x", "score": 9.0},
                {"url": "https://d.example/4", "title": "Gamma", "content": "", "score": 0.5},
            ],
        }

    return app


@pytest.fixture()
def server() -> Iterator[tuple[str, dict[str, Any]]]:
    state: dict[str, Any] = {}
    with running(_app(state)) as url:
        yield url, state


def test_tavily_results_and_provenance(server: tuple[str, dict[str, Any]]) -> None:
    url, state = server
    t = TavilyRetriever(api_key=KEY, base_url=url)
    got = t.search("capital of France", k=3)
    assert [p.title for p in got] == [f"Result {i} for capital of France" for i in range(3)]
    p = got[0]
    assert (p.url, p.doc_id, p.source, p.acl) == ("https://example.org/0", "https://example.org/0", "tavily", ["all"])
    assert p.metadata["published_date"] == "2024-05-01" and p.score == 1.0
    assert state["last_body"]["max_results"] == 3 and "api_key" not in state["last_body"]
    assert [len(r) for r in t.search_batch(["a", "b"], k=2)] == [2, 2]
    # scope: web pages are public ("all") and have no version
    assert len(t.search("x", 2, Filters.parse(["acl=all"]))) == 2
    assert t.search("x", 2, Filters.parse(["acl=finance"])) == []
    assert t.search("x", 2, Filters.parse(["version=2025"])) == []


def test_tavily_without_key_is_unavailable_with_one_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)
    r = open_retriever("tavily", cache=False)
    with pytest.raises(SearchUnavailable, match="TAVILY_API_KEY") as ei:
        r.search("anything")
    assert "\n" not in str(ei.value)


def test_tavily_faults(server: tuple[str, dict[str, Any]]) -> None:
    url, state = server
    with pytest.raises(SearchUnavailable, match="rejected the API key") as ei:
        TavilyRetriever(api_key="wrong", base_url=url).search("q")
    assert "wrong" not in str(ei.value), "the key never appears in messages"
    state.update(mode="429-once", calls=0)
    assert len(TavilyRetriever(api_key=KEY, base_url=url).search("q", 2)) == 2 and state["calls"] == 2
    state.update(mode="500", calls=0)
    with pytest.raises(SearchUnavailable, match="HTTP 500"):
        TavilyRetriever(api_key=KEY, base_url=url, max_retries=1).search("q")
    assert state["calls"] == 2
    state.update(mode="garbage")
    with pytest.raises(SearchError, match="not JSON"):
        TavilyRetriever(api_key=KEY, base_url=url).search("q")


def test_unreachable_and_slow_servers() -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    with pytest.raises(SearchUnavailable, match="unreachable"):
        TavilyRetriever(api_key=KEY, base_url=f"http://127.0.0.1:{port}").search("q")
    with pytest.raises(SearchUnavailable, match="unreachable"):
        SearxngRetriever(f"http://127.0.0.1:{port}").search("q")
    # a server that accepts and never answers
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(1)
    try:
        with pytest.raises(SearchUnavailable, match="did not answer"):
            SearxngRetriever(f"http://127.0.0.1:{lsock.getsockname()[1]}", timeout=0.3, max_retries=0).search("q")
    finally:
        lsock.close()


def test_searxng_results_and_errors(server: tuple[str, dict[str, Any]]) -> None:
    url, state = server
    r = open_retriever(f"searxng:{url}", cache=False)
    got = r.search("owls", k=5)
    assert [p.title for p in got] == ["Beta", "Alpha", "Gamma"], "sorted by score; empty results dropped"
    assert got[2].text == "Gamma", "a result without text reads as its title"
    assert got[2].id == _url_id("https://d.example/4", "Gamma", ""), "its id is of the result as sent"
    assert got[0].metadata == {"engine": "wikipedia", "published_date": "2023-01-02T00:00:00"}
    assert got[0].source == "searxng" and got[0].url == "https://b.example/2"
    assert len(r.search("owls", k=1)) == 1
    state["mode"] = "json-disabled"
    with pytest.raises(SearchUnavailable, match=r"search\.formats"):
        r.search("owls")
    with pytest.raises(SearchError, match="http"):
        SearxngRetriever("localhost:8888")


def test_web_results_are_cached_per_scope(server: tuple[str, dict[str, Any]], tmp_path: Any) -> None:
    url, state = server
    r = open_retriever(f"searxng:{url}", cache=tmp_path / "sc.sqlite")
    assert isinstance(r, CachedRetriever)
    state["calls"] = 0
    a = r.search("owls", 2)
    b = r.search("owls", 2)
    assert [p.to_dict() for p in a] == [p.to_dict() for p in b] and state["calls"] == 1
    r.search("owls", 2, Filters.parse(["acl=hr"]))
    assert state["calls"] == 2, "another scope is another cache entry"
    r.search("owls", 3)
    assert state["calls"] == 3, "another k is another cache entry"
