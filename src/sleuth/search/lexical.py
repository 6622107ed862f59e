"""BM25 over tantivy, with the access scope enforced inside the query (filters are constant-score ``Must`` clauses).

A query with Chinese in it also searches the title/section ``head`` field, boosted by :data:`HEAD_BOOST`;
docs/knowledge.md has why tantivy and the measurements behind the boost.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import tantivy

from sleuth.search.base import Filters, Passage
from sleuth.search.scope import passage_terms, values_in_range
from sleuth.search.tokenize import has_cjk, tokenize

__all__ = ["HEAD_BOOST", "LAYOUT", "LexicalIndex", "passage_tokens"]

#: how passages are laid out in the fields; part of every cache key of a built index
LAYOUT = "body+head/2"
#: weight of the ``head`` (title, section) field for queries with Chinese in them
HEAD_BOOST = 2.0


def passage_tokens(p: Passage) -> list[str]:
    """The tokens a passage is found by: title, section and text."""
    return tokenize(f"{p.title}\n{p.section}\n{p.text}")


def _schema(head: bool = True) -> tantivy.Schema:
    """The fields of the lexical index (``head=False``: indexes built before the ``head`` field)."""
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("body", tokenizer_name="whitespace", index_option="freq")
    if head:
        sb.add_text_field("head", tokenizer_name="whitespace", index_option="freq")
    sb.add_integer_field("row", stored=True, indexed=True, fast=True)
    for name in ("doc", "acl", "eq", "rng"):
        sb.add_text_field(name, tokenizer_name="raw", index_option="basic")
    return sb.build()


def _has_head(path: Path) -> bool:
    try:
        meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return True
    return any(f.get("name") == "head" for f in meta.get("schema", []))


class LexicalIndex:
    """A tantivy index in ``path`` mapping tokens to passage rows."""

    def __init__(self, path: str | Path, *, create: bool = False) -> None:
        self.path = Path(path)
        if create:
            self.path.mkdir(parents=True, exist_ok=True)
        elif not (self.path / "meta.json").exists():
            raise FileNotFoundError(f"no lexical index in {self.path}")
        self.has_head = create or _has_head(self.path)
        self.schema = _schema(self.has_head)
        self.index = tantivy.Index(self.schema, path=str(self.path), reuse=not create)
        self._writer: tantivy.IndexWriter | None = None
        # readers load their segments now, so the handle stays valid after the
        # generation folder is replaced and removed by a writer
        self._searcher: tantivy.Searcher | None = None if create else self.index.searcher()

    # -- writing

    def _w(self) -> tantivy.IndexWriter:
        if self._writer is None:
            self._writer = self.index.writer(heap_size=128_000_000, num_threads=1)
        return self._writer

    def add(self, items: Iterable[tuple[int, Passage]]) -> None:
        w = self._w()
        for row, p in items:
            acl, eq, rng = passage_terms(p)
            text = {"body": " ".join(passage_tokens(p))}
            if self.has_head:
                text["head"] = " ".join(tokenize(f"{p.title}\n{p.section}"))
            w.add_document(tantivy.Document(**text, row=row, doc=p.doc_id, acl=acl, eq=eq, rng=rng))

    def delete_doc(self, doc_id: str) -> None:
        self._w().delete_documents_by_term("doc", doc_id)

    def commit(self) -> None:
        if self._writer is not None:
            self._writer.commit()
            self._writer.wait_merging_threads()
            self._writer = None
        self.index.reload()
        self._searcher = None

    # -- reading

    @property
    def searcher(self) -> tantivy.Searcher:
        if self._searcher is None:
            self._searcher = self.index.searcher()
        return self._searcher

    def scope_query(self, filters: Filters | None) -> tantivy.Query | None:
        """The filter as a tantivy query (``None``: no restriction)."""
        if filters is None or filters.is_empty():
            return None
        clauses: list[tantivy.Query] = []
        if filters.acl is not None:
            clauses.append(self._term_set("acl", sorted(filters.acl)))
        for key, allowed in filters.equals:
            clauses.append(self._term_set("eq", [f"{key}={v}" for v in allowed]))
        for key, (lo, hi) in filters.ranges:
            prefix = f"{key}="
            rendered = [t[len(prefix) :] for t, _ in self.searcher.terms_with_prefix("rng", prefix)]
            keep = values_in_range(key, rendered, lo, hi)
            clauses.append(self._term_set("rng", [prefix + r for r in keep]))
        return tantivy.Query.boolean_query([(tantivy.Occur.Must, c) for c in clauses])

    def _term_set(self, field: str, values: Sequence[str]) -> tantivy.Query:
        if not values:
            return tantivy.Query.empty_query()
        return tantivy.Query.term_set_query(self.schema, field, list(values))

    def search_tokens(self, tokens: Sequence[str], k: int, filters: Filters | None = None) -> list[tuple[int, float]]:
        """``(row, bm25 score)`` of the best ``k`` visible passages for ``tokens``
        (Chinese tokens also search the ``head`` field, see the module doc)."""
        uniq = list(dict.fromkeys(tokens))
        if not uniq or k <= 0:
            return []
        clauses = [(tantivy.Occur.Should, tantivy.Query.term_query(self.schema, "body", t)) for t in uniq]
        if self.has_head and has_cjk("".join(uniq)):
            clauses += [
                (
                    tantivy.Occur.Should,
                    tantivy.Query.boost_query(tantivy.Query.term_query(self.schema, "head", t), HEAD_BOOST),
                )
                for t in uniq
            ]
        text_q = tantivy.Query.boolean_query(clauses)
        scope = self.scope_query(filters)
        if scope is not None:
            text_q = tantivy.Query.boolean_query(
                [(tantivy.Occur.Must, text_q), (tantivy.Occur.Must, tantivy.Query.const_score_query(scope, 0.0))]
            )
        s = self.searcher
        hits = s.search(text_q, k, count=False).hits
        if not hits:
            return []
        rows = s.fast_field_values("row", [addr for _, addr in hits])
        return [(int(r), float(score)) for (score, _), r in zip(hits, rows, strict=True) if r is not None]

    def search(self, query: str, k: int, filters: Filters | None = None) -> list[tuple[int, float]]:
        return self.search_tokens(tokenize(query), k, filters)

    def count(self, filters: Filters | None = None) -> int:
        """Number of live passages visible within ``filters``."""
        scope = self.scope_query(filters)
        q = scope if scope is not None else tantivy.Query.all_query()
        return int(self.searcher.search(q, 1, count=True).count or 0)

    def visible_mask(self, filters: Filters | None, n_rows: int) -> np.ndarray:
        """Boolean mask over rows ``0..n_rows-1``: live passages visible within ``filters``
        (the same tantivy scope query as :meth:`search_tokens`, so both agree)."""
        mask = np.zeros(n_rows, dtype=bool)
        s = self.searcher
        n = int(s.num_docs)
        if n == 0:
            return mask
        scope = self.scope_query(filters)
        q = scope if scope is not None else tantivy.Query.all_query()
        hits = s.search(q, n, count=False).hits
        if hits:
            rows = np.asarray(s.fast_field_values("row", [addr for _, addr in hits]), dtype=np.int64)
            mask[rows[(rows >= 0) & (rows < n_rows)]] = True
        return mask
