"""Embeddings (:class:`HttpEmbedder`, ``/v1/embeddings``) and reranking (:class:`HttpReranker`, Jina/Cohere or
TEI bodies) from model servers, retried with the LLM client's :class:`~sleuth.llm.http_policy.HttpPolicy`.

Settings and the servers they speak to: docs/knowledge.md.  Keys are sent as ``Authorization: Bearer`` and
never shown.
"""

from __future__ import annotations

import base64
import itertools
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np

from sleuth.config import settings
from sleuth.llm.base import LLMAuthError, LLMError
from sleuth.llm.http_policy import HttpPolicy, Retryable
from sleuth.search.base import SearchError, SearchUnavailable

#: an index embedded through a server records its embedder as ``http:<model>``
HTTP_PREFIX = "http:"


class ServerStatusError(SearchError):
    """A model server refused a request for good (a 4xx other than 408/429)."""

    def __init__(self, message: str, status: int | None) -> None:
        super().__init__(message)
        self.status = status


def _urls(base_url: str | Sequence[str], what: str, flag: str) -> tuple[str, ...]:
    raw = [base_url] if isinstance(base_url, str) else list(base_url)
    urls = tuple(u.strip().rstrip("/") for part in raw for u in part.split(",") if u.strip())
    if not urls:
        raise SearchError(f"{flag} is empty: give the {what} server's URL")
    for u in urls:
        try:
            p = httpx.URL(u)
            ok = p.scheme in ("http", "https") and bool(p.host)
        except (httpx.InvalidURL, ValueError):
            ok = False
        if not ok:
            raise SearchError(f"{u!r} is not a usable {what} server URL (expected http(s)://host[:port][/v1]; {flag})")
    return urls


def _key(urls: Sequence[str], var: str, api_key: str | None) -> str | None:
    key = api_key if api_key is not None else settings.get(var)
    if key is None:
        from sleuth.llm.settings import _provider_for_url

        prov = _provider_for_url(urls[0])
        for v in prov.key_vars if prov is not None else ():
            key = settings.get(v)
            if key:
                break
    key = (key or "").strip() or None
    if key is not None and any(c.isspace() for c in key):
        raise SearchError(f"the API key contains whitespace; check {var}")
    return key


def _positive(name: str, value: int | None, default: int) -> int:
    v = value if value is not None else settings.integer(name, default)
    if v is None or v < 1:
        raise SearchError(f"{name} must be at least 1, not {v}")
    return int(v)


@dataclass(frozen=True)
class EmbedServer:
    """Where vectors come from when they come from a server (or a pool of servers)."""

    model: str
    base_urls: tuple[str, ...]
    api_key: str | None = field(default=None, repr=False)
    batch_size: int = 64
    concurrency: int = 4
    timeout: float = 60.0
    max_retries: int = 4
    #: put before each query / passage (e5-style models need ``query: `` / ``passage: ``)
    query_prefix: str = ""
    passage_prefix: str = ""

    @classmethod
    def resolve(
        cls,
        model: str | None = None,
        base_url: str | Sequence[str] | None = None,
        *,
        query_prefix: str | None = None,
        passage_prefix: str | None = None,
        api_key: str | None = None,
        batch_size: int | None = None,
        concurrency: int | None = None,
        timeout: float | None = None,
        max_retries: int | None = None,
        fallback_url: str | None = None,
    ) -> EmbedServer | None:
        """Arguments, else ``SLEUTH_EMBED_*``; ``None`` when neither names a model nor a server.

        ``fallback_url`` (the server an index recorded) is used when a model is known but no URL is given.
        """
        model = model or settings.get("SLEUTH_EMBED_MODEL")
        base_url = base_url or settings.get("SLEUTH_EMBED_BASE_URL") or fallback_url
        if not model and not base_url:
            return None
        if not model:
            raise SearchError("--embed-base-url needs --embed-model (or SLEUTH_EMBED_MODEL): the model to ask for")
        if not base_url:
            raise SearchError("--embed-model needs --embed-base-url (or SLEUTH_EMBED_BASE_URL): the server to ask")
        urls = _urls(base_url, "embedding", "--embed-base-url")
        model = model.removeprefix(HTTP_PREFIX)
        e5 = "e5" in model.lower().replace("-", "")
        qp = query_prefix if query_prefix is not None else settings.get("SLEUTH_EMBED_QUERY_PREFIX")
        pp = passage_prefix if passage_prefix is not None else settings.get("SLEUTH_EMBED_PASSAGE_PREFIX")
        return cls(
            model=model,
            query_prefix=(qp if qp is not None else ("query: " if e5 else "")),
            passage_prefix=(pp if pp is not None else ("passage: " if e5 else "")),
            base_urls=urls,
            api_key=_key(urls, "SLEUTH_EMBED_API_KEY", api_key),
            batch_size=_positive("SLEUTH_EMBED_BATCH", batch_size, 64),
            concurrency=_positive("SLEUTH_EMBED_CONCURRENCY", concurrency, 4),
            timeout=float(timeout if timeout is not None else settings.number("SLEUTH_EMBED_TIMEOUT", 60.0) or 60.0),
            max_retries=max(
                0, max_retries if max_retries is not None else settings.integer("SLEUTH_EMBED_RETRIES", 4) or 0
            ),
        )

    @property
    def name(self) -> str:
        """The embedder's name in manifests and in the embedding cache's keys."""
        return HTTP_PREFIX + self.model


@dataclass(frozen=True)
class RerankServer:
    """A rerank server: ``/v1/rerank`` or ``/rerank``."""

    base_url: str
    model: str = ""
    api_key: str | None = field(default=None, repr=False)
    #: ``auto`` (found on first use), ``jina`` (Jina/Cohere/llama.cpp body) or ``tei``
    shape: str = "auto"
    timeout: float = 30.0
    max_retries: int = 3

    @classmethod
    def resolve(
        cls,
        base_url: str | None = None,
        model: str | None = None,
        *,
        api_key: str | None = None,
        shape: str | None = None,
    ) -> RerankServer | None:
        base_url = base_url or settings.get("SLEUTH_RERANK_BASE_URL")
        if not base_url:
            return None
        (url,) = _urls(base_url, "rerank", "--rerank-base-url")[:1]
        shape = (shape or settings.get("SLEUTH_RERANK_SHAPE") or "auto").lower()
        if shape not in ("auto", "jina", "cohere", "tei"):
            raise SearchError(f"rerank shape must be auto, jina, cohere or tei, not {shape!r}")
        return cls(
            base_url=url,
            model=model or settings.get("SLEUTH_RERANK_MODEL") or "",
            api_key=_key([url], "SLEUTH_RERANK_API_KEY", api_key),
            shape="jina" if shape == "cohere" else shape,
            timeout=settings.number("SLEUTH_RERANK_TIMEOUT", 30.0) or 30.0,
        )


class _Pool:
    """The HTTP clients of one service's servers and its one retry loop."""

    def __init__(
        self,
        urls: Sequence[str],
        *,
        api_key: str | None,
        timeout: float,
        max_retries: int,
        connections: int,
        key_var: str,
        what: str,
    ) -> None:
        self.urls = list(urls)
        headers = {"Accept": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self.policies = [
            HttpPolicy(u, has_key=bool(api_key), max_retries=max_retries, key_var=key_var, what=what) for u in urls
        ]
        limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
        tmo = httpx.Timeout(timeout, connect=min(timeout, 10.0))
        self.clients = [httpx.Client(headers=headers, timeout=tmo, limits=limits) for _ in urls]
        self._turn = itertools.count()
        self.requests = 0
        self.retries = 0
        self._lock = threading.Lock()

    def post(self, path: Callable[[str], str], body: dict[str, Any], *, retry: bool = True) -> Any:
        """POST ``body`` as JSON to ``path(server)``; the parsed JSON answer.

        Attempts go round the pool (a retry goes to the next server); a final 4xx is a
        :class:`ServerStatusError`, spent retries or a refused key :class:`SearchUnavailable`.
        """
        first = next(self._turn)
        attempt = 0
        while True:
            i = (first + attempt) % len(self.urls)
            policy = self.policies[i]
            err: LLMError | Retryable
            url = path(self.urls[i])
            with self._lock:
                self.requests += 1
            try:
                r = self.clients[i].post(url, json=body)
            except httpx.HTTPError as e:
                err = policy.transport_error(e)
            else:
                if r.status_code < 400:
                    try:
                        return r.json()
                    except ValueError:
                        raise SearchError(f"{url} answered HTTP {r.status_code} with a body that is not JSON") from None
                err = policy.classify(r)
            if isinstance(err, LLMAuthError):
                raise SearchUnavailable(str(err)) from None
            if isinstance(err, LLMError):
                raise ServerStatusError(str(err), err.status) from None
            wait = policy.next_wait(err, attempt, may_retry=retry)
            if isinstance(wait, LLMError):
                raise SearchUnavailable(str(wait)) from None
            with self._lock:
                self.retries += 1
            attempt += 1
            time.sleep(wait)

    def close(self) -> None:
        for c in self.clients:
            c.close()


def _v1(url: str) -> str:
    """``http://h:p`` -> ``http://h:p/v1``; a URL with a path is kept."""
    return url if httpx.URL(url).path not in ("", "/") else url + "/v1"


class HttpEmbedder:
    """Unit vectors from an OpenAI-compatible ``/v1/embeddings`` server (or a pool)."""

    def __init__(self, server: EmbedServer, *, dim: int | None = None) -> None:
        self.server = server
        self.name = server.name
        #: the embedding cache's key: the model, and the prefix its passages are sent with
        self.cache_name = server.name + (f"|{server.passage_prefix}" if server.passage_prefix else "")
        self.model = server.model
        self.batch_size = server.batch_size
        #: requests the caller may keep in flight (each server gets ``concurrency``)
        self.parallel = server.concurrency * len(server.base_urls)
        self._dim = dim
        self._dim_lock = threading.Lock()
        self.pool = _Pool(
            server.base_urls,
            api_key=server.api_key,
            timeout=server.timeout,
            max_retries=server.max_retries,
            connections=server.concurrency,
            key_var="SLEUTH_EMBED_API_KEY",
            what="embedding request",
        )

    def __repr__(self) -> str:
        return f"HttpEmbedder(model={self.model!r}, servers={list(self.server.base_urls)!r})"

    @property
    def dim(self) -> int:
        """Vector size: known from the index, else asked of the server once."""
        with self._dim_lock:
            if self._dim is None:
                self._dim = int(self._request(["dimension probe"]).shape[1])
            return self._dim

    def embed(self, texts: Sequence[str], *, batch_size: int | None = None, is_query: bool = False) -> np.ndarray:
        """One request per ``batch_size`` texts, in order; empty texts get zero vectors without a request."""
        texts = list(texts)
        bs = batch_size or self.batch_size
        live = [i for i, t in enumerate(texts) if t.strip()]
        pre = self.server.query_prefix if is_query else self.server.passage_prefix
        parts = [self._request([pre + texts[i] for i in live[s : s + bs]]) for s in range(0, len(live), bs)]
        dim = parts[0].shape[1] if parts else self.dim
        out = np.zeros((len(texts), dim), dtype=np.float32)
        if parts:
            out[live] = np.concatenate(parts)
        return out

    def _request(self, texts: list[str]) -> np.ndarray:
        body = {"model": self.model, "input": texts, "encoding_format": "float"}
        data = self.pool.post(lambda u: _v1(u) + "/embeddings", body)
        rows = data.get("data") if isinstance(data, dict) else None
        if not isinstance(rows, list) or len(rows) != len(texts):
            got = len(rows) if isinstance(rows, list) else "no"
            raise SearchError(f"the embedding server returned {got} embeddings for {len(texts)} texts")
        try:
            rows = sorted(rows, key=lambda r: int(r.get("index", 0)))
            vecs = [_vector(r["embedding"]) for r in rows]
        except (KeyError, TypeError, ValueError, AttributeError):
            raise SearchError("the embedding server's answer has no usable 'data[].embedding' vectors") from None
        dims = {v.shape[0] for v in vecs}
        want = self._dim
        if len(dims) != 1 or (want is not None and dims != {want}):
            raise SearchError(
                f"the embedding server returned {'/'.join(map(str, sorted(dims)))}-dimensional vectors for "
                f"model {self.model!r}, expected {want if want is not None else 'one size'}; "
                "check --embed-model (the index was made with another model?)"
            )
        m = np.stack(vecs).astype(np.float32)
        norms = np.linalg.norm(m, axis=1, keepdims=True)
        return m / np.maximum(norms, 1e-12)

    def close(self) -> None:
        self.pool.close()


def _vector(v: Any) -> np.ndarray:
    if isinstance(v, str):  # encoding_format=base64 answered anyway
        return np.frombuffer(base64.b64decode(v), dtype=np.float32).copy()
    a = np.asarray(v, dtype=np.float32)
    if a.ndim != 1 or a.size == 0 or not np.isfinite(a).all():
        raise ValueError("not a vector")
    return a


class HttpReranker:
    """Relevance scores from a rerank server, in the shape it speaks (found on first use)."""

    def __init__(self, server: RerankServer) -> None:
        self.server = server
        self.name = f"rerank:{server.model or server.base_url}"
        self.pool = _Pool(
            [server.base_url],
            api_key=server.api_key,
            timeout=server.timeout,
            max_retries=server.max_retries,
            connections=8,
            key_var="SLEUTH_RERANK_API_KEY",
            what="rerank request",
        )
        self._route: tuple[str, str] | None = None if server.shape == "auto" else self._routes()[0]
        self._route_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"HttpReranker({self.server.base_url!r}, model={self.server.model!r})"

    def _routes(self) -> list[tuple[str, str]]:
        base = self.server.base_url
        has_path = httpx.URL(base).path not in ("", "/")
        if self.server.shape == "tei":
            return [(base + "/rerank", "tei")]
        if has_path:  # .../v1 given: the endpoint hangs off it
            return [(base + "/rerank", "jina"), (base + "/rerank", "tei")]
        if self.server.shape == "jina":
            return [(base + "/v1/rerank", "jina"), (base + "/rerank", "jina")]
        return [(base + "/v1/rerank", "jina"), (base + "/rerank", "jina"), (base + "/rerank", "tei")]

    def scores(self, query: str, documents: Sequence[str]) -> list[float]:
        """One relevance score per document (higher is more relevant)."""
        if not documents:
            return []
        if self._route is not None:
            return self._ask(self._route, query, documents)
        with self._route_lock:
            last: ServerStatusError | None = None
            for route in self._routes():
                try:
                    got = self._ask(route, query, documents)
                except ServerStatusError as e:
                    if e.status not in (404, 405, 415, 422, 400):
                        raise
                    last = e
                    continue
                self._route = route
                return got
        raise SearchError(
            f"{self.server.base_url} has no rerank endpoint that Sleuth speaks (/v1/rerank or /rerank, "
            f"Jina/Cohere or TEI body): {last}"
        )

    def _ask(self, route: tuple[str, str], query: str, documents: Sequence[str]) -> list[float]:
        url, shape = route
        body: dict[str, Any]
        if shape == "tei":
            body = {"query": query, "texts": list(documents), "raw_scores": False, "truncate": True}
        else:
            body = {"query": query, "documents": list(documents), "top_n": len(documents)}
            if self.server.model:
                body["model"] = self.server.model
        data = self.pool.post(lambda _u: url, body)
        items = data.get("results", data.get("data")) if isinstance(data, dict) else data
        if not isinstance(items, list):
            raise SearchError(f"{url} answered without a list of results")
        scores = [float("-inf")] * len(documents)
        seen = 0
        for it in items:
            try:
                i = int(it["index"])
                s = float(it["relevance_score"] if "relevance_score" in it else it["score"])
            except (KeyError, TypeError, ValueError):
                raise SearchError(f"{url} answered a result without index and score: {str(it)[:80]}") from None
            if not 0 <= i < len(documents) or s != s:
                raise SearchError(f"{url} answered an index out of range or a NaN score: {str(it)[:80]}")
            scores[i] = s
            seen += 1
        if seen == 0:
            raise SearchError(f"{url} answered no scores for {len(documents)} documents")
        return scores

    def close(self) -> None:
        self.pool.close()
