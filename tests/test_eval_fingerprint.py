"""The behaviour fingerprint: a pure refactor keeps it, a change of what a strategy sends or returns does not."""

from __future__ import annotations

import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sleuth.eval.fingerprint import COMBINED, _owner, behaviour, code_fingerprint, code_lang, templates_for
from sleuth.eval.probe import BATCH, BATCH_ONLY, CORPUS, LANGS, QUESTIONS
from sleuth.strategies.lang import detect_lang

SRC = Path(__file__).resolve().parents[1] / "src" / "sleuth" / "strategies"
BUILTIN = ("direct", "cot", "rag", "self-ask", "rat", "step-back", "search-o1")


@pytest.fixture
def plugins(tmp_path: Path) -> Iterator[Path]:
    """A folder on sys.path for strategy modules loaded as ``module:Class``."""
    sys.path.insert(0, str(tmp_path))
    yield tmp_path
    sys.path.remove(str(tmp_path))


def _copy(folder: Path, stem: str, module: str, edits: list[tuple[str, str]]) -> None:
    """A copy of ``strategies/<stem>.py`` as ``<module>.py`` with regex ``edits`` applied (each must match)."""
    text = (SRC / f"{stem}.py").read_text(encoding="utf-8")
    for pattern, repl in edits:
        text, n = re.subn(pattern, repl, text)
        assert n, pattern
    (folder / f"{module}.py").write_text(text, encoding="utf-8")


def test_every_builtin_has_its_own_stable_fingerprint() -> None:
    prints = {s: code_fingerprint(s) for s in BUILTIN}
    assert all(re.fullmatch(r"[0-9a-f]{12}", fp) for fp in prints.values())
    assert len(set(prints.values())) == len(prints)
    code_fingerprint.cache_clear()
    again = {s: code_fingerprint(s) for s in ("rag", "search-o1")}  # search-o1: a concurrent batch too
    assert again == {s: prints[s] for s in again}  # computed again: the same


def test_each_language_has_its_own_fingerprint() -> None:
    by_lang = {lang: {s: code_fingerprint(s, lang) for s in BUILTIN} for lang in (*LANGS, COMBINED)}
    for lang, prints in by_lang.items():
        assert all(re.fullmatch(r"[0-9a-f]{12}", fp) for fp in prints.values()), lang
        assert len(set(prints.values())) == len(prints), lang
    assert all(len({by_lang[lang][s] for lang in by_lang}) == 3 for s in BUILTIN)  # en, zh and both differ
    assert all(code_fingerprint(s) == by_lang[COMBINED][s] for s in BUILTIN)  # no language: both
    assert code_fingerprint("rag", "zh+en") == by_lang[COMBINED]["rag"]  # the order does not matter
    with pytest.raises(ValueError, match="no language 'fr'"):
        code_fingerprint("rag", "fr")


def test_the_probe_suite_is_split_by_language() -> None:
    cjk = re.compile(r"[\u4e00-\u9fff]")
    for lang in LANGS:
        assert QUESTIONS[lang] and {detect_lang(q) for q, _ in QUESTIONS[lang]} == {lang}
        assert all(0 <= i < len(QUESTIONS[lang]) for i in BATCH[lang])
        assert all(detect_lang(q) == lang for q in BATCH_ONLY[lang])
        passages = CORPUS[lang].read_text(encoding="utf-8").splitlines()
        assert passages and all(bool(cjk.search(p)) == (lang == "zh") for p in passages), lang


def test_the_english_probe_never_reaches_chinese_tokenisation() -> None:
    """The English fingerprint is computed without ever loading jieba (Chinese segmentation): a change to
    how Chinese text is tokenised cannot change it.  A fresh process, as this one may have loaded jieba."""
    import subprocess

    code = (
        "import sys\n"
        "from sleuth.eval.fingerprint import code_fingerprint\n"
        f"for s in {BUILTIN!r}: code_fingerprint(s, 'en')\n"
        "assert 'jieba' not in sys.modules, 'the English probe loaded jieba'\n"
        "code_fingerprint('rag', 'zh')\n"
        "assert 'jieba' in sys.modules, 'the Chinese probe did not segment Chinese text'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_change_in_one_language_leaves_the_other_language_current(plugins: Path) -> None:
    for lang, other in (("zh", "en"), ("en", "zh")):
        module = f"reworded_{lang}_rag"
        (plugins / f"{module}.py").write_text(
            "from sleuth.strategies.rag import RAG\n\n\n"
            "class Reworded(RAG):\n"
            "    def prompt(self, st, name, **fields):\n"
            "        text = super().prompt(st, name, **fields)\n"
            f"        return text + ' 请简短。' if st.result.lang == {lang!r} else text\n",
            encoding="utf-8",
        )
        plugin = f"{module}:Reworded"
        assert code_fingerprint(plugin, other) == code_fingerprint("rag", other), lang  # untouched: current
        assert code_fingerprint(plugin, lang) != code_fingerprint("rag", lang), lang
        assert code_fingerprint(plugin) != code_fingerprint("rag"), lang  # a run in both languages: stale


def test_the_run_language_comes_from_its_questions() -> None:
    assert code_lang(["Who directed Jaws?", "When was it released?"]) == "en"
    assert code_lang(["《大白鲨》的导演是谁？", "年假每年有几天？"]) == "zh"
    assert code_lang(["Who directed Jaws?", "年假每年有几天？"]) == COMBINED == "en+zh"
    assert code_lang([]) == COMBINED
    assert code_lang(["Who directed Jaws?"], "zh") == "zh"  # --opt lang=zh: Chinese prompts throughout
    assert code_lang(["年假每年有几天？"], "auto") == "zh"


@pytest.mark.parametrize("lang", LANGS)
def test_the_probe_walks_the_strategies_main_branches(lang: str) -> None:
    probes = {s: behaviour(s, lang)["probe"] for s in ("self-ask", "search-o1", "rag")}
    kinds = {s: {e for r in p["runs"] for e in r["events"]} for s, p in probes.items()}
    assert {"follow_up", "search", "intermediate_answer"} <= kinds["self-ask"]
    assert {"search", "reason_in_documents"} <= kinds["search-o1"]
    batch = probes["search-o1"]["batch"]
    # run_batch was probed, with the batch-only questions
    assert batch is not None and len(batch["results"]) == len(BATCH[lang]) + len(BATCH_ONLY[lang]) and batch["requests"]
    assert probes["rag"]["batch"] is None
    rag = probes["rag"]["runs"]
    assert any(r["searches"] and r["searches"][0]["ids"] for r in rag)
    assert any(r["searches"] and not r["searches"][0]["ids"] for r in rag)  # the filtered-out question
    assert all(r["requests"] for r in rag) and all(r["requests"][0]["path"].endswith("/chat/completions") for r in rag)
    assert [r["question"] for r in rag] == [q for q, _ in QUESTIONS[lang]]  # that language's questions only


def test_a_repeat_guard_that_takes_one_character_for_a_copy_is_another_behaviour(plugins: Path) -> None:
    """rgb_zh: "北京 冬残奥会 开幕日期" after "北京 冬奥会 开幕日期" was refused as a repeat (character
    overlap 0.9); the batch-only Chinese probe question walks that pair, so the old rule is seen."""
    (plugins / "charwise_o1.py").write_text(
        "from sleuth.strategies.search_o1 import NEAR_DUPLICATE, SearchO1\n"
        "from sleuth.strategies.text import normalize_query, similarity\n\n\n"
        "class Charwise(SearchO1):\n"
        "    def _earlier(self, run, query):\n"
        "        key = normalize_query(query)\n"
        "        same = next((q for q in run.results if normalize_query(q) == key), None)\n"
        "        if same is not None:\n"
        "            return same\n"
        "        best = max(run.results, key=lambda q: similarity(key, q), default=None)\n"
        "        return best if best is not None and similarity(key, best) >= NEAR_DUPLICATE else None\n",
        encoding="utf-8",
    )
    assert code_fingerprint("charwise_o1:Charwise", "zh") != code_fingerprint("search-o1", "zh")
    assert code_fingerprint("charwise_o1:Charwise", "en") == code_fingerprint("search-o1", "en")


def test_the_english_batch_probe_reaches_the_restated_query_rule() -> None:
    """Reason-in-Documents writes "Don Quixote is a comedy film." for the query "comedy film Don
    Quixote", the words spread over two probe passages: the rule drops it, so only the comedy
    film's passage is cited; a change to the rule changes what the probe records."""
    batch = behaviour("search-o1", "en")["probe"]["batch"]
    last = batch["results"][-1]
    assert last["answer"] == "The Million Dollar Duck" and last["citations"] == ["duck#0"]


def test_a_pure_refactor_keeps_the_fingerprint(plugins: Path) -> None:
    # renamed local variables and fields, reformatted calls and added comments: the same behaviour
    _copy(
        plugins,
        "rag",
        "refactored_rag",
        [
            (r"\bdocs\b", "context"),
            (r"\bpassages\b", "found"),
            (r"\bc\b", "reply"),
            (r"    def solve\(", "    # the baseline: one search, one answer\n    def solve("),
            (r'route="original"\)', 'route="original",  # the question itself\n        )'),
            (r'step="answer"\)', 'step="answer",\n        )'),
        ],
    )
    # the run's state renamed in its own module (two of its fields), and Self-Ask using the copy
    _copy(
        plugins,
        "self_ask_scaffold",
        "refactored_scaffold",
        [(r"(?m)^    prompt: str$", "    scaffold: str"), (r"(?m)^    steps: int = 0$", "    n_steps: int = 0")],
    )
    _copy(
        plugins,
        "self_ask",
        "refactored_self_ask",
        [
            (r"from sleuth\.strategies\.self_ask_scaffold import", "from refactored_scaffold import"),
            (r"\bprompt\b(?!\()", "scaffold"),  # the Scaffold field and the local, not the prompt() method
            (r"\.steps\b", ".n_steps"),
            (r"\bthreshold\b", "restate_at"),
            (r"\bsim_q\b", "overlap"),
            (
                r"run = Scaffold\(st, question, scaffold, len\(scaffold\), words, sep, restate_at, repeat_at, max_chars\)",
                "# the model's part starts after the few-shot prompt\n        run = Scaffold(\n"
                "            st=st, question=question, scaffold=scaffold, start=len(scaffold), words=words, sep=sep,\n"
                "            restate_at=restate_at, repeat_at=repeat_at, max_chars=max_chars,\n        )",
            ),
        ],
    )
    assert code_fingerprint("refactored_rag:RAG") == code_fingerprint("rag")
    assert code_fingerprint("refactored_self_ask:SelfAsk") == code_fingerprint("self-ask")


def _options_plugin(folder: Path, module: str, base: str, cls: str, options: str, field: str) -> None:
    """A ``module:Sub`` strategy: ``strategies/<base>.py``'s ``cls`` whose ``Options`` change one default."""
    (folder / f"{module}.py").write_text(
        "from dataclasses import dataclass\n"
        "from typing import ClassVar\n\n"
        f"from sleuth.strategies.{base} import {cls}\n"
        f"from sleuth.strategies.options import {options}\n\n\n"
        "@dataclass(frozen=True)\n"
        f"class Changed({options}):\n"
        f"    {field}\n\n\n"
        f"class Sub({cls}):\n"
        "    Options = Changed\n",
        encoding="utf-8",
    )


def test_a_changed_default_option_changes_the_fingerprint(plugins: Path) -> None:
    _options_plugin(plugins, "fewer_extract", "self_ask", "SelfAsk", "SelfAskOptions", "extract_k: int = 1")
    assert code_fingerprint("fewer_extract:Sub") != code_fingerprint("self-ask")
    _options_plugin(plugins, "longer_rag", "rag", "RAG", "RAGOptions", "DEFAULT_MAX_TOKENS: ClassVar[int] = 300")
    assert code_fingerprint("longer_rag:Sub") != code_fingerprint("rag")
    # defaults the short probe never reaches: the typed options themselves are hashed
    _options_plugin(plugins, "longer_scaffold", "self_ask", "SelfAsk", "SelfAskOptions", "max_prompt_chars: int = 7001")
    assert code_fingerprint("longer_scaffold:Sub") != code_fingerprint("self-ask")
    _options_plugin(plugins, "more_refusals", "search_o1", "SearchO1", "SearchO1Options", "max_refusals: int = 3")
    assert code_fingerprint("more_refusals:Sub") != code_fingerprint("search-o1")
    # the same options under another class name: the same behaviour
    _options_plugin(plugins, "same_rag", "rag", "RAG", "RAGOptions", "k: int = 5")
    assert code_fingerprint("same_rag:Sub") == code_fingerprint("rag")


def test_an_opt_in_option_at_its_neutral_value_leaves_the_fingerprint(plugins: Path) -> None:
    """Adding an option whose default is the behaviour before it (``neutral``) makes no record stale;
    switching it on is another behaviour; a new option without ``neutral`` counts as a default."""
    opt_in = 'extra: bool = option(False, "an opt-in addition", neutral=False)'
    _options_plugin(plugins, "opt_in_rag", "rag", "RAG", "RAGOptions", opt_in)
    (plugins / "opt_in_rag.py").write_text(
        "from sleuth.strategies.options import option\n" + (plugins / "opt_in_rag.py").read_text(), encoding="utf-8"
    )
    assert code_fingerprint("opt_in_rag:Sub") == code_fingerprint("rag")
    _options_plugin(plugins, "opt_on_rag", "rag", "RAG", "RAGOptions", opt_in.replace("option(False", "option(True"))
    (plugins / "opt_on_rag.py").write_text(
        "from sleuth.strategies.options import option\n" + (plugins / "opt_on_rag.py").read_text(), encoding="utf-8"
    )
    assert code_fingerprint("opt_on_rag:Sub") != code_fingerprint("rag")
    _options_plugin(plugins, "plain_rag", "rag", "RAG", "RAGOptions", "extra: bool = False")
    assert code_fingerprint("plain_rag:Sub") != code_fingerprint("rag")
    # Search-o1's final reading pass is such an option: off, the paper's method and its fingerprint
    from sleuth.eval.probe import defaults
    from sleuth.llm.scripted import ScriptedLLM
    from sleuth.strategies import get_strategy

    off = defaults(get_strategy("search-o1", ScriptedLLM(["x"]), None, final_read=False))
    on = defaults(get_strategy("search-o1", ScriptedLLM(["x"]), None, final_read=True))
    assert "final_read" not in off["typed"] and "final_read" not in off["options"]
    assert on["typed"]["final_read"] is True and on["options"] == {"final_read": True}


def test_a_changed_request_parameter_changes_the_fingerprint(plugins: Path) -> None:
    # RAG's short-answer call lives in answers.py: copies of both, RAG importing the copy
    _copy(plugins, "answers", "same_answers", [(r"max_tokens=32\b", "max_tokens=32")])
    _copy(plugins, "rag", "same_budget", [(r"from sleuth\.strategies\.answers import", "from same_answers import")])
    assert code_fingerprint("same_budget:RAG") == code_fingerprint("rag")  # the copies alone change nothing
    _copy(plugins, "answers", "other_answers", [(r"max_tokens=32\b", "max_tokens=33")])  # the short-answer call
    _copy(plugins, "rag", "other_budget", [(r"from sleuth\.strategies\.answers import", "from other_answers import")])
    assert code_fingerprint("other_budget:RAG") != code_fingerprint("rag")


def test_a_changed_prompt_changes_the_fingerprint(plugins: Path, tmp_path: Path) -> None:
    (plugins / "reworded_rag.py").write_text(
        "from sleuth.strategies.rag import RAG\n\n\n"
        "class RewordedRAG(RAG):\n"
        "    def prompt(self, st, name, **fields):\n"
        "        text = super().prompt(st, name, **fields)\n"
        "        return text + ' Be brief.' if name == 'rag' else text\n",
        encoding="utf-8",
    )
    assert code_fingerprint("reworded_rag:RewordedRAG") != code_fingerprint("rag")

    # the template texts themselves: a strategy's own and the shared ones, never another strategy's
    prompts = tmp_path / "prompts"
    shutil.copytree(SRC / "prompts", prompts, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    stems = {s.replace("-", "_") for s in BUILTIN}
    rag, rat = templates_for("rag", prompts, stems), templates_for("rat", prompts, stems)
    assert "en/rag.txt" in rag and "en/short_answer.txt" in rag and "en/rat_draft.txt" not in rag
    assert "zh/rat_revise.txt" in rat and "en/rag.txt" not in rat  # owners match whole names
    assert _owner(prompts / "en" / "search_o1_rid.txt", stems) == "search_o1"
    en, zh = templates_for("rag", prompts, stems, "en"), templates_for("rag", prompts, stems, "zh")
    assert set(en) == {k for k in rag if k.startswith("en/")} and set(zh) == {k for k in rag if k.startswith("zh/")}
    (prompts / "zh" / "rag.txt").write_text("改过的模板 $question $documents\n", encoding="utf-8")
    assert templates_for("rag", prompts, stems) != rag
    assert templates_for("rat", prompts, stems) == rat
    # a template edit under prompts/zh: the Chinese templates change, the English ones do not
    assert templates_for("rag", prompts, stems, "zh") != zh
    assert templates_for("rag", prompts, stems, "en") == en


def test_a_strategy_that_raises_is_fingerprinted_by_its_error(plugins: Path) -> None:
    (plugins / "broken.py").write_text(
        "from sleuth.strategies.base import Strategy\n\n\n"
        "class Broken(Strategy):\n"
        "    name = 'broken'\n\n"
        "    def solve(self, question, st):\n"
        "        raise RuntimeError('boom at ' + hex(id(self)))\n",
        encoding="utf-8",
    )
    probe = behaviour("broken:Broken", "en")["probe"]
    assert {r["raised"] for r in probe["runs"]} == {"RuntimeError: boom at 0x"}
    assert re.fullmatch(r"[0-9a-f]{12}", code_fingerprint("broken:Broken"))


def test_the_committed_runs_say_which_records_the_running_code_would_make() -> None:
    """A refactor keeps every committed record current (it must not move a fingerprint). A deliberate change of
    behaviour makes some records older: the committed report then says so (its "Older records" line and the
    running-code column; regenerated by `sleuth eval report DIR`, checked byte for byte in
    test_eval_diagnose), until the records are made again. Here: the report's claim is the truth."""
    from sleuth.eval.store import read_manifest, read_records

    root = Path(__file__).resolve().parents[1] / "docs" / "results"
    langs = {}
    for run in sorted(p.parent for p in root.glob("*/run.json")):
        manifest = read_manifest(run) or {}
        code, langs[run.name] = manifest["code"], manifest["code_lang"]
        running = {s: code_fingerprint(s, langs[run.name]) for s in code}
        report = (run / "report.md").read_text(encoding="utf-8")
        stale = {s for s in code if any(r["code"] != running[s] for r in read_records(run) if r["strategy"] == s)}
        line = next((ln for ln in report.splitlines() if ln.startswith("**Older records:**")), "")
        assert {s for s in code if re.search(rf"\b{re.escape(s)} \d+ of \d+", line)} == stale, run
        made = {r["strategy"] for r in read_records(run)}  # a run with --only may not have started some yet
        for s in sorted(made & set(code)):  # the running-code column holds the running code's fingerprint
            assert re.search(rf"^\| {re.escape(s)} \|.*\| `{running[s]}` \|$", report, re.M), (run, s)
    assert {k: v for k, v in langs.items() if k in ("hotpotqa-open", "musique-open", "policy_zh")} == {
        "hotpotqa-open": "en",
        "musique-open": "en",
        "policy_zh": "zh",
    }
