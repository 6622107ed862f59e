"""Retrieval for an evaluation run (docs/eval.md, "Retrieval settings"): ``open`` pools every paragraph
of the questions file (or its companion corpus, ``--corpus``, ``--index``) into one index cached by content
hash under ``$SLEUTH_CACHE_DIR/eval/indexes``, searched in :data:`DEFAULT_SEARCH_MODE` or ``--search-mode``;
``distractor`` gives each question an index of its own paragraphs; ``closed`` searches nothing.
A :class:`RetrievalPlan` is a small picklable description; each worker process opens its retrievers once.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sleuth.config import settings
from sleuth.eval.datasets import Dataset, Item, Paragraph, load_dataset
from sleuth.eval.items import EvalError
from sleuth.eval.store import write_jsonl
from sleuth.llm.models import file_sha256
from sleuth.search.base import SearchError
from sleuth.search.lexical import LAYOUT

SEARCH_MODES = ("lexical", "dense", "hybrid")
#: how the open setting searches its pool by default: BM25 and vectors fused by RRF. Measured on the
#: tuning files (benchmarks/bench_retrieval.py, docs/knowledge.md "Retrieval quality"): it finds more
#: supporting titles in the top 5 than BM25 or vectors alone on hotpotqa/train and musique/train.
DEFAULT_SEARCH_MODE = "hybrid"
#: a bigger pool is searched lexically unless --search-mode says otherwise: embedding costs about
#: 10k characters a second on 2 idle cores (all-MiniLM-L6-v2), so this is ~7 minutes once (cached);
#: HotpotQA's pools (1.7M and 2.8M characters), MuSiQue's, StrategyQA's and RGB's are under it,
#: TimeQA's 33k pooled paragraphs (11.8M) are not
DENSE_DEFAULT_MAX_CHARS = 4_000_000


class CorpusError(EvalError):
    """The requested retrieval setting cannot be built for this dataset."""


def pooled_paragraphs(dataset: Dataset) -> list[Paragraph]:
    """All paragraphs of all items, each id once (first occurrence wins)."""
    seen: dict[str, Paragraph] = {}
    for p in (p for it in dataset.items for p in it.paragraphs):
        seen.setdefault(p.id, p)
    return list(seen.values())


def corpus_records(paragraphs: Iterable[Paragraph]) -> list[dict[str, Any]]:
    """Generic corpus records ``{id, title, text, ...metadata}`` (the knowledge layer's generic format);
    gold labels (``is_supporting``) never go into the index."""
    plain = (str, int, float, bool)
    return [
        {**{k: v for k, v in p.metadata.items() if isinstance(v, plain) and k != "is_supporting"}, "id": p.id}
        | {"title": p.title, "text": p.text}
        for p in paragraphs
    ]


def _hash_records(records: list[dict[str, Any]]) -> str:
    lines = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records)
    return hashlib.sha256(lines.encode()).hexdigest()


def _file_sha(path: Path) -> str:
    """A file's sha256; for a folder (an index), that of its files' names and sizes."""
    if not path.is_dir():
        return file_sha256(path)
    files = sorted(p for p in path.rglob("*") if p.is_file())
    return hashlib.sha256("".join(f"{f.relative_to(path)}{f.stat().st_size}" for f in files).encode()).hexdigest()


_BUILD_LOCK = threading.Lock()


def ensure_index(
    records: list[dict[str, Any]] | None, inputs: list[Path] | None, key: str, *, dense: bool = False
) -> Path:
    """The cached index dir for ``key`` (with vectors when ``dense``), built on first use
    (from ``records`` or ``inputs``)."""
    root = settings.eval_cache() / (key + ("-dense" if dense else ""))
    index_dir = root / "index"
    done = root / "READY"
    ready = f"ok {LAYOUT}" + (" dense" if dense else "") + "\n"
    with _BUILD_LOCK:
        if done.exists() and index_dir.exists() and done.read_text(encoding="utf-8") == ready:
            return index_dir
        root.mkdir(parents=True, exist_ok=True)
        fmt = "auto"
        if records is not None:
            corpus = root / "corpus.jsonl"
            write_jsonl(corpus, records)
            inputs, fmt = [corpus], "generic"
        from sleuth.search import Index  # the embedder "auto" picks by language when dense

        Index.build([str(p) for p in inputs or []], index_dir, format=fmt, dense=dense, progress=False)
        done.write_text(ready, encoding="utf-8")
    return index_dir


# --------------------------------------------------------------------------- plan
@dataclass
class RetrievalPlan:
    setting: str  # open | distractor | closed
    source: str = ""  # human description of what is indexed
    spec: str = ""  # open: retriever spec (index dir) once prepared
    key: str = ""  # content hash of what is indexed
    passages: int = 0
    corpus_file: str = ""  # open: a corpus file indexed as is
    # open: lexical | dense | hybrid ("": a user's --index searched in its own default mode)
    mode: str = "lexical"
    #: open, pooled: the records to index, until :meth:`prepare` has built the index (never sent to workers)
    records: list[dict[str, Any]] | None = field(default=None, repr=False, compare=False)

    def describe(self) -> dict[str, Any]:
        """What a resume must match (no machine-specific paths).  A lexical run is described as
        runs were before the mode could be chosen, so those resume unchanged."""
        d = {"setting": self.setting, "source": self.source, "key": self.key}
        return {**d, "mode": self.mode} if self.mode not in ("lexical", "") else d

    def manifest(self) -> dict[str, Any]:
        return {**self.describe(), "mode": self.mode or "index default", "spec": self.spec, "passages": self.passages}

    # -- driver side
    def prepare(self, console: Any = None) -> None:
        """Build (or find in the cache) the open-setting index before any task runs."""
        if self.setting != "open":
            return
        if self.spec:  # a user's --index: opened now, so a mode it cannot serve is refused before any task
            if self.mode:
                _open_cached(self.spec, self.mode)
            return
        if console is not None:
            console.print(f"[dim]index: {self.source}[/]")
        dense = self.mode in ("dense", "hybrid")
        if console is not None and dense:
            console.print(f"[dim]{self.mode} search: the pool is embedded once (cached for later runs)[/]")
        inputs = [Path(self.corpus_file)] if self.corpus_file else None
        self.spec = str(ensure_index(self.records, inputs, self.key, dense=dense))
        self.records = None
        if not self.passages:  # a corpus file's passages, counted in its index (a retriever may have no store)
            store = getattr(_open_cached(self.spec, self.mode), "store", None)
            self.passages = int(store.count_live()) if store is not None else 0

    # -- worker side
    def retriever_for(self, item: Item) -> Any:
        if self.setting == "closed":
            return None
        if self.setting == "open":
            return _open_cached(self.spec, self.mode)
        records = corpus_records(item.paragraphs)
        if not records:
            raise CorpusError(f"question {item.id} has no paragraphs of its own for the distractor setting")
        key = "q-" + _hash_records(records)[:24]
        return _open_cached(str(ensure_index(records, None, key)))


_OPEN: dict[tuple[str, str], Any] = {}
_OPEN_LOCK = threading.Lock()


def _open_cached(spec: str, mode: str = "lexical") -> Any:
    with _OPEN_LOCK:
        r = _OPEN.get((spec, mode))
        if r is None:
            from sleuth.search import open_retriever

            try:  # mode "": the index's own default
                r = _OPEN[(spec, mode)] = open_retriever(spec, **({"mode": mode} if mode else {}))
            except SearchError as e:  # e.g. a mode the index has no vectors for
                raise CorpusError(str(e)) from e
        return r


def search_mode(given: str | None, previous: dict[str, Any] | None) -> str | None:
    """The open setting's search mode: ``given`` (``--search-mode``), else the mode of the run being
    resumed (``previous``: its run.json ``settings``; a pooled run recorded without one searched
    lexically), else None (:data:`DEFAULT_SEARCH_MODE`, or a user's ``--index`` in its own default)."""
    if given or not previous or previous.get("setting") != "open":
        return given or None
    idx = previous.get("index") or {}
    return idx.get("mode") or (None if str(idx.get("source", "")).startswith("index ") else "lexical")


def default_mode(pool_chars: int) -> str:
    """The open setting's mode when none is given, for a pool of ``pool_chars`` characters."""
    return DEFAULT_SEARCH_MODE if pool_chars <= DENSE_DEFAULT_MAX_CHARS else "lexical"


def plan_retrieval(
    dataset: Dataset, setting: str | None, *, index: str | None = None, mode: str | None = None
) -> RetrievalPlan:
    """Decide what to index for ``setting`` (None: open when the dataset has a corpus, else closed);
    ``mode``: how the open setting searches (None: :func:`default_mode` of the pool's size; for a
    user's ``--index``, the index's own default: hybrid where it has vectors). Both are checked by
    :func:`sleuth.eval.config.validate`."""
    has_paras = any(it.paragraphs for it in dataset.items)
    if setting is None:
        setting = "open" if (index or dataset.corpus_path or has_paras) else "closed"
    if mode not in (None, "lexical") and setting != "open":
        raise CorpusError(f"--search-mode {mode} applies to the open setting only (this run is {setting})")
    if setting == "closed":
        return RetrievalPlan("closed", source="none (closed book)")
    if setting == "distractor":
        if not has_paras:
            raise CorpusError(f"{dataset.name} has no per-question paragraphs; use --setting open or closed")
        n = sum(len(it.paragraphs) for it in dataset.items)
        return RetrievalPlan("distractor", source="each question's own paragraphs", key="per-question", passages=n)
    if index:
        return RetrievalPlan(
            "open",
            source=f"index {index}",
            spec=index,
            key=_file_sha(Path(index)) if Path(index).exists() else index,
            mode=mode or "",
        )
    if dataset.corpus_path is not None:
        cp = dataset.corpus_path
        return RetrievalPlan(
            "open",
            source=f"corpus file {cp.name}",
            key="f-" + _file_sha(cp)[:24],
            corpus_file=str(cp),
            mode=mode or default_mode(sum(f.stat().st_size for f in [cp, *cp.rglob("*")] if f.is_file())),
        )
    if not has_paras:
        raise CorpusError(f"{dataset.name} has no paragraphs to index; give --corpus FILE or --index DIR")
    # pool the paragraphs of the WHOLE file (not only the sample): the open setting's corpus
    records = corpus_records(pooled_paragraphs(load_dataset(dataset.path, dataset.format)))
    return RetrievalPlan(
        "open",
        source=f"all {len(records)} paragraphs of {dataset.name} pooled",
        key="p-" + _hash_records(records)[:24],
        passages=len(records),
        mode=mode or default_mode(sum(len(r["title"]) + len(r["text"]) for r in records)),
        records=records,
    )
