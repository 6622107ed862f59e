"""Sleuth's settings: one object, :data:`settings`, reads the environment and a ``.env`` file.

Resolution order for every setting: explicit function argument (the CLI passes its flags
here) > real environment variable > ``.env`` file > built-in default. A ``.env`` file (the
nearest one from the working directory, loaded on the first read) never overrides a
variable that is already set in the environment. An empty value counts as unset.

Every module reads the environment through :data:`settings` (``tests/test_structure.py``
checks that no other module touches ``os.environ``), so a variable set in ``.env`` reaches
all of them. The variables that are not about the LLM:

* ``SLEUTH_CACHE_DIR`` (else ``$XDG_CACHE_HOME/sleuth`` or ``~/.cache/sleuth``): model files,
  response cache, search cache, indexes;
* ``SLEUTH_DATA_DIR``: where ``sleuth ask`` finds the quick-start corpus;
* ``SLEUTH_SEARCH_CACHE`` (0/false/no/off turns the search cache off);
* ``SLEUTH_EMBED_THREADS``: threads of the dense-search embedder (default 2);
* ``SLEUTH_EMBED_BASE_URL`` / ``SLEUTH_EMBED_MODEL`` / ``SLEUTH_EMBED_API_KEY`` (and
  ``_BATCH``, ``_CONCURRENCY``, ``_TIMEOUT``, ``_RETRIES``, ``_QUERY_PREFIX``,
  ``_PASSAGE_PREFIX``): vectors from an OpenAI-compatible embedding server
  (:mod:`sleuth.search.remote`);
* ``SLEUTH_RERANK_BASE_URL`` / ``SLEUTH_RERANK_MODEL`` / ``SLEUTH_RERANK_API_KEY`` /
  ``SLEUTH_RERANK_SHAPE`` / ``SLEUTH_RERANK_TIMEOUT``: the rerank stage of every source;
* ``TAVILY_API_KEY`` / ``TAVILY_BASE_URL``: the Tavily web search;
* ``SLEUTH_SERVER_KEY``: the HTTP server's key(s), separated by commas;
* ``SLEUTH_EVAL_CACHE``: the evaluation's open-setting indexes;
* ``SLEUTH_DASK_WORKERS``: worker processes of a local Dask cluster;
* ``SLEUTH_PRICE_PROMPT`` / ``SLEUTH_PRICE_COMPLETION`` / ``SLEUTH_PRICE_CACHED_PROMPT``:
  USD per million tokens for the evaluation's cost column.

The LLM's variables (base URL, model, keys, timeouts, limits, engine threads) are read by
:mod:`sleuth.llm.settings`, through the same object. Values are never logged.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

__all__ = ["Settings", "cache_dir", "env", "env_float", "env_int", "load_env", "settings"]

_OFF = ("0", "false", "no", "off")


class Settings:
    """The one reader of the process environment, with ``.env`` applied first.

    Reads are live (a changed variable is seen at the next read), so a setting read
    per call stays overridable per test or per process.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loaded = False

    # -- the environment ------------------------------------------------------------------------
    def load_env(self, path: str | Path | None = None, *, force: bool = False) -> None:
        """Load a ``.env`` file once (the nearest one from the working directory).

        Real environment variables always win (``override=False``).  ``path``
        loads that file explicitly; ``force`` re-reads even if already loaded.
        """
        with self._lock:
            if self._loaded and not force and path is None:
                return
            try:
                from dotenv import find_dotenv, load_dotenv
            except ImportError:  # python-dotenv is a core dependency; be tolerant anyway
                self._loaded = True
                return
            target = str(path) if path is not None else find_dotenv(usecwd=True)
            if target:
                load_dotenv(target, override=False)
            self._loaded = True

    def get(self, name: str, default: str | None = None) -> str | None:
        """A variable (after loading ``.env``), stripped; empty counts as unset."""
        self.load_env()
        v = os.environ.get(name)
        if v is None or not v.strip():
            return default
        return v.strip()

    def integer(self, name: str, default: int | None) -> int | None:
        v = self.get(name)
        if v is None:
            return default
        try:
            return int(v)
        except ValueError as e:
            raise ValueError(f"{name} must be an integer, got {v!r}") from e

    def number(self, name: str, default: float | None) -> float | None:
        v = self.get(name)
        if v is None:
            return default
        try:
            return float(v)
        except ValueError as e:
            raise ValueError(f"{name} must be a number, got {v!r}") from e

    def flag(self, name: str, default: bool = True) -> bool:
        """A switch: 0/false/no/off (any case) is off, any other value on, unset ``default``."""
        v = self.get(name)
        return default if v is None else v.lower() not in _OFF

    def environ(self) -> dict[str, str]:
        """A copy of the whole environment, ``.env`` applied (for a child process)."""
        self.load_env()
        return dict(os.environ)

    def set_default(self, name: str, value: str) -> None:
        """Set a variable that a native library reads at load time, unless it is set (``.env`` counts)."""
        self.load_env()
        os.environ.setdefault(name, value)

    # -- named settings (not LLM-specific) ------------------------------------------------------
    def cache_dir(self, override: str | Path | None = None) -> Path:
        """The cache directory: argument > ``$SLEUTH_CACHE_DIR`` > ``$XDG_CACHE_HOME/sleuth`` > ``~/.cache/sleuth``."""
        if override is not None:
            return Path(override).expanduser()
        own = self.get("SLEUTH_CACHE_DIR")
        if own:
            return Path(own).expanduser()
        return Path(self.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")) / "sleuth"

    def data_dir(self) -> Path | None:
        """``$SLEUTH_DATA_DIR`` (None when unset)."""
        v = self.get("SLEUTH_DATA_DIR")
        return Path(v).expanduser() if v else None

    def search_cache(self) -> bool:
        """Whether searches are cached (``SLEUTH_SEARCH_CACHE``, default on)."""
        return self.flag("SLEUTH_SEARCH_CACHE")

    def embed_threads(self) -> int:
        """Threads of the dense-search embedder (``SLEUTH_EMBED_THREADS``, default 2)."""
        return self.integer("SLEUTH_EMBED_THREADS", 2) or 2

    def tavily_api_key(self) -> str:
        return self.get("TAVILY_API_KEY") or ""

    def tavily_base_url(self) -> str:
        return self.get("TAVILY_BASE_URL") or "https://api.tavily.com"

    def server_keys(self) -> tuple[str, ...]:
        """``SLEUTH_SERVER_KEY``: one key, or several separated by commas."""
        return tuple(k.strip() for k in (self.get("SLEUTH_SERVER_KEY") or "").split(",") if k.strip())

    def eval_cache(self) -> Path:
        """Where the evaluation keeps its open-setting indexes (``SLEUTH_EVAL_CACHE``)."""
        v = self.get("SLEUTH_EVAL_CACHE")
        return Path(v) if v else self.cache_dir() / "eval" / "indexes"

    def dask_workers(self) -> int:
        """Worker processes of a local Dask cluster (``SLEUTH_DASK_WORKERS``; 0: choose)."""
        return self.integer("SLEUTH_DASK_WORKERS", 0) or 0

    def prices(self) -> list[str]:
        """The ``SLEUTH_PRICE_*`` values (prompt, completion, cached prompt); "" where unset."""
        return [self.get(f"SLEUTH_PRICE_{k}") or "" for k in ("PROMPT", "COMPLETION", "CACHED_PROMPT")]


#: the process's settings
settings = Settings()

# the functions this module has always offered, now the settings object's methods
load_env = settings.load_env
env = settings.get
env_int = settings.integer
env_float = settings.number
cache_dir = settings.cache_dir
