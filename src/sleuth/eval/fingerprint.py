"""Which behaviour produced a result: a short hash of what a strategy does on a fixed probe.

A published comparison is built over many sittings (``sleuth eval`` resumes), and the
code can change between them.  Every record carries the fingerprint of the strategy that
answered it, so a report can say when a strategy's records come from more than one
version, and ``--redo-stale`` can recompute exactly those.

The fingerprint is of behaviour, not of source files: a refactor that leaves every
output the same keeps it, a change that alters what the strategy sends or returns
changes it.  :func:`code_fingerprint` runs the strategy over the probe suite of
:mod:`sleuth.eval.probe` and hashes (SHA-256 of canonical JSON, first 12 hex digits):

* every HTTP request the scripted model received (path and JSON body) through Sleuth's
  real OpenAI-compatible client, on a real server on 127.0.0.1 whose replies carry every
  strategy's scaffold words (so client-side changes to request bodies or to how replies
  are read count too);
* every search call: query, ``k``, filters and the ids returned by Sleuth's real
  lexical index over the probe corpus (``sleuth/eval/probe/corpus.jsonl``), plus each
  search event's route;
* per question: answer, short answer, citation ids, finish reason and the sequence of
  trace event kinds; for a strategy with ``run_batch`` (Search-o1) the same for a batch
  run (requests and searches as multisets, as their order is concurrent);
* the text of all the strategy's prompt templates (``prompts/*/<name>*.txt``, ``self-ask``
  -> ``self_ask*.txt``) and of
  the prompts no strategy owns (``short_answer.txt``), and its default options
  (``k``, ``max_steps``, ``max_tokens``, ``lang``, the options given, and every field of
  its typed options, so a changed default counts even where the probe never reaches it).

Not hashed: timings, object reprs, ids and the trace's field layout.  Not covered: code
paths the probe does not walk (e.g. a changed comparison against an option's threshold
that the short probe prompts never reach; the threshold's default itself is hashed), dense and hybrid retrieval (the probe indexes lexically: the
dense extra loads an embedding model, which takes far longer than the probe), retry and
rate-limit handling, and the embedded llama.cpp backend.  A strategy defined outside
Sleuth (``module:Class``) is probed the same way.  ``sleuth eval verify`` (running stored
records again against the real model) is the full check either way.

Computed once per strategy and process: about 0.2 s per strategy, plus about 3 s once per
process for the probe index (mostly jieba loading its dictionary for the Chinese passages).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

from sleuth.eval.probe import run_probe, strategy_class
from sleuth.eval.probe.server import canonical

DIGITS = 12


def _stem(cls: type) -> str:
    """The template stem of a strategy class: its ``name`` (``self-ask`` -> ``self_ask``)."""
    return str(getattr(cls, "name", "")).replace("-", "_")


def _owner(prompt: Path, stems: Iterable[str]) -> str | None:
    """The strategy stem a prompt template belongs to (longest matching prefix), if any."""
    name = prompt.stem
    best = None
    for s in stems:
        if (name == s or name.startswith(s + "_")) and (best is None or len(s) > len(best)):
            best = s
    return best


def templates_for(stem: str, prompt_dir: Path, stems: Iterable[str]) -> dict[str, str]:
    """The prompt templates of strategy ``stem`` and those no strategy owns: relative path -> text."""
    out = {}
    for p in sorted(prompt_dir.glob("*/*.txt")):
        owner = _owner(p, stems)
        if owner is None or owner == stem:
            out[p.relative_to(prompt_dir).as_posix()] = p.read_text(encoding="utf-8")
    return out


def behaviour(strategy: str) -> dict[str, object]:
    """Everything the fingerprint of ``strategy`` hashes, as JSON-able data."""
    from sleuth.strategies import STRATEGIES
    from sleuth.strategies.prompts import PROMPT_DIR

    stems = {_stem(c) for c in STRATEGIES.values()}
    templates = templates_for(_stem(strategy_class(strategy)), PROMPT_DIR, stems)
    return {"probe": run_probe(strategy), "templates": templates}


@lru_cache(maxsize=64)
def code_fingerprint(strategy: str) -> str:
    """The fingerprint of ``strategy`` (a built-in name or ``module:Class``) in the running code."""
    return hashlib.sha256(canonical(behaviour(strategy)).encode("utf-8")).hexdigest()[:DIGITS]
