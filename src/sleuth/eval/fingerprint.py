"""Which behaviour produced a result: a short hash of what a strategy does on a fixed probe.

A published comparison is built over many sittings (``sleuth eval`` resumes), and the
code can change between them.  Every record carries the fingerprint of the strategy that
answered it, so a report can say when a strategy's records come from more than one
version, and ``--redo-stale`` can recompute exactly those.

The fingerprint is of behaviour, not of source files: a refactor that leaves every
output the same keeps it, a change that alters what the strategy sends or returns
changes it.  And it is per answer language: ``code_fingerprint(strategy, lang)`` covers
only what the strategy does in ``lang`` (``"en"`` or ``"zh"``), so a change that alters
only Chinese outputs (Chinese tokenisation, a ``prompts/zh`` template, a branch taken
only for Chinese questions) leaves every English record current, and the other way round.
A run is fingerprinted in the language of its questions (:func:`code_lang`: the
languages :func:`sleuth.strategies.lang.detect_lang` gives them, as the strategies'
``lang="auto"`` does, or the ``lang`` option the run forces); a run with questions of
both languages gets the combined fingerprint ``"en+zh"``, which changes when either
language's does.  The run's language is stored in ``run.json`` as ``code_lang``; a
``run.json`` without it is read as combined.  ``code_fingerprint(strategy)``, with no
language, is the combined one.

For each language, :func:`code_fingerprint` runs the strategy over that language's probe
suite of :mod:`sleuth.eval.probe` and hashes (SHA-256 of canonical JSON, first 12 hex
digits):

* every HTTP request the scripted model received (path and JSON body) through Sleuth's
  real OpenAI-compatible client, on a real server on 127.0.0.1 whose replies carry every
  strategy's scaffold words (so client-side changes to request bodies or to how replies
  are read count too);
* every search call: query, ``k``, filters and the ids returned by Sleuth's real
  lexical index over the language's own probe corpus (``sleuth/eval/probe/corpus/<lang>.jsonl``,
  indexed apart from the other language's), plus each search event's route;
* per question: answer, short answer, citation ids, finish reason and the sequence of
  trace event kinds; for a strategy with ``run_batch`` (Search-o1) the same for a batch
  run (requests and searches as multisets, as their order is concurrent);
* the text of the language's prompt templates of the strategy (``prompts/<lang>/<name>*.txt``,
  ``self-ask`` -> ``self_ask*.txt``) and of the language's prompts no strategy owns
  (``prompts/<lang>/short_answer.txt``);
* what no language owns: its default options (``k``, ``max_steps``, ``max_tokens``,
  ``lang``, the options given, and every field of its typed options, so a changed default
  counts even where the probe never reaches it); an opt-in option at its ``neutral`` value
  (:func:`sleuth.strategies.options.option`: the behaviour before the option existed) is left
  out, so adding one makes no record stale, and switching it on is another behaviour.

Not hashed: timings, object reprs, ids and the trace's field layout.  Not covered: code
paths the probe does not walk (e.g. a changed comparison against an option's threshold
that the short probe prompts never reach; the threshold's default itself is hashed), dense and hybrid retrieval (the probe indexes lexically: the
dense extra loads an embedding model, which takes far longer than the probe), retry and
rate-limit handling, the embedded llama.cpp backend, and the standalone-question step of a
follow-up (:mod:`sleuth.strategies.conversation`: only with a conversation's history, which no
probe question has; its ``rewrite.txt`` templates are left out, see :data:`UNPROBED`).  A strategy defined outside
Sleuth (``module:Class``) is probed the same way.  ``sleuth eval verify`` (running stored
records again against the real model) is the full check either way.

Computed once per strategy, language and process: about 0.1 s per strategy and language,
plus, once per process, building each language's probe index (the Chinese one about 3 s,
mostly jieba loading its dictionary; the English one never loads jieba).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

from sleuth.eval.probe import LANGS, check_lang, run_probe, strategy_class
from sleuth.eval.probe.server import canonical

DIGITS = 12
#: template stems of steps the probe never walks, so left out of every fingerprint: ``rewrite`` (a
#: follow-up's standalone question, only with a conversation's history; no probe question has one)
UNPROBED = ("rewrite",)
#: the ``code_lang`` of a run with questions in both languages (and of a ``run.json`` without one)
COMBINED = "+".join(LANGS)


def split_lang(lang: str | None) -> tuple[str, ...]:
    """The probe languages of a fingerprint language: ``"en"``, ``"zh"`` or ``"en+zh"`` (None: combined)."""
    parts = (lang or COMBINED).split("+")
    for part in parts:
        check_lang(part)
    return tuple(sorted(set(parts)))


def code_lang(questions: Iterable[str], forced: str | None = None) -> str:
    """The fingerprint language of a run over ``questions``: ``forced`` when the run sets the
    strategies' ``lang`` option to a language, else the languages the questions are detected in
    (as ``lang="auto"`` picks prompts), joined with ``+``; :data:`COMBINED` when there are none."""
    from sleuth.strategies.lang import detect_lang

    if forced in LANGS:
        return str(forced)
    found = {detect_lang(q) for q in questions}
    return "+".join(sorted(found)) if found else COMBINED


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


def templates_for(stem: str, prompt_dir: Path, stems: Iterable[str], lang: str | None = None) -> dict[str, str]:
    """The prompt templates of strategy ``stem`` and those no strategy owns, in ``lang`` (None: every
    language): relative path -> text."""
    out = {}
    for p in sorted(prompt_dir.glob(f"{lang or '*'}/*.txt")):
        owner = _owner(p, stems)
        if owner is None or owner == stem:
            out[p.relative_to(prompt_dir).as_posix()] = p.read_text(encoding="utf-8")
    return out


def behaviour(strategy: str, lang: str) -> dict[str, object]:
    """Everything the fingerprint of ``strategy`` in language ``lang`` hashes, as JSON-able data."""
    from sleuth.strategies import STRATEGIES
    from sleuth.strategies.prompts import PROMPT_DIR

    stems = {_stem(c) for c in STRATEGIES.values()} | set(UNPROBED)
    templates = templates_for(_stem(strategy_class(strategy)), PROMPT_DIR, stems, check_lang(lang))
    return {"probe": run_probe(strategy, lang), "templates": templates}


@lru_cache(maxsize=128)
def code_fingerprint(strategy: str, lang: str | None = None) -> str:
    """The fingerprint of ``strategy`` (a built-in name or ``module:Class``) in the running code, for
    answers in ``lang`` (``"en"``, ``"zh"``, or ``"en+zh"`` for both; None: both)."""
    data = {part: behaviour(strategy, part) for part in split_lang(lang)}
    return hashlib.sha256(canonical(data).encode("utf-8")).hexdigest()[:DIGITS]
