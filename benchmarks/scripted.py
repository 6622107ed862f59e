"""Shared parts of the throughput / overhead benchmarks.

* :class:`ScriptedModel`: a deterministic "model" for ``tests/fake_openai_server.py``
  that walks every strategy's scaffold to the end (Self-Ask follow-ups, Search-o1
  queries, RAT drafts and revisions, Step-back questions), with a chosen number of
  hops and an optional, per-question deterministic jitter in answer length.
* :func:`wiki_retriever`: a real index over the 1000 FlashRAG quick-start
  Wikipedia passages (built once, cached by content hash).
* :func:`hotpot_questions`: real HotpotQA questions.
* :func:`fake_server`: import the fake server from ``tests/`` (it is shared test code).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("SLEUTH_DATA_DIR") or ROOT.parent / "shared" / "data")

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

#: distinct follow-ups (low word overlap, so Self-Ask's repeat guard never fires)
FOLLOW_UPS = [
    "Who directed the film mentioned here?",
    "Where was that person born?",
    "Which year did the event take place?",
    "What company published the magazine?",
    "How many members does the band have?",
]
FILLER = [
    "the",
    "record",
    "also",
    "mentions",
    "several",
    "related",
    "names",
    "dates",
    "and",
    "places",
    "worth",
    "checking",
    "again",
]


def _h(*parts: object) -> int:
    return int(hashlib.sha1("|".join(map(str, parts)).encode()).hexdigest()[:12], 16)


class ScriptedModel:
    """``body -> text`` for :class:`FakeOpenAIServer` (``script=ScriptedModel(...)``).

    ``hops``: searches/follow-ups per question; ``jitter``: up to this many
    extra words in each reasoning turn (deterministic per question and step),
    so that concurrent requests differ in length as real generations do.
    """

    def __init__(self, hops: int = 2, jitter: int = 0, answer: str = "Paris") -> None:
        self.hops = hops
        self.jitter = jitter
        self.answer = answer

    def _filler(self, key: str, step: int) -> str:
        if not self.jitter:
            return ""
        n = _h(key, step) % (self.jitter + 1)
        return " ".join(FILLER[i % len(FILLER)] for i in range(n)) + (". " if n else "")

    def __call__(self, body: dict[str, Any]) -> str:
        if "prompt" in body:
            return self._complete(str(body["prompt"]))
        msgs = body.get("messages") or []
        last = next((m.get("content", "") for m in reversed(msgs) if m.get("role") == "user"), "")
        return self._chat(str(last))

    # -- completion-mode scaffolds ------------------------------------------------
    def _complete(self, prompt: str) -> str:
        tail = prompt[prompt.rfind("\nQuestion:") :]
        key = tail.splitlines()[1] if "\n" in tail[1:] else tail
        end = prompt.rstrip()
        if "<|begin_search_query|>" in prompt:  # Search-o1
            if end.endswith("\\boxed{"):
                return f"{self.answer}}}"
            n = tail.count("<|end_search_result|>")
            if n < self.hops:
                q = FOLLOW_UPS[n % len(FOLLOW_UPS)].rstrip("?")
                return f"I need fact {n + 1}. {self._filler(key, n)}<|begin_search_query|> {q} <|end_search_query|>"
            return f"Now I know enough. {self._filler(key, n)}Final answer: \\boxed{{{self.answer}}}"
        if "Are follow up questions needed here" in prompt:  # Self-Ask
            if end.endswith("So the final answer is:"):
                return f" {self.answer}\n"
            if end.endswith("Intermediate answer:"):
                return " It was Paris.\n"
            n = tail.count("Follow up:")
            if n < self.hops:
                lead = f" Yes. {self._filler(key, n)}\n" if n == 0 else ""
                return f"{lead}Follow up: {FOLLOW_UPS[n % len(FOLLOW_UPS)]}\nIntermediate answer:"
            return f"So the final answer is: {self.answer}\n"
        return f"{self.answer}\n"

    # -- instruction calls ----------------------------------------------------------
    def _chat(self, m: str) -> str:
        end = m.rstrip()
        if end.endswith("Final Information:"):  # Search-o1 Reason-in-Documents
            return f"The documents say the place is {self.answer}."
        if "Step-back question:" in m:
            return "What is the general background of this topic?"
        if "Write 2 to 4 short paragraphs" in m:  # RAT draft
            return "\n\n".join(f"Step {i + 1}: the answer involves {FOLLOW_UPS[i].lower()}" for i in range(self.hops))
        if "Write one short search query" in m:  # RAT query
            return "film director birthplace"
        if "Revise the draft" in m:  # RAT revision
            draft = m.split("Draft answer:", 1)[-1].split("Revise the draft", 1)[0].strip()
            return draft + " [1]"
        if "Rewrite the notes" in m:  # RAT final
            return f"The answer is {self.answer} [1].\nShort answer: {self.answer}"
        if "write exactly: unknown" in m:  # Self-Ask extraction
            return f"It was {self.answer}."
        if end.endswith("Answer:") or end.endswith("Short answer:"):
            return f"{self.answer}\n"
        return f"The documents point to {self.answer} [1].\nSo the answer is: {self.answer}"


def fake_server_class() -> Any:
    """``FakeOpenAIServer`` from ``tests/`` (shared test code, not part of the package)."""
    tests = str(ROOT / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    from fake_openai_server import FakeOpenAIServer

    return FakeOpenAIServer


def wiki_corpus() -> Path:
    path = DATA / "quickstart" / "wiki_passages.jsonl"
    if not path.exists():
        raise SystemExit(f"shared data not found: {path} (set SLEUTH_DATA_DIR)")
    return path


def wiki_retriever() -> Any:
    """A real index (BM25) over 1000 Wikipedia passages; built on first use and cached."""
    from sleuth.search import open_retriever

    return open_retriever(str(wiki_corpus()))


def wiki_index_dir() -> str:
    """The cached index folder of :func:`wiki_retriever` (for ``EvalConfig(index=...)``)."""
    from sleuth.search import corpus_index_dir

    wiki_retriever()
    return str(corpus_index_dir(wiki_corpus()))


def hotpot_questions(n: int, offset: int = 0) -> list[str]:
    path = DATA / "hotpotqa" / "test.jsonl"
    out = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i < offset:
                continue
            out.append(json.loads(line)["question"])
            if len(out) == n:
                break
    return out


def pct(x: float) -> str:
    return f"{100 * x:.2f} %"
