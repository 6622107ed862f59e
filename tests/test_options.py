"""Typed strategy options: defaults, the one ``--opt`` parser, and unknown or bad options
refused everywhere (Python, ``sleuth ask``, ``sleuth eval``, HTTP) with the valid ones named."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from fake_openai_server import FakeOpenAIServer
from serverkit import running
from sleuth.eval.runner import EvalConfig, EvalError, run_eval
from sleuth.llm import get_llm
from sleuth.search import open_retriever
from sleuth.server import ServerSettings, create_app
from sleuth.strategies import (
    STRATEGIES,
    OptionsError,
    StrategyOptions,
    build_strategy,
    get_strategy,
    parse_opts,
    resolve_strategy_class,
)
from sleuth.strategies.options import BaselineOptions, SearchO1Options, SelfAskOptions, StepBackOptions
from sleuth.strategies.registry import check_run_options, split_spec

ROOT = Path(__file__).resolve().parents[1]
STEP_BACK = [
    "lang",
    "k",
    "max_steps",
    "max_tokens",
    "context_chars",
    "rewrite",
    "rewrite_check",
    "history_tokens",
    "mode",
    "short_support",
    "grounding",
    "extract_short",
    "k_original",
    "k_stepback",
    "k_context",
    "rrf_k",
    "documents",
    "rule_form",
    "rerank",
    "abstention_reread",
    "verdict",
    "verdict_clauses",
]
DOCS = [
    {"id": "jaws", "title": "Jaws (film)", "text": "Jaws is a 1975 film directed by Steven Spielberg."},
    {"id": "spielberg", "title": "Steven Spielberg", "text": "Steven Spielberg, who directed Jaws, is a director."},
    {"id": "paris", "title": "Paris", "text": "Paris first screened Jaws, the film, in 1975."},
]


# -- defaults: the values the strategies used before options were typed --------------------------
def test_defaults_are_the_strategies_defaults() -> None:
    common = {"lang": "auto", "k": 5, "max_steps": 6, "context_chars": None, "rewrite": True, "history_tokens": 768}
    common |= {"rewrite_check": True}
    common |= {"mode": "default", "short_support": True, "grounding": True, "extract_short": True}
    max_tokens = {
        "direct": 256,
        "cot": 256,
        "rag": 256,
        "self-ask": 256,
        "rat": 400,
        "step-back": 320,
        "search-o1": 256,
    }
    own: dict[str, dict[str, Any]] = {
        "direct": {},
        "cot": {},
        "rag": {},
        "self-ask": {
            "extract_k": 3,
            "extract_max_tokens": 64,
            "max_prompt_chars": 7000,
            "repeat_guard": True,
            "final_read": True,
        },
        "rat": {"n_passages": 3},
        "step-back": {
            "k_original": 5,
            "k_stepback": 5,
            "k_context": None,
            "rrf_k": 60,
            "documents": "auto",
            "rule_form": True,
            "rerank": True,
            "abstention_reread": True,
            "verdict": True,
            "verdict_clauses": 3,
        },
        "search-o1": {
            "max_searches": 6,
            "max_turns": 9,
            "rid_max_tokens": 160,
            "doc_chars": 600,
            "max_prompt_chars": 6000,
            "max_refusals": 2,
            "batch_window_s": 0.05,
            "repeat_guard": True,
            "final_read": False,
        },
    }
    assert set(own) == set(STRATEGIES)
    for name, cls in STRATEGIES.items():
        s = get_strategy(name, None)
        want = {**common, "max_tokens": max_tokens[name], **own[name]}
        assert {n: getattr(s.opts, n) for n in cls.Options.names()} == want, name
        assert (s.lang, s.k, s.max_steps, s.max_tokens) == ("auto", 5, 6, max_tokens[name])
        assert issubclass(cls.Options, StrategyOptions) and cls.Options is not StrategyOptions


def test_derived_defaults_follow_the_options_they_come_from() -> None:
    assert SearchO1Options(max_steps=2).max_searches == 2 and SearchO1Options(max_steps=2).max_turns == 5
    assert SearchO1Options(max_steps=2, max_searches=4).max_turns == 7
    assert SearchO1Options(max_turns=3).max_turns == 3
    sb = StepBackOptions(k=4, k_original=2)
    assert (sb.k_original, sb.k_stepback, sb.k_context) == (2, 4, None)
    assert (sb.context_size(rules=False), sb.context_size(rules=True)) == (2, 6)
    assert StepBackOptions(k_context=3).context_size(rules=True) == 3
    assert StrategyOptions().context_budget("en") == 4000 and StrategyOptions().context_budget("zh") == 2000
    assert StrategyOptions(context_chars=600).context_budget("en") == 600
    assert get_strategy("rat", None, max_tokens=None).max_tokens == 400  # None: the strategy's default
    assert get_strategy("rat", None, max_tokens=50).max_tokens == 50
    assert get_strategy("search-o1", None, max_steps=3).opts.max_searches == 3


def test_mode_paper_switches_every_repair_off_and_each_can_be_set() -> None:
    for name, cls in STRATEGIES.items():
        assert cls.Options(mode="paper").repairs() == [], name
        assert "short_support" in cls.Options().repairs(), name
    assert SelfAskOptions(mode="paper", final_read=True).repairs() == ["final_read"]
    assert SearchO1Options().final_read is False and SearchO1Options(final_read=True).final_read is True
    assert StepBackOptions(verdict=False).repairs() == [
        "short_support",
        "grounding",
        "extract_short",
        "rule_form",
        "rerank",
        "abstention_reread",
    ]
    with pytest.raises(OptionsError, match="mode must be default or paper"):
        SelfAskOptions(mode="published")


def test_options_are_frozen_and_values_take_their_type() -> None:
    o = SelfAskOptions(extract_k=2.0, max_prompt_chars=1.0)
    assert o.extract_k == 2 and isinstance(o.extract_k, int)
    assert o.max_prompt_chars == 1 and isinstance(o.max_prompt_chars, int)
    with pytest.raises(AttributeError):
        o.extract_k = 5  # type: ignore[misc]


# -- Python API -------------------------------------------------------------------------------
def test_unknown_option_names_the_closest_and_every_valid_one() -> None:
    with pytest.raises(OptionsError) as e:
        get_strategy("step-back", None, None, k_stepbak=3)
    msg = str(e.value)
    assert "'k_stepbak'" in msg and "step-back" in msg and "did you mean 'k_stepback'?" in msg
    assert msg.endswith("valid options: " + ", ".join(STEP_BACK))
    assert isinstance(e.value, ValueError)
    with pytest.raises(OptionsError, match=r"unknown option 'zzz' for rag; valid options: lang, k, max_steps"):
        get_strategy("rag", None, None, zzz=1)  # nothing close: no suggestion, still the list
    with pytest.raises(OptionsError, match="did you mean 'extract_k'"):
        get_strategy("self-ask", None, None, extrac_k=2)
    with pytest.raises(OptionsError, match="unknown option 'rid_max_tokens' for self-ask"):
        get_strategy("self-ask", None, None, rid_max_tokens=10)  # another strategy's option


@pytest.mark.parametrize(
    ("name", "opts", "needle"),
    [
        ("step-back", {"k_stepback": "abc"}, "k_stepback must be a whole number from 1 to 50, not 'abc'"),
        ("step-back", {"k_context": 2.5}, "k_context must be a whole number"),
        ("step-back", {"rrf_k": -1}, "rrf_k must be a whole number from 0 to 10000, not -1"),
        ("self-ask", {"extract_k": True}, "extract_k must be a whole number"),
        ("self-ask", {"extract_k": 0}, "extract_k must be a whole number from 1 to 50, not 0"),
        ("self-ask", {"repeat_guard": "high"}, "repeat_guard must be true or false"),
        ("self-ask", {"mode": "published"}, "mode must be default or paper"),
        ("search-o1", {"batch_window_s": -0.1}, "batch_window_s must be a number from 0 to 600"),
        ("search-o1", {"batch_window_s": float("nan")}, "batch_window_s must be a number"),
        ("search-o1", {"max_turns": None, "max_refusals": None}, "max_refusals must be a whole number"),
        ("rat", {"n_passages": [3]}, "n_passages must be a whole number"),
        ("rag", {"context_chars": 0}, "context_chars must be a whole number from 1 to 200000"),
        ("rag", {"lang": "fr"}, "lang must be auto, en or zh, not 'fr'"),
        ("rag", {"k": 0}, "k must be a whole number from 1 to 50, not 0"),
        ("rat", {"n_passages": 10**9}, "n_passages must be a whole number from 1 to 50, not 1000000000"),
        ("search-o1", {"max_turns": 10**9}, "max_turns must be a whole number from 1 to 23"),
        ("step-back", {"k_original": 51}, "k_original must be a whole number from 1 to 50, not 51"),
    ],
)
def test_wrong_values_are_refused_clearly(name: str, opts: dict[str, Any], needle: str) -> None:
    with pytest.raises(OptionsError) as e:
        get_strategy(name, None, None, **opts)
    assert needle in str(e.value)


# -- the one --opt parser ------------------------------------------------------------------------
def test_parse_opts_reads_keys_and_values_one_way() -> None:
    got = parse_opts(
        [
            "k-stepback=3",
            "restate_threshold=0.5",
            "flag=TRUE",
            "other=false",
            "big=1e3",
            "none=null",
            "items=[1, 2]",
            'quoted="3"',
            "lang= zh ",
            "text=hello world",
            "eq=a=b",
        ]
    )
    assert got == {
        "k_stepback": 3,
        "restate_threshold": 0.5,
        "flag": True,
        "other": False,
        "big": 1000.0,
        "none": None,
        "items": [1, 2],
        "quoted": "3",
        "lang": "zh",
        "text": "hello world",
        "eq": "a=b",
    }
    assert parse_opts(["k=1", "k=2"]) == {"k": 2}
    for bad in ("novalue", "=3", "two words=1", "1k=3"):
        with pytest.raises(OptionsError, match="key=value"):
            parse_opts([bad])


# -- sleuth ask ------------------------------------------------------------------------------------
def _main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    from sleuth.cli import main

    with pytest.raises(SystemExit) as exc:
        main(args)
    code = exc.value.code
    return (code if isinstance(code, int) else 1), " ".join(capsys.readouterr().err.split())


def test_cli_ask_refuses_an_unknown_option_before_the_model_starts(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SLEUTH_LLM_BASE_URL", "http://127.0.0.1:9")  # nothing listens: a run would fail
    code, err = _main(["ask", "Who directed Jaws?", "--strategy", "step-back", "--opt", "k_stepbak=3"], capsys)
    assert code == 2 and "Traceback" not in err
    assert "unknown option 'k_stepbak' for step-back; did you mean 'k_stepback'?" in err
    assert "valid options: " + ", ".join(STEP_BACK) in err
    code, err = _main(["ask", "Q", "-s", "self-ask", "--opt", "extract-k=abc"], capsys)
    assert code == 2 and "extract_k must be a whole number from 1 to 50, not 'abc'" in err


def test_cli_ask_exact_command_from_the_issue(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    env["SLEUTH_LLM_BASE_URL"] = "http://127.0.0.1:9"
    cmd = [sys.executable, "-m", "sleuth", "ask", "Q", "--strategy", "step-back", "--opt", "k_stepbak=3"]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    err = " ".join(p.stderr.split())
    assert p.returncode != 0 and "Traceback" not in p.stderr
    assert "k_stepback" in err and "valid options: " + ", ".join(STEP_BACK) in err


def test_cli_opt_overrides_the_flag_and_is_checked(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _main(["ask", "Q", "-s", "rag", "--k", "3", "--opt", "k=0"], capsys)
    assert code == 2 and "k must be a whole number from 1 to 50, not 0" in err


# -- sleuth eval -------------------------------------------------------------------------------------
def _questions(tmp_path: Path) -> Path:
    p = tmp_path / "q.jsonl"
    p.write_text(json.dumps({"id": "q1", "question": "Who directed Jaws?", "answer": "Steven Spielberg"}) + "\n")
    return p


def test_eval_refuses_an_unknown_option_before_running_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, out = _questions(tmp_path), tmp_path / "run"
    cfg = EvalConfig(
        data=str(data),
        out=str(out),
        setting="closed",
        strategies=["direct", "step-back"],
        strategy_options={"k_stepbak": 3},
    )
    with pytest.raises(EvalError) as e:
        run_eval(cfg, progress=False)
    assert "unknown option 'k_stepbak' for direct, step-back; did you mean 'k_stepback'?" in str(e.value)
    assert "valid options: " + ", ".join(STEP_BACK) in str(e.value)
    assert not out.exists()
    cfg = EvalConfig(data=str(data), out=str(out), setting="closed", strategies=["rag"], strategy_options={"k": "x"})
    with pytest.raises(EvalError, match="k must be a whole number"):
        run_eval(cfg, progress=False)
    args = ["eval", "--data", str(data), "--setting", "closed", "--strategies", "cot,step-back", "--out", str(out)]
    code, err = _main([*args, "--opt", "k-stepbak=3", "--no-progress"], capsys)
    assert code == 2 and "Traceback" not in err and "did you mean 'k_stepback'?" in err and "valid options" in err
    code, err = _main([*args, "--opt", "k_stepback"], capsys)
    assert code == 2 and "--opt 'k_stepback' is not of the form key=value" in err
    assert not out.exists()


def test_run_options_go_to_the_strategies_that_have_them() -> None:
    opts = {"k": 4, "k_stepback": 2, "extract_k": 1}
    checked = check_run_options(["direct", "step-back", "self-ask"], opts)
    assert checked["step-back"].k_stepback == 2 and checked["self-ask"].extract_k == 1
    assert checked["direct"].k == 4 and not hasattr(checked["direct"], "k_stepback")
    assert build_strategy("direct", None, None, opts).opts == BaselineOptions(k=4)
    sb = build_strategy("step-back", None, None, opts)
    assert (sb.k, sb.opts.k_original, sb.opts.k_stepback) == (4, 4, 2)
    with pytest.raises(OptionsError, match="unknown option 'extract_k' for direct, step-back"):
        check_run_options(["direct", "step-back"], opts)
    assert resolve_strategy_class("sleuth.strategies.rag:RAG") is STRATEGIES["rag"]
    assert check_run_options(["sleuth.strategies.rag:RAG"], {"k": 2})["sleuth.strategies.rag:RAG"].k == 2


def test_a_strategy_spec_carries_its_own_options() -> None:
    """``self-ask[mode=paper]``: one run holds Self-Ask as published beside Sleuth's, or a repair on and off."""
    checked = check_run_options(["self-ask", "self-ask[mode=paper]", "rag[k=2,grounding=false]"], {"k": 4})
    assert checked["self-ask"].mode == "default" and checked["self-ask"].final_read is True
    paper = checked["self-ask[mode=paper]"]
    assert paper.mode == "paper" and paper.repairs() == [] and paper.k == 4  # the run's options, then its own
    assert checked["rag[k=2,grounding=false]"].k == 2 and checked["rag[k=2,grounding=false]"].grounding is False
    built = build_strategy("self-ask[mode=paper]", None, None, {"k": 4})
    assert type(built) is STRATEGIES["self-ask"] and built.opts == paper
    assert split_spec("sleuth.strategies.rag:RAG[k=3]") == ("sleuth.strategies.rag:RAG", {"k": 3})
    with pytest.raises(OptionsError, match=re.escape("unknown option 'k_stepback' for rag[k_stepback=2]")):
        check_run_options(["rag[k_stepback=2]"], {})
    for bad in ("rag[k=2", "rag]", "rag[k=2][k=3]"):
        with pytest.raises(ValueError, match=re.escape("written name[key=value,...]")):
            check_run_options([bad], {})
    with pytest.raises(OptionsError, match=re.escape("'rag[k=2,x]': 'x' is not of the form key=value")):
        check_run_options(["rag[k=2,x]"], {})  # the spec named, not --opt


# -- HTTP ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Any:
    d = tmp_path_factory.mktemp("docs")
    (d / "docs.jsonl").write_text("".join(json.dumps(x) + "\n" for x in DOCS), encoding="utf-8")
    docs = open_retriever(str(d / "docs.jsonl"), cache_dir=d / "idx")
    with FakeOpenAIServer(script=lambda body: "What made Jaws?\nSo the answer is: Steven Spielberg") as fake:
        llm = get_llm("fake-model", base_url=fake.base_url, api_key="x", cache=False, max_retries=0)
        app = create_app(ServerSettings(max_concurrency=2, timeout_s=60), llm=llm, retrievers={"docs": docs})
        with running(app) as url:
            yield url, fake


def _error(r: httpx.Response) -> dict[str, Any]:
    assert r.status_code == 422, r.text
    return r.json()["error"]


def test_http_refuses_unknown_options_with_422(api: Any) -> None:
    url, fake = api
    before = len(fake.requests)
    with httpx.Client(base_url=url, timeout=60) as c:
        body = {"question": "Who directed Jaws?", "strategy": "step-back", "options": {"k_stepbak": 3}}
        err = _error(c.post("/v1/ask", json=body))
        assert err["param"] == "options" and err["type"] == "invalid_request_error"
        assert err["message"].startswith(
            "options: unknown option 'k_stepbak' for step-back; did you mean 'k_stepback'?"
        )
        assert err["message"].endswith("valid options: " + ", ".join(STEP_BACK))
        err = _error(c.post("/v1/ask", json={**body, "options": {"k_stepback": "abc"}}))
        assert "k_stepback must be a whole number" in err["message"]
        err = _error(c.post("/v1/ask", json={"question": "Who directed Jaws?", "k_stepback": 3}))
        assert (
            err["message"] == 'k_stepback: Extra inputs are not permitted (a strategy\'s own options go in "options")'
        )
        err = _error(c.post("/v1/ask", json={**body, "options": {"k": 50}}))
        assert "'k' is a field of the request itself" in err["message"]
        chat = {"model": "sleuth-rat", "messages": [{"role": "user", "content": "Who directed Jaws?"}]}
        err = _error(c.post("/v1/chat/completions", json={**chat, "options": {"n_pasages": 2}}))
        assert "unknown option 'n_pasages' for rat; did you mean 'n_passages'?" in err["message"]
        assert err["message"].endswith(
            "valid options: lang, k, max_steps, max_tokens, context_chars, rewrite, rewrite_check, history_tokens, mode, short_support, grounding, extract_short, n_passages"
        )
    assert len(fake.requests) == before  # nothing ran


def test_http_options_reach_the_strategy(api: Any) -> None:
    url, _ = api
    with httpx.Client(base_url=url, timeout=60) as c:
        body = {
            "question": "Who directed Jaws?",
            "strategy": "step-back",
            "k": 3,
            "max_tokens": 32,
            "options": {"k-original": 1, "k_stepback": 2},
        }
        r = c.post("/v1/ask", json=body)
        assert r.status_code == 200, r.text
        searches = {e["data"]["route"]: e["data"]["passages"] for e in r.json()["trace"] if e["kind"] == "search"}
        assert len(searches["original"]) == 1 and len(searches["stepback"]) == 2


# -- docs ------------------------------------------------------------------------------------------------
def test_docs_list_every_option_with_its_type_and_default() -> None:
    text = (ROOT / "docs" / "strategies.md").read_text(encoding="utf-8")
    common = StrategyOptions.names()
    rows = [r for cls in STRATEGIES.values() for r in cls.Options.describe() if r["name"] not in common]
    for row in [*StrategyOptions.describe(), *rows]:
        line = f"| `{row['name']}` | {row['type']} | {row['default']} |"
        assert line in text, line


def test_an_option_a_plugin_bounds_on_one_side_only_is_checked_on_that_side() -> None:
    """Sleuth's own numeric options declare both bounds; a strategy written outside Sleuth may declare one."""
    from dataclasses import dataclass

    from sleuth.strategies.options import OptionsError, StrategyOptions, option

    @dataclass(frozen=True)
    class Plugin(StrategyOptions):
        delay: float = option(0.0, "seconds to sleep before answering", minimum=0.0)

    assert Plugin.parse({"delay": 1e6}).delay == 1e6
    with pytest.raises(OptionsError, match="delay must be a number of at least 0, not -1"):
        Plugin.parse({"delay": -1})
