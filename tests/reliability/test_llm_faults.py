"""LLM faults, for every strategy, against a real misbehaving HTTP server on 127.0.0.1.

Each strategy must come back with a :class:`Result` - a sensible answer, or a
clear ``llm_*`` finish reason with the error in one sentence - never raise and
never hang (pytest-timeout, and each run's wall time is bounded).
"""

from __future__ import annotations

import socket
import time

import pytest

from sleuth.llm import GenParams, LLMError, LLMTimeout, LLMUnavailable
from sleuth.strategies import FINISHED, STEP_LIMIT, Result, get_strategy

from .conftest import ALL_STRATEGIES, ScriptedModel, fast_client

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(60)]

LLM_FAILED = {"llm_unavailable", "llm_timeout", "llm_bad_response"}
OK = {FINISHED, STEP_LIMIT}
#: faults that fail every attempt -> the run ends with a finish reason
PERSISTENT = {
    "429": {"llm_unavailable"},
    "429-no-retry-after": {"llm_unavailable"},
    "429-date": {"llm_unavailable"},
    "500": {"llm_unavailable"},
    "502": {"llm_unavailable"},
    "503": {"llm_unavailable"},
    "disconnect": {"llm_unavailable"},
    "truncated": {"llm_bad_response"},
    "malformed": {"llm_bad_response"},
    "no-choices": {"llm_bad_response"},
    "slow": {"llm_timeout"},
    "stall": {"llm_timeout"},
}
#: faults after which the run still answers
ANSWERING = ("empty", "endless", "ignore-stop")
QUESTION = "Who was the father of the director of Jaws?"


def run(name: str, llm, retriever, **opts) -> tuple[Result, float]:
    s = get_strategy(name, llm, retriever, lang="en", max_steps=3, max_tokens=256, **opts)
    t = time.perf_counter()
    r = s.run(QUESTION)
    return r, time.perf_counter() - t


def assert_well_formed(r: Result, name: str) -> None:
    kinds = [e.kind for e in r.trace.events]
    assert kinds[0] == "start" and kinds[-1] == "answer", kinds
    assert r.strategy == name
    assert r.llm_calls == len(r.trace.of("llm"))
    r.to_dict()  # serialisable


def assert_failed_cleanly(r: Result, name: str, reasons: set[str]) -> None:
    assert_well_formed(r, name)
    assert r.finish_reason in reasons, (name, r.finish_reason, r.error)
    assert r.error and "\n" not in r.error.strip() and "Traceback" not in r.error
    assert r.trace.of("error"), "the failure is recorded in the trace"


@pytest.mark.parametrize("fault", sorted(PERSISTENT))
@pytest.mark.parametrize("name", ALL_STRATEGIES)
def test_persistent_llm_fault(name: str, fault: str, fake_llm, en_index, tally) -> None:
    srv = fake_llm(fault=fault, slow_s=0.6)
    llm = fast_client(srv.base_url, timeout=0.3 if fault in ("slow", "stall") else 1.0)
    r, dt = run(name, llm, en_index)
    tally.add("fault_scenarios")
    assert_failed_cleanly(r, name, PERSISTENT[fault])
    assert dt < 10, f"{name} took {dt:.1f}s under {fault}"
    # retried exactly as configured (1 retry) on retryable faults, never on bad bodies
    attempts = srv.stats.requests
    assert attempts == (1 if PERSISTENT[fault] == {"llm_bad_response"} else 2), attempts


@pytest.mark.parametrize("name", ALL_STRATEGIES)
def test_connection_refused(name: str, en_index, tally) -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    r, dt = run(name, fast_client(f"http://127.0.0.1:{port}"), en_index)
    tally.add("fault_scenarios")
    assert_failed_cleanly(r, name, {"llm_unavailable"})
    assert "127.0.0.1" in r.error
    assert dt < 5


@pytest.mark.parametrize("fault", ["429", "429-no-retry-after", "503", "disconnect", "slow"])
@pytest.mark.parametrize("name", ALL_STRATEGIES)
def test_transient_fault_is_retried(name: str, fault: str, fake_llm, en_index, tally) -> None:
    """One failure on the first call, then a healthy server: the run answers as if nothing happened."""
    srv = fake_llm(slow_s=0.6)
    srv.push_faults(fault)
    r, _ = run(name, fast_client(srv.base_url, timeout=0.3 if fault == "slow" else 1.0), en_index)
    tally.add("fault_scenarios")
    assert_well_formed(r, name)
    assert r.finish_reason in OK, (r.finish_reason, r.error)
    assert r.short_answer == "Arnold Spielberg"
    assert srv.stats.faults.get(fault) == 1


@pytest.mark.parametrize("fault", ANSWERING)
@pytest.mark.parametrize("name", ALL_STRATEGIES)
def test_odd_output_still_answers(name: str, fault: str, fake_llm, en_index, tally) -> None:
    """Empty completions, never-ending output and ignored stop strings: bounded runs, clean results."""
    srv = fake_llm(fault=fault)
    r, dt = run(name, fast_client(srv.base_url), en_index)
    tally.add("fault_scenarios")
    assert_well_formed(r, name)
    assert r.finish_reason in OK, (r.finish_reason, r.error)
    assert dt < 10
    assert r.llm_calls <= 16, r.llm_calls  # max_steps=3 bounds every loop
    if fault == "endless":
        # every completion ran into max_tokens; nothing grows without bound
        assert all(e.data["finish_reason"] == "length" for e in r.trace.of("llm"))
        assert len(r.answer) < 2000
    if fault == "ignore-stop":
        # the client cuts at the stop strings itself: same answer as a well-behaved server
        assert r.short_answer == "Arnold Spielberg"
        for e in r.trace.of("llm"):
            assert "Intermediate answer: invented" not in e.data["completion"]
            assert "made up" not in e.data["completion"]


def test_ignore_stop_matches_well_behaved_server(fake_llm, en_index, tally) -> None:
    """Self-Ask and Search-o1 depend on stops: a server ignoring them changes nothing."""
    for name in ("self-ask", "search-o1"):
        good = run(name, fast_client(fake_llm().base_url), en_index)[0]
        bad = run(name, fast_client(fake_llm(fault="ignore-stop").base_url), en_index)[0]
        tally.add("fault_scenarios")
        assert [e.data["completion"] for e in good.trace.of("llm")] == [
            e.data["completion"] for e in bad.trace.of("llm")
        ]
        assert (good.answer, good.searches) == (bad.answer, bad.searches)


@pytest.mark.parametrize("fault,err", [("stall", LLMTimeout), ("disconnect", LLMUnavailable), ("malformed", LLMError)])
def test_stream_fault_mid_stream(fault: str, err: type, fake_llm, tally) -> None:
    """A stream that stalls, drops or turns to garbage after some tokens ends in an LLMError, not a hang."""
    srv = fake_llm(fault=fault, slow_s=1.0, script=["one two three four five six seven eight"])
    llm = fast_client(srv.base_url, timeout=0.3)
    got: list[str] = []
    t = time.perf_counter()
    with pytest.raises(err):
        llm.chat([{"role": "user", "content": "hi"}], GenParams(max_tokens=32), on_delta=got.append)
    tally.add("fault_scenarios")
    assert got, "some tokens arrived before the fault"
    assert time.perf_counter() - t < 3
    assert srv.stats.requests == 1  # never retried once text was emitted (no duplicated output)


def test_retry_after_is_honoured_and_capped(fake_llm, tally) -> None:
    srv = fake_llm(retry_after=0.4)
    srv.push_faults("429")
    llm = fast_client(srv.base_url, retry_after_cap=5)
    t = time.perf_counter()
    assert llm.chat([{"role": "user", "content": "hi"}]).text
    assert 0.35 <= time.perf_counter() - t < 2
    srv2 = fake_llm(retry_after=30)
    srv2.push_faults("429")
    t = time.perf_counter()
    assert fast_client(srv2.base_url, retry_after_cap=0.2).chat([{"role": "user", "content": "hi"}]).text
    assert time.perf_counter() - t < 1.5, "a huge Retry-After is capped"
    tally.add("fault_scenarios", 2)


def test_scripted_model_recognises_every_step(fake_llm, en_index) -> None:
    """Guard for the suite itself: the scripted model knows every prompt it is sent."""
    model = ScriptedModel()
    srv = fake_llm(script=model)
    for name in ALL_STRATEGIES:
        r, _ = run(name, fast_client(srv.base_url), en_index)
        assert r.finish_reason == FINISHED, (name, r.finish_reason, r.error)
        assert r.short_answer == "Arnold Spielberg", (name, r.short_answer)
    assert "unknown" not in model.seen, model.seen
