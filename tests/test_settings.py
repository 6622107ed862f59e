"""One settings object (``sleuth.config.settings``) reads the environment and ``.env`` for every module.

The main test starts a fresh Python process in a directory below a ``.env`` file, with none
of the variables in its real environment, and asks the modules that used to read
``os.environ`` themselves what they see: each must see the ``.env`` value.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sleuth.config import Settings

SRC = Path(__file__).resolve().parents[1] / "src"

PROBE = r"""
import json
from sleuth.cli.ask import data_dir
from sleuth.config import settings
from sleuth.eval.metrics import Prices
from sleuth.kvcache import default_cache_dir
from sleuth.llm.settings import embedded_mode, resolve_llm_settings, timeout
from sleuth.search.cache import cache_enabled
from sleuth.search.dense import MiniLMEmbedder
from sleuth.search.web import TavilyRetriever

tavily = TavilyRetriever()
prices = Prices.parse(None)
print(json.dumps({
    "cli.ask data_dir": str(data_dir()),
    "eval.corpus cache_root": str(settings.eval_cache()),
    "eval.metrics prices": [prices.prompt, prices.completion],
    "kvcache default_cache_dir": str(default_cache_dir()),
    "llm timeout": timeout(None, embedded=False),
    "llm embedded_mode": embedded_mode(),
    "llm model": resolve_llm_settings().model,
    "search.cache enabled": cache_enabled(),
    "search.dense threads": MiniLMEmbedder().threads,
    "search.web base_url": tavily.base_url,
    "search.web key is the .env one": tavily._key == "tavily-test-value",
    "server keys": len(settings.server_keys()),
}))
"""

DOTENV = {
    "SLEUTH_DATA_DIR": "{tmp}/data",
    "SLEUTH_EVAL_CACHE": "{tmp}/eval-cache",
    "SLEUTH_PRICE_PROMPT": "1.5",
    "SLEUTH_PRICE_COMPLETION": "2.5",
    "SLEUTH_CACHE_DIR": "{tmp}/cache",
    "SLEUTH_LLM_TIMEOUT": "7",
    "SLEUTH_EMBEDDED_MODE": "subprocess",
    "SLEUTH_MODEL": "smollm2-135m",
    "SLEUTH_SEARCH_CACHE": "off",
    "SLEUTH_EMBED_THREADS": "3",
    "TAVILY_BASE_URL": "http://127.0.0.1:9/",
    "TAVILY_API_KEY": "tavily-test-value",
    "SLEUTH_SERVER_KEY": "first-test-value,second-test-value",
}
#: variables that would change what the probe sees, so the child process must not inherit them
OTHERS = ("XDG_CACHE_HOME", "SLEUTH_LLM_BASE_URL", "OPENAI_BASE_URL", "QWEN_BASE_URL", "SLEUTH_LLM_MODEL")


def test_a_dotenv_file_reaches_every_module_that_reads_a_setting(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("".join(f"{k}={v.format(tmp=tmp_path)}\n" for k, v in DOTENV.items()))
    cwd = tmp_path / "work" / "below"  # the nearest .env above the working directory counts
    cwd.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k not in DOTENV and k not in OTHERS}
    env["PYTHONPATH"] = str(SRC) + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen == {
        "cli.ask data_dir": str(tmp_path / "data"),
        "eval.corpus cache_root": str(tmp_path / "eval-cache"),
        "eval.metrics prices": [1.5, 2.5],
        "kvcache default_cache_dir": str(tmp_path / "cache"),
        "llm timeout": 7.0,
        "llm embedded_mode": "subprocess",
        "llm model": "smollm2-135m",
        "search.cache enabled": False,
        "search.dense threads": 3,
        "search.web base_url": "http://127.0.0.1:9",
        "search.web key is the .env one": True,
        "server keys": 2,
    }
    assert "tavily-test-value" not in out.stdout + out.stderr  # a key is never printed


def test_the_real_environment_wins_over_dotenv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ".env").write_text("SLEUTH_EMBED_THREADS=3\nSLEUTH_DATA_DIR=/from/dotenv\n")
    monkeypatch.delenv("SLEUTH_DATA_DIR", raising=False)  # restored (removed again) after the test
    monkeypatch.setenv("SLEUTH_EMBED_THREADS", "5")
    s = Settings()
    s.load_env(tmp_path / ".env")
    assert s.embed_threads() == 5
    assert s.data_dir() == Path("/from/dotenv")


def test_settings_read_live_and_explain_a_bad_value(monkeypatch: pytest.MonkeyPatch) -> None:
    s = Settings()
    monkeypatch.setenv("SLEUTH_SEARCH_CACHE", "  ")
    assert s.search_cache() is True  # empty counts as unset
    monkeypatch.setenv("SLEUTH_SEARCH_CACHE", "No")
    assert s.search_cache() is False
    monkeypatch.setenv("SLEUTH_EMBED_THREADS", "many")
    with pytest.raises(ValueError, match="SLEUTH_EMBED_THREADS must be an integer, got 'many'"):
        s.embed_threads()
