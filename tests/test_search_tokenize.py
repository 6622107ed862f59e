"""The shared tokenizer: English words without stopwords, jieba for Chinese, quiet and
deterministic."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from sleuth.search.tokenize import has_cjk, tokenize

ROOT = Path(__file__).resolve().parents[1]


def test_english_words_lowercase_no_stopwords_no_stemming() -> None:
    assert tokenize("The Cats were RUNNING, and the café's 5% share!") == ["cats", "running", "café", "5", "share"]
    assert tokenize("of the and") == []
    assert tokenize("") == []


def test_chinese_segmentation_and_mixed_text() -> None:
    toks = tokenize("退票费用应在退款到账后15个自然日内提交报销。Refund policy")
    assert {"退票", "退款", "报销", "15", "refund", "policy"} <= set(toks)
    assert "的" not in tokenize("公司的差旅费用")
    assert has_cjk("abc中") and not has_cjk("abc")


def test_quiet_and_deterministic_across_processes() -> None:
    code = (
        "from sleuth.search.tokenize import tokenize; print('|'.join(tokenize('内部审计对差旅报销的抽查比例是多少？')))"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env={"PYTHONPATH": str(ROOT / "src")}
    )
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert r.stdout.strip() == "|".join(tokenize("内部审计对差旅报销的抽查比例是多少？")), (
        "same tokens in another process"
    )
