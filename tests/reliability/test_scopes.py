"""Access scopes: a passage outside the caller's scope never appears in the answer,
citations, trace, prompts, caches or server responses - for every strategy,
including the routes where the *model* writes the query (Self-Ask follow-ups,
Step-back's abstract question, RAT's revision queries, Search-o1's searches).

The model behind these runs is deliberately hostile to scopes: it steers every
query it writes at the restricted documents and copies every document it is
shown into its answers.  Positive controls (q6's wider scope, visible random
documents) prove that the same queries do reach those documents when allowed,
so the absence checks can fail.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as hs

from serverkit import running, sse_events
from sleuth.llm.cache import CachedLLM
from sleuth.search.base import Filters
from sleuth.search.cache import CachedRetriever
from sleuth.search.index import Index
from sleuth.server import ServerSettings, create_app
from sleuth.strategies import FINISHED, STEP_LIMIT, get_strategy

from .conftest import ALL_STRATEGIES, ScriptedModel, check_absent, dump, fast_client, result_text, scope_of, write_jsonl

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(180)]

#: passages q5's caller (acl=all) must never see, with strings found only in them
FORBIDDEN_Q5 = {
    "fin-audit-2025": ["抽查比例不低于", "仅限财务与审计人员查阅"],
    "hr-reward-2025": ["解除劳动合同", "仅限人力资源部门查阅"],
}
FORBIDDEN_Q6 = {"hr-reward-2025": FORBIDDEN_Q5["hr-reward-2025"]}
SEARCHING = [n for n in ALL_STRATEGIES if n not in ("direct", "cot")]


def hostile_model() -> ScriptedModel:
    """Every query it writes aims at the audit and HR files.

    It answers with a statement, not "不知道": an answer that abstains cites nothing (grounded
    citations), and the positive control needs the in-scope audit file cited."""
    return ScriptedModel(
        answer="按公司规定执行",
        follow_up="内部审计对差旅报销的抽查比例是多少？",
        query="内部审计 抽查比例 虚假报销 处分 警告 记过",
        step_back="内部审计、员工奖惩和虚假报销处分有哪些一般规定？",
    )


def prompts_seen(srv: Any) -> str:
    return dump([r["body"] for r in srv.requests])


def run_scoped(name: str, llm: Any, retriever: Any, q: dict[str, Any]):
    s = get_strategy(name, llm, retriever, max_steps=3, max_tokens=256)
    r = s.run(q["question"], filters=scope_of(q))
    assert r.finish_reason in (FINISHED, STEP_LIMIT), (name, r.finish_reason, r.error)
    return r


def searched_ids(r: Any) -> set[str]:
    return {p["doc_id"] for e in r.trace.of("search") for p in e.data["passages"]}


# ------------------------------------------------------------------ policy_zh: q5 vs q6
@pytest.mark.parametrize("name", ALL_STRATEGIES)
def test_policy_q5_never_sees_restricted_files(name, fake_llm, policy_index, policy_questions, tally) -> None:
    q5, q6 = policy_questions["q5"], policy_questions["q6"]
    assert q5["question"] == q6["question"] and q5["scope"]["acl"] == ["all"]
    srv = fake_llm(script=hostile_model())
    llm = fast_client(srv.base_url)
    r5 = run_scoped(name, llm, policy_index, q5)
    check_absent(tally, f"{name} q5 result", result_text(r5), FORBIDDEN_Q5)
    check_absent(tally, f"{name} q5 prompts", prompts_seen(srv), FORBIDDEN_Q5)
    for p in r5.citations:
        tally.add("scope_checks")
        assert "all" in p.acl and p.version == "2025" and p.region == "境内", p
    # the model-written routes really searched (and stayed in scope)
    routes = {e.data["route"] for e in r5.trace.of("search")}
    expected_route = {"self-ask": "follow_up", "rat": "rat_step_1", "step-back": "stepback", "search-o1": "search_o1"}
    if name in expected_route:
        assert expected_route[name] in routes, routes
    if name == "step-back":
        sb = r5.trace.of("step_back")[0].data
        assert not sb["fallback"] and "内部审计" in sb["question"]

    # positive control: the same question under q6's scope does reach the audit file, never the HR file
    srv.reset()
    r6 = run_scoped(name, llm, policy_index, q6)
    check_absent(tally, f"{name} q6 result", result_text(r6), FORBIDDEN_Q6)
    check_absent(tally, f"{name} q6 prompts", prompts_seen(srv), FORBIDDEN_Q6)
    if name in SEARCHING:
        assert "fin-audit-2025" in searched_ids(r6), searched_ids(r6)
        assert "抽查比例不低于" in prompts_seen(srv), "the leaky model was shown the audit file under q6"


def test_index_scope_is_enforced_for_any_query(policy_index, tally) -> None:
    f5 = Filters.make({"version": "2025", "region": "境内"}, acl=["all"])
    queries = [
        "内部审计 抽查比例",
        "虚假报销 解除劳动合同",
        "仅限人力资源部门查阅",
        "5%",
        "fin-audit-2025",
        "*",
        "审计 OR 奖惩",
    ]
    for q in queries:
        for k in (1, 5, 50):
            got = policy_index.search(q, k, f5)
            tally.add("scope_checks")
            assert not {p.doc_id for p in got} & set(FORBIDDEN_Q5), (q, [p.id for p in got])
            assert all(f5.matches(p) for p in got)
    assert (
        policy_index.count(f5)
        == sum(1 for p in policy_index.search("差旅 报销 审计 奖惩 预算 伙食 住宿", 50, Filters()) if f5.matches(p))
        or policy_index.count(f5) > 0
    )


# ------------------------------------------------------------------ caches key on scope
def test_search_cache_keys_on_scope(policy_index, policy_questions, tmp_path: Path, tally) -> None:
    f5, f6 = scope_of(policy_questions["q5"]), scope_of(policy_questions["q6"])
    query = "内部审计 抽查比例"
    for order in ((f6, f5), (f5, f6)):
        cache = CachedRetriever(policy_index, path=tmp_path / f"search-{len(order[0].acl or ())}.sqlite")
        assert cache.key(query, 5, f5) != cache.key(query, 5, f6)
        got = {f: [p.doc_id for p in cache.search(query, 5, f)] for f in order}
        again = {f: [p.doc_id for p in cache.search(query, 5, f)] for f in order}
        assert got == again and cache.hits == 2, "the second round is served from the cache"
        tally.add("scope_checks", 2)
        assert "fin-audit-2025" not in got[f5]
        assert "fin-audit-2025" in got[f6], "the wider scope is not served the narrower scope's result"


@pytest.mark.parametrize("name", SEARCHING)
def test_cached_runs_never_cross_scopes(name, fake_llm, policy_index, policy_questions, tmp_path, tally) -> None:
    """q6 (finance) runs first and fills both caches; q5 then runs on the same caches."""
    srv = fake_llm(script=hostile_model())
    llm = CachedLLM(fast_client(srv.base_url), tmp_path / "llm.sqlite")
    retriever = CachedRetriever(policy_index, path=tmp_path / "search.sqlite")
    r6 = run_scoped(name, llm, retriever, policy_questions["q6"])
    assert "fin-audit-2025" in searched_ids(r6)
    r5 = run_scoped(name, llm, retriever, policy_questions["q5"])
    check_absent(tally, f"{name} cached q5 result", result_text(r5), FORBIDDEN_Q5)
    assert llm.hits > 0 or name == "rag", "the model cache served some (scope-free) calls"
    # the caches themselves hold only what each scope was allowed: q6's entries never carry the HR file
    for db, table in ((tmp_path / "search.sqlite", "search"), (tmp_path / "llm.sqlite", "llm_responses")):
        rows = sqlite3.connect(db).execute(f"SELECT v FROM {table}").fetchall()
        check_absent(tally, f"{name} {table} cache", dump([json.loads(v) for (v,) in rows]), FORBIDDEN_Q6)


# ------------------------------------------------------------------ the service
@pytest.fixture
def policy_service(fake_llm, policy_index, tmp_path: Path):
    srv = fake_llm(script=hostile_model())
    retriever = CachedRetriever(policy_index, path=tmp_path / "svc-search.sqlite")
    app = create_app(
        ServerSettings(max_concurrency=4, timeout_s=60, api_keys=("k-123",)),
        llm=fast_client(srv.base_url),
        retrievers={"policy": retriever},
    )
    with running(app) as url, httpx.Client(base_url=url, timeout=60, headers={"Authorization": "Bearer k-123"}) as c:
        yield c, srv


def test_service_responses_stay_in_scope(policy_service, policy_questions, tally) -> None:
    c, srv = policy_service
    q5, q6 = policy_questions["q5"], policy_questions["q6"]
    for name in ALL_STRATEGIES:
        for stream in (False, True):
            body = {
                "question": q5["question"],
                "strategy": name,
                "filters": q5["scope"],
                "max_steps": 3,
                "stream": stream,
            }
            tally.add("requests")
            if stream:
                with c.stream("POST", "/v1/ask", json=body) as resp:
                    assert resp.status_code == 200
                    events = list(sse_events(resp))
                text = dump(events)
                result = events[-1][1]
            else:
                resp = c.post("/v1/ask", json=body)
                assert resp.status_code == 200, resp.text[:300]
                text, result = resp.text, resp.json()
            assert result["finish_reason"] in (FINISHED, STEP_LIMIT), result["error"]
            check_absent(tally, f"{name} response (stream={stream})", text, FORBIDDEN_Q5)
            # the stored trace: visible to the same key and scope, to nobody else
            tid = result["id"]
            same = c.get(
                f"/v1/traces/{tid}",
                params={
                    "filters": [f"{k}={','.join(v) if isinstance(v, list) else v}" for k, v in q5["scope"].items()]
                },
            )
            assert same.status_code == 200
            check_absent(tally, f"{name} stored trace", same.text, FORBIDDEN_Q5)
            other = c.get(f"/v1/traces/{tid}", params={"filters": ["acl=all,finance", "version=2025", "region=境内"]})
            tally.add("scope_checks")
            assert other.status_code == 404
    # chat-completions endpoint with the same scope
    tally.add("requests")
    r = c.post(
        "/v1/chat/completions",
        json={
            "model": "sleuth-search-o1",
            "messages": [{"role": "user", "content": q5["question"]}],
            "filters": q5["scope"],
        },
    )
    assert r.status_code == 200, r.text[:300]
    check_absent(tally, "chat completion", r.text, FORBIDDEN_Q5)
    check_absent(tally, "service prompts", prompts_seen(srv), FORBIDDEN_Q5)
    # positive control through the service: q6's caller gets the audit file
    tally.add("requests")
    r6 = c.post("/v1/ask", json={"question": q6["question"], "strategy": "rag", "filters": q6["scope"]}).json()
    assert "fin-audit-2025" in [p["doc_id"] for p in r6["citations"]]
    check_absent(tally, "q6 response", dump(r6), FORBIDDEN_Q6)


# ------------------------------------------------------------------ random ACLs (property test)
LABELS = ["all", "eng", "fin", "hr", "legal"]
WORDS = ["river", "mountain", "budget", "audit", "salary", "harbour", "lantern", "orchard", "comet", "glacier"]


@settings(
    max_examples=12,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],  # no shrinking: a failure is shown as found, fast
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    docs=hs.lists(
        hs.tuples(
            hs.sets(hs.sampled_from(LABELS), min_size=1, max_size=2),
            hs.lists(hs.sampled_from(WORDS), min_size=3, max_size=8),
        ),
        min_size=3,
        max_size=12,
    ),
    caller=hs.sets(hs.sampled_from(LABELS), min_size=1, max_size=2),
    name=hs.sampled_from(SEARCHING),
    query=hs.lists(hs.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join),
)
def test_random_acls_never_leak(docs, caller, name, query, module_fake_llm, tmp_path_factory, tally) -> None:
    rows = [
        {"id": f"d{i}", "title": f"Doc {i}", "text": f"MARK{i}Q " + " ".join(words), "acl": sorted(acl)}
        for i, (acl, words) in enumerate(docs)
    ]
    folder = tmp_path_factory.mktemp("acl")
    idx = Index.build([write_jsonl(folder / "c.jsonl", rows)], folder / "ix")
    hidden: dict[str, list[str]] = {f"MARK{r['id'][1:]}Q": [] for r in rows if not set(r["acl"]) & caller}
    visible = [r["id"] for r in rows if set(r["acl"]) & caller]
    scope = Filters.make(acl=sorted(caller))
    # the index itself
    got = idx.search(query, 50, scope)
    tally.add("scope_checks")
    assert {p.doc_id for p in got} <= set(visible)
    assert idx.count(scope) == len(visible)
    # a whole run with a hostile, leaky model writing the queries
    srv = module_fake_llm(
        script=ScriptedModel(follow_up=query + "?", query=query, step_back=f"What is known about {query}?")
    )
    s = get_strategy(name, fast_client(srv.base_url), idx, lang="en", max_steps=2, max_tokens=256, k=5)
    r = s.run(f"What about {query}?", filters=scope)
    assert r.finish_reason in (FINISHED, STEP_LIMIT), r.error
    check_absent(tally, "random-ACL result", result_text(r), hidden)
    check_absent(tally, "random-ACL prompts", prompts_seen(srv), hidden)
    assert {p.doc_id for p in r.citations} <= set(visible)
    # positive control: a visible document that matches the query does reach the (leaky) model
    matching = [r_ for r_ in rows if r_["id"] in visible and set(query.split()) & set(r_["text"].split())]
    if matching:
        seen = prompts_seen(srv)
        assert any(f"MARK{m['id'][1:]}Q" in seen for m in matching), "visible passages reach the model"
    srv.stop()
