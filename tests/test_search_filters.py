"""Access scopes are enforced inside the index, before the top-k cut, on every path:
policy_zh (acl=all never sees fin-audit-2025 / hr-reward-2025), metadata equality and
ranges with the reference semantics of Filters.matches, and a Hypothesis property test
on a generated corpus with random ACLs."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sleuth.search import Filters, Index, Passage
from sleuth.search.tokenize import tokenize

RESTRICTED = {"fin-audit-2025", "hr-reward-2025"}


@pytest.fixture(scope="module")
def policy(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Index:
    return Index.build([data_dir / "policy_zh/corpus.jsonl"], tmp_path_factory.mktemp("pol") / "ix")


def _restricted_queries(data_dir: Path) -> list[str]:
    recs = [
        json.loads(ln) for ln in (data_dir / "policy_zh/corpus.jsonl").read_text(encoding="utf-8").splitlines() if ln
    ]
    queries: list[str] = []
    for r in recs:
        if r["id"] in RESTRICTED:
            queries += [r["text"], r["title"], r["section"], f"{r['title']} {r['text']}"]
            queries += tokenize(f"{r['title']} {r['section']} {r['text']}")
    return list(dict.fromkeys(queries))


def test_acl_all_never_surfaces_restricted_policy_docs(policy: Index, data_dir: Path) -> None:
    queries = _restricted_queries(data_dir)
    assert len(queries) > 30
    scopes = [
        Filters.parse(["acl=all"]),
        Filters.parse(["acl=all", "version=2025", "region=境内"]),
        Filters.parse(["acl=all", "version>=2024"]),
    ]
    unrestricted_hits = 0
    for q in queries:
        unrestricted_hits += any(p.doc_id in RESTRICTED for p in policy.search(q, k=12))
        for f in scopes:
            got = policy.search(q, k=12, filters=f)
            assert not {p.doc_id for p in got} & RESTRICTED, (q, f)
            assert all(f.matches(p) for p in got)
        assert not {p.doc_id for b in policy.search_batch([q, q + " 报销"], 12, scopes[0]) for p in b} & RESTRICTED
    assert unrestricted_hits > len(queries) // 2, "the queries do find the restricted docs when no scope is set"
    assert policy.count(scopes[0]) == 10
    st_ = policy.stats(scopes[0])
    assert st_["passages_visible"] == 10 and "passages" not in st_


def test_q5_and_q6_same_question_different_scopes(policy: Index, data_dir: Path) -> None:
    qs = {
        json.loads(ln)["id"]: json.loads(ln)
        for ln in (data_dir / "policy_zh/questions.jsonl").read_text(encoding="utf-8").splitlines()
        if ln
    }
    q5, q6 = qs["q5"], qs["q6"]
    assert q5["question"] == q6["question"]
    f5, f6 = (
        Filters.make(equals={"version": "2025", "region": "境内"}, acl=q5["scope"]["acl"]),
        Filters.make(equals={"version": "2025", "region": "境内"}, acl=q6["scope"]["acl"]),
    )
    assert "fin-audit-2025" not in {p.doc_id for p in policy.search(q5["question"], 10, f5)}
    top6 = policy.search(q6["question"], 3, f6)
    assert top6[0].doc_id == "fin-audit-2025" and "5%" in top6[0].text


def test_policy_evidence_found_within_scope(policy: Index, data_dir: Path) -> None:
    for ln in (data_dir / "policy_zh/questions.jsonl").read_text(encoding="utf-8").splitlines():
        q = json.loads(ln)
        scope = dict(q["scope"])
        f = Filters.make(equals={k: v for k, v in scope.items() if k != "acl"}, acl=scope["acl"])
        got = policy.search(q["question"], 5, f)
        assert all(f.matches(p) for p in got)
        found = {p.doc_id for p in got}
        assert set(q["evidence"]) & found or not q["evidence"], (q["id"], found)


def test_chinese_queries_find_chinese_passages(policy: Index) -> None:
    got = policy.search("不可抗力导致无法按期提交报销怎么办？", 3, Filters.parse(["acl=all"]))
    assert got[0].doc_id == "trv-2025-03"
    assert policy.search("住宿标准 一线城市", 1)[0].doc_id == "trv-2025-04"


# ---------------------------------------------------------------------------- generated corpus

LABELS = ["all", "hr", "finance", "legal", "ops"]
WORDS = [f"w{i}" for i in range(40)]
GEN_N = 400


def _generated(seed: int = 7) -> list[dict]:
    rnd = random.Random(seed)
    recs = []
    for i in range(GEN_N):
        rec = {
            "id": f"g{i}",
            "title": f"doc {i}",
            "text": " ".join(rnd.choices(WORDS, k=rnd.randint(3, 12))),
            "acl": rnd.sample(LABELS, rnd.randint(0, 2)),
            "version": rnd.choice(["2023", "2024", "2025"]),
            "region": rnd.choice(["north", "south", ""]),
        }
        if rnd.random() < 0.8:
            rec["year"] = rnd.randint(1990, 2030)
        if rnd.random() < 0.5:
            rec["tags"] = rnd.sample(["red", "green", "blue"], rnd.randint(1, 2))
        recs.append(rec)
    return recs


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Index, list[Passage]]:
    d = tmp_path_factory.mktemp("gen")
    src = d / "gen.jsonl"
    src.write_text("\n".join(json.dumps(r) for r in _generated()), encoding="utf-8")
    idx = Index.build([src], d / "ix", default_acl=())
    return idx, [p for _, p in idx.store.iter_live()]


filters_st = st.builds(
    lambda acl, version, region, lo, hi, tag: Filters.make(
        equals={
            **({"version": version} if version else {}),
            **({"region": region} if region is not None else {}),
            **({"tags": tag} if tag else {}),
        },
        ranges={"year": (lo, hi)} if (lo is not None or hi is not None) else None,
        acl=acl,
    ),
    acl=st.one_of(st.none(), st.lists(st.sampled_from(LABELS), max_size=3)),
    version=st.one_of(st.none(), st.lists(st.sampled_from(["2023", "2024", "2025", "1999"]), min_size=1, max_size=2)),
    region=st.one_of(st.none(), st.sampled_from(["north", "south"])),
    lo=st.one_of(st.none(), st.integers(1985, 2035)),
    hi=st.one_of(st.none(), st.integers(1985, 2035)),
    tag=st.one_of(st.none(), st.sampled_from(["red", "green", "blue"])),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4), k=st.integers(1, 30), f=filters_st)
def test_property_no_out_of_scope_passage_lexical(
    generated: tuple[Index, list[Passage]], words: list[str], k: int, f: Filters
) -> None:
    idx, corpus = generated
    visible = [p for p in corpus if f.matches(p)]
    got = idx.search(" ".join(words), k, f)
    assert all(f.matches(p) for p in got), "an out-of-scope passage was returned"
    # the scope is applied before the top-k cut: exactly as many hits as visible matching passages allow
    matching = [p for p in visible if set(words) & set(p.text.split())]
    assert len(got) == min(k, len(matching))
    assert idx.count(f) == len(visible)


def test_generated_acl_semantics_exact(generated: tuple[Index, list[Passage]]) -> None:
    idx, corpus = generated
    assert idx.count(Filters.make(acl=[])) == 0, "an empty label set sees nothing"
    no_acl = [p for p in corpus if not p.acl]
    assert no_acl, "some generated passages have no ACL at all"
    every = Filters.make(acl=LABELS)
    assert idx.count(every) == len(corpus) - len(no_acl), "a passage without ACL is visible to no scope"
    assert idx.count(None) == len(corpus)
