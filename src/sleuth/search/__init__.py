"""Knowledge sources behind one protocol, ``search(query, k, filters) -> [Passage]``, opened by
:func:`open_retriever`.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from sleuth.kvcache import KVCache, default_cache_dir
from sleuth.search.base import FilterError, Filters, Passage, Retriever, SearchError, SearchUnavailable
from sleuth.search.chunking import DEFAULT_MAX_CHARS
from sleuth.search.generations import SCHEMA_VERSION, IndexDamaged, IndexError_, IndexNotFound, file_lock
from sleuth.search.index import MODES, Index, as_filters
from sleuth.search.index_writer import BuildReport, EmptyBuild, UnknownDocument
from sleuth.search.lexical import LAYOUT
from sleuth.search.multilingual import AUTO, MULTILINGUAL_EMBEDDER
from sleuth.search.remote import EmbedServer, RerankServer
from sleuth.search.rerank import DEFAULT_DEPTH, RerankedRetriever, make_reranker

__all__ = [
    "MODES",
    "BuildReport",
    "EmbedServer",
    "EmptyBuild",
    "FilterError",
    "Filters",
    "Index",
    "IndexDamaged",
    "IndexError_",
    "IndexNotFound",
    "Passage",
    "RerankServer",
    "RerankedRetriever",
    "Retriever",
    "SearchError",
    "SearchUnavailable",
    "UnknownDocument",
    "as_filters",
    "corpus_index_dir",
    "open_retriever",
]


def corpus_index_dir(
    corpus: str | Path,
    *,
    format: str = "auto",
    dense: bool = False,
    embedder: str | None = None,
    max_chars: int = DEFAULT_MAX_CHARS,
    cache_dir: str | Path | None = None,
) -> Path:
    """Where the cached index of a corpus file/folder lives: keyed on the
    content hash of its files and on every build setting."""
    root = Path(corpus).expanduser().resolve()
    h = hashlib.sha256(repr((SCHEMA_VERSION, format, dense, embedder, max_chars)).encode())
    h.update(LAYOUT.encode())
    if dense and embedder in (None, AUTO):  # what "auto" may resolve to is part of the key
        h.update(f"auto:{MULTILINGUAL_EMBEDDER}".encode())
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    for f in files:
        h.update(str(f.relative_to(root) if f != root else f.name).encode("utf-8", "surrogateescape"))
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    base = Path(cache_dir).expanduser() if cache_dir else default_cache_dir() / "indexes"
    return base / f"{root.name[:40]}-{h.hexdigest()[:20]}"


def _open_corpus(
    corpus: Path,
    *,
    format: str,
    dense: bool,
    embedder: str | None,
    cache_dir: Any,
    progress: bool,
    embed_server: EmbedServer | None,
) -> Index:
    if embed_server is not None:
        dense, embedder = True, embed_server.name
    target = corpus_index_dir(corpus, format=format, dense=dense, embedder=embedder, cache_dir=cache_dir)
    with file_lock(target.with_name(target.name + ".lock")):
        if not Index.is_index(target):
            Index.build(
                [corpus],
                target,
                format=format,
                dense=dense,
                embedder=embedder,
                progress=progress,
                embed_server=embed_server,
            )
    return Index.open(target, embed_server=embed_server)


def open_retriever(spec: str | Path | Retriever, **kw: Any) -> Retriever:
    """Open a knowledge source: an index folder, a corpus file or folder (indexed once into the cache),
    ``"tavily"``, ``"searxng:URL"``, ``"pg:DSN"`` or a :class:`Retriever` (returned as is).

    The specs and the options ``mode``, ``cache``, ``rerank`` and ``rerank_depth`` are in docs/knowledge.md.
    Indexes and corpora also take ``embed_model`` and ``embed_base_url`` (vectors from an OpenAI-compatible
    ``/v1/embeddings`` server; default ``$SLEUTH_EMBED_*``).
    """
    cache = kw.pop("cache", None)
    mode = kw.pop("mode", None)
    rerank = kw.pop("rerank", None)
    rerank_depth = int(kw.pop("rerank_depth", DEFAULT_DEPTH))
    llm = kw.pop("llm", None)
    embed_model = kw.pop("embed_model", None)
    embed_base_url = kw.pop("embed_base_url", None)
    retriever: Retriever
    default_cache = False
    if not isinstance(spec, (str, Path)):
        if not isinstance(spec, Retriever):
            raise SearchError(f"{spec!r} is not a retriever, an index folder or a source name")
        retriever = spec
    elif isinstance(spec, str) and spec.lower() == "tavily":
        from sleuth.search.web import TavilyRetriever

        retriever, default_cache = TavilyRetriever(**kw), True
    elif isinstance(spec, str) and spec.lower().startswith("searxng:"):
        from sleuth.search.web import SearxngRetriever

        retriever, default_cache = SearxngRetriever(spec.split(":", 1)[1], **kw), True
    elif isinstance(spec, str) and spec.lower().startswith("pg:"):
        from sleuth.search.pg import PgRetriever

        retriever = PgRetriever(spec.split(":", 1)[1], **kw)
    else:
        path = Path(spec).expanduser()
        if Index.looks_like_index(path):
            retriever = Index.open(path, embed_model=embed_model, embed_base_url=embed_base_url)
        elif path.exists():
            server = EmbedServer.resolve(embed_model, embed_base_url)
            retriever = _open_corpus(
                path,
                format=kw.pop("format", "auto"),
                dense=bool(kw.pop("dense", False)),
                embedder=kw.pop("embedder", None),
                cache_dir=kw.pop("cache_dir", None),
                progress=bool(kw.pop("progress", False)),
                embed_server=server,
            )
        else:
            raise SearchError(
                f"{spec!r} is neither an index folder, a corpus file or folder, 'tavily', 'searxng:URL' nor 'pg:DSN'"
            )
    if mode is not None:
        if not isinstance(retriever, Index):
            raise SearchError(f"mode={mode!r} applies to embedded indexes only")
        retriever._check_mode(mode)
        retriever.mode = mode
    if rerank is None:
        rerank = RerankServer.resolve()
    reranker = make_reranker(rerank, llm=llm)
    if reranker is not None:
        retriever = RerankedRetriever(retriever, reranker, depth=rerank_depth)
    if cache is None:
        cache = default_cache
    if cache is not False:
        from sleuth.search.cache import CachedRetriever

        kv = cache if isinstance(cache, KVCache) else None
        path_ = None if cache is True or kv is not None else cache
        retriever = CachedRetriever(retriever, cache=kv, path=path_)
    return retriever
