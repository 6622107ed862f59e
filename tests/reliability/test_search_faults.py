"""Search faults for every strategy: a real (fake) SearXNG / Tavily server on 127.0.0.1
that is down, slow, empty or answers garbage, and Tavily without a key.

How each strategy degrades (docs/reliability.md):

* ``direct``/``cot`` never search;
* ``rag`` and ``step-back`` need their retrieval: a failed search ends the run
  with ``search_unavailable``; no passages -> they answer and say so (``note no_passages``);
* ``self-ask`` answers the follow-up from the model and marks it
  (``intermediate_answer`` with ``source="model"`` and the ``fallback`` reason);
* ``rat`` skips the revision of that paragraph (``revision`` with ``skipped``);
* ``search-o1`` tells the model that search is unavailable and goes on.
"""

from __future__ import annotations

import time

import pytest

from sleuth.search import open_retriever
from sleuth.search.base import SearchError, SearchUnavailable
from sleuth.search.web import SearxngRetriever, TavilyRetriever
from sleuth.strategies import FINISHED, SEARCH_UNAVAILABLE, Result, get_strategy

from .conftest import ALL_STRATEGIES, fast_client, free_port

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(60)]

QUESTION = "Who was the father of the director of Jaws?"
FAILING = ("down", "500", "503", "429", "slow", "not-json", "wrong-shape")
#: the finish reason each strategy ends with when every search fails
ON_FAILURE = {
    "direct": FINISHED,
    "cot": FINISHED,
    "rag": SEARCH_UNAVAILABLE,
    "self-ask": FINISHED,
    "rat": FINISHED,
    "step-back": SEARCH_UNAVAILABLE,
    "search-o1": FINISHED,
}


def run(name: str, llm, retriever) -> tuple[Result, float]:
    s = get_strategy(name, llm, retriever, lang="en", max_steps=3, max_tokens=256)
    t = time.perf_counter()
    r = s.run(QUESTION)
    return r, time.perf_counter() - t


def searxng(fake_search, mode: str) -> SearxngRetriever:
    url = f"http://127.0.0.1:{free_port()}" if mode == "down" else fake_search(mode, slow_s=1.0).url
    return SearxngRetriever(url, timeout=0.3, max_retries=1)


def check_degraded(r: Result, name: str, why: str) -> None:
    kinds = [e.kind for e in r.trace.events]
    assert kinds[0] == "start" and kinds[-1] == "answer"
    if name == "self-ask":
        fallbacks = [e.data for e in r.trace.of("intermediate_answer") if e.data.get("source") == "model"]
        assert fallbacks, "self-ask must answer from the model and mark it"
        assert all(why in f["fallback"] for f in fallbacks), fallbacks
    if name == "rat":
        revs = r.trace.of("revision")
        assert revs and all(e.data.get("skipped") for e in revs), [e.data for e in revs]
    if name == "search-o1" and why == "search failed":
        assert any(e.data.get("type") == "search_failed" for e in r.trace.of("note"))
    if r.finish_reason == FINISHED:
        assert r.answer, "a finished run has an answer"
        assert not r.citations, "nothing was found, nothing is cited"


@pytest.mark.parametrize("mode", FAILING)
@pytest.mark.parametrize("name", ALL_STRATEGIES)
def test_search_source_fails(name: str, mode: str, fake_llm, fake_search, tally) -> None:
    retriever = searxng(fake_search, mode)
    r, dt = run(name, fast_client(fake_llm().base_url), retriever)
    tally.add("fault_scenarios")
    assert r.finish_reason == ON_FAILURE[name], (r.finish_reason, r.error)
    if r.finish_reason == SEARCH_UNAVAILABLE:
        assert "SearXNG" in r.error and "\n" not in r.error
        assert r.trace.of("error")
    check_degraded(r, name, "search failed")
    assert dt < 10


@pytest.mark.parametrize("name", ALL_STRATEGIES)
def test_search_returns_nothing(name: str, fake_llm, fake_search, tally) -> None:
    retriever = searxng(fake_search, "empty")
    r, _ = run(name, fast_client(fake_llm().base_url), retriever)
    tally.add("fault_scenarios")
    assert r.finish_reason == FINISHED, (r.finish_reason, r.error)
    check_degraded(r, name, "search found nothing")
    if name in ("rag", "step-back", "search-o1"):
        assert any(e.data.get("type") == "no_passages" for e in r.trace.of("note"))


@pytest.mark.parametrize("name", ["rag", "self-ask", "search-o1"])
def test_search_ok_control(name: str, fake_llm, fake_search) -> None:
    """Control: the same fake engine in good health gives citations (the fault tests can fail)."""
    r, _ = run(name, fast_client(fake_llm().base_url), searxng(fake_search, "ok"))
    assert r.finish_reason == FINISHED
    assert any("example.org" in p.url for p in r.citations)


@pytest.mark.parametrize("mode", FAILING)
def test_web_errors_are_search_errors(mode: str, fake_search, tally) -> None:
    """Every failure of a web source is a SearchError with one sentence (never a raw exception)."""
    r = searxng(fake_search, mode)
    tally.add("fault_scenarios")
    t = time.perf_counter()
    with pytest.raises(SearchError) as e:
        r.search("jaws director", 5)
    assert "\n" not in str(e.value)
    if mode in ("down", "500", "503", "429", "slow"):
        assert isinstance(e.value, SearchUnavailable)
    assert time.perf_counter() - t < 3


@pytest.mark.parametrize("name", ALL_STRATEGIES)
def test_search_returns_garbage_results(name: str, fake_llm, fake_search, tally) -> None:
    """A results list of junk (wrong types, NaN and text scores, binary, 200 kB snippets) is data:
    junk entries are skipped or coerced, the run finishes, nothing raises."""
    retriever = searxng(fake_search, "garbage")
    got = retriever.search("jaws", 10)
    assert all(isinstance(p.text, str) and p.text and p.score == p.score for p in got)
    r, dt = run(name, fast_client(fake_llm().base_url), retriever)
    tally.add("fault_scenarios")
    assert r.finish_reason == FINISHED, (r.finish_reason, r.error)
    assert dt < 10
    for e in r.trace.of("llm"):
        assert "\x00" not in e.data["completion"]


def test_tavily_without_key(monkeypatch, fake_llm, tally) -> None:
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)
    retriever = open_retriever("tavily", cache=False)
    with pytest.raises(SearchUnavailable, match="TAVILY_API_KEY"):
        retriever.search("jaws", 3)
    llm = fast_client(fake_llm().base_url)
    for name in ALL_STRATEGIES:
        r, _ = run(name, llm, retriever)
        tally.add("fault_scenarios")
        assert r.finish_reason == ON_FAILURE[name], (name, r.finish_reason)
        check_degraded(r, name, "search failed")
        assert "TAVILY_API_KEY" in r.error or r.finish_reason == FINISHED


def test_tavily_garbage_and_errors(fake_search, tally) -> None:
    for mode in ("wrong-shape", "not-json", "503", "429"):
        srv = fake_search(mode)
        t = TavilyRetriever("test-key", base_url=srv.url, timeout=0.5, max_retries=1)
        tally.add("fault_scenarios")
        with pytest.raises(SearchError) as e:
            t.search("jaws", 3)
        assert "test-key" not in str(e.value)
    t = TavilyRetriever("test-key", base_url=fake_search("garbage").url, timeout=0.5, max_retries=1)
    tally.add("fault_scenarios")
    assert all(p.score == p.score and isinstance(p.text, str) for p in t.search("jaws", 10))
