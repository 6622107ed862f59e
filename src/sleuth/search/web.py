"""Web search behind the retriever protocol: Tavily and a self-hosted SearXNG.

Web passages carry ``acl`` = the labels given at construction and no version/region; :class:`Filters`
are applied to each result before it is returned.  Failures end in :class:`SearchUnavailable` (one clear
sentence; 429/5xx retried first) or :class:`SearchError`; API keys are never logged or put in messages.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Iterator, Sequence
from typing import Any

import httpx

from sleuth.config import settings
from sleuth.llm.http_policy import parse_retry_after
from sleuth.search.base import Filters, Passage, SearchError, SearchUnavailable

__all__ = ["SearxngRetriever", "TavilyRetriever", "WebRetriever"]

_MAX_RETRY_WAIT = 10.0


class WebRetriever:
    """Shared plumbing: HTTP with retries, error mapping, scope filtering."""

    name = "web"
    engine = "web"

    def __init__(self, *, timeout: float = 20.0, max_retries: int = 2, acl: Sequence[str] = ("all",)) -> None:
        self.timeout = timeout
        self.max_retries = max_retries
        self.acl = list(acl)
        self._client = httpx.Client(timeout=timeout, headers={"User-Agent": "sleuth/0.1"})

    # -- subclasses implement these

    def _request(self, query: str, k: int) -> httpx.Request:
        raise NotImplementedError

    def _parse(self, data: Any, query: str) -> list[Passage]:
        raise NotImplementedError

    def _results(self, data: Any) -> Iterator[tuple[dict[str, Any], str, str, str]]:
        """The answer's results that are objects, each with its url, title and text (as strings)."""
        if not isinstance(data, dict) or not isinstance(data.get("results"), list):
            raise SearchError(f"{self.engine} returned an unexpected response (no 'results' list)")
        for r in data["results"]:
            if isinstance(r, dict):
                yield r, str(r.get("url") or ""), str(r.get("title") or ""), str(r.get("content") or "")

    def _passage(
        self, url: str, title: str, text: str, *, source: str, score: Any, meta: dict[str, Any], or_title: bool = False
    ) -> Passage:
        """One result as a passage: its id from URL, title and text; this retriever's ACL; with
        ``or_title``, a result without text reads as its title."""
        pid = _url_id(url, title, text)
        body = text or title if or_title else text
        return Passage(
            id=pid,
            doc_id=pid,
            text=body,
            title=title,
            url=url,
            source=source,
            score=_score(score),
            acl=list(self.acl),
            metadata=meta,
        )

    # -- protocol

    def search(self, query: str, k: int = 5, filters: Filters | None = None) -> list[Passage]:
        if k <= 0 or not query.strip():
            return []
        data = self._fetch(self._request(query, k))
        passages = self._parse(data, query)
        if filters is not None and not filters.is_empty():
            passages = [p for p in passages if filters.matches(p)]
        return passages[:k]

    def search_batch(self, queries: Sequence[str], k: int = 5, filters: Filters | None = None) -> list[list[Passage]]:
        return [self.search(q, k, filters) for q in queries]

    def close(self) -> None:
        self._client.close()

    # -- HTTP

    def _fetch(self, req: httpx.Request) -> Any:
        attempt = 0
        while True:
            try:
                resp = self._client.send(req)
            except httpx.TimeoutException as e:
                if attempt < self.max_retries:
                    attempt += 1
                    continue
                raise SearchUnavailable(f"{self.engine} did not answer within {self.timeout:g}s") from e
            except httpx.TransportError as e:
                raise SearchUnavailable(
                    f"{self.engine} is unreachable ({type(e).__name__}); check the network or the URL"
                ) from e
            if resp.status_code in (401, 403):
                raise SearchUnavailable(self._denied_message(resp.status_code))
            if resp.status_code == 429 or resp.status_code >= 500:
                if attempt < self.max_retries:
                    attempt += 1
                    time.sleep(_retry_after(resp, attempt))
                    continue
                raise SearchUnavailable(
                    f"{self.engine} is unavailable (HTTP {resp.status_code} after {attempt + 1} tries)"
                )
            if resp.status_code >= 400:
                raise SearchError(f"{self.engine} rejected the request (HTTP {resp.status_code})")
            try:
                return resp.json()
            except ValueError as e:
                raise SearchError(f"{self.engine} returned a response that is not JSON") from e

    def _denied_message(self, status: int) -> str:
        return f"{self.engine} refused the request (HTTP {status})"


def _retry_after(resp: httpx.Response, attempt: int) -> float:
    """The server's ``Retry-After`` (seconds or an HTTP date), else 0.5 s doubled per attempt; at most 10 s."""
    wait = parse_retry_after(resp.headers.get("Retry-After"), _MAX_RETRY_WAIT)
    return wait if wait is not None else min(0.5 * 2 ** (attempt - 1), _MAX_RETRY_WAIT)


def _score(v: Any) -> float:
    """An engine's relevance score; junk (text, lists, NaN, inf) counts as 0."""
    try:
        f = float(v or 0.0)
    except (TypeError, ValueError):
        return 0.0
    return f if math.isfinite(f) else 0.0


def _url_id(url: str, title: str, text: str) -> str:
    return url or "web:" + hashlib.sha1(f"{title}\n{text}".encode()).hexdigest()[:16]


class TavilyRetriever(WebRetriever):
    """Tavily search (``POST {base_url}/search``); the key comes from ``TAVILY_API_KEY``."""

    name = "tavily"
    engine = "Tavily"

    def __init__(
        self,
        api_key: str | None = None,
        *,
        base_url: str | None = None,
        search_depth: str = "basic",
        timeout: float = 20.0,
        max_retries: int = 2,
        acl: Sequence[str] = ("all",),
    ) -> None:
        super().__init__(timeout=timeout, max_retries=max_retries, acl=acl)
        self._key = api_key or settings.tavily_api_key()
        self.base_url = (base_url or settings.tavily_base_url()).rstrip("/")
        self.search_depth = search_depth

    def cache_identity(self) -> str:
        return f"tavily:{self.base_url}:{self.search_depth}"

    def _request(self, query: str, k: int) -> httpx.Request:
        if not self._key:
            raise SearchUnavailable(
                "Tavily web search needs an API key: set TAVILY_API_KEY (or search a local index instead)"
            )
        body = {
            "query": query,
            "max_results": max(1, min(k, 20)),
            "search_depth": self.search_depth,
            "include_answer": False,
        }
        return self._client.build_request(
            "POST", f"{self.base_url}/search", json=body, headers={"Authorization": f"Bearer {self._key}"}
        )

    def _denied_message(self, status: int) -> str:
        return f"Tavily rejected the API key (HTTP {status}); check TAVILY_API_KEY"

    def _parse(self, data: Any, query: str) -> list[Passage]:
        out = []
        for r, url, title, text in self._results(data):
            if not text.strip():
                continue
            meta = {k: r[k] for k in ("published_date",) if r.get(k)}
            out.append(self._passage(url, title, text, source="tavily", score=r.get("score"), meta=meta))
        return out


class SearxngRetriever(WebRetriever):
    """A SearXNG instance's JSON API (``GET {base}/search?format=json&q=``)."""

    engine = "SearXNG"

    def __init__(
        self,
        base_url: str,
        *,
        engines: str | None = None,
        language: str | None = None,
        timeout: float = 20.0,
        max_retries: int = 2,
        acl: Sequence[str] = ("all",),
    ) -> None:
        super().__init__(timeout=timeout, max_retries=max_retries, acl=acl)
        base_url = base_url.strip().rstrip("/")
        if not base_url.startswith(("http://", "https://")):
            raise SearchError(f"SearXNG URL {base_url!r} must start with http:// or https://")
        self.base_url = base_url
        self.engines = engines
        self.language = language
        self.name = f"searxng:{base_url}"

    def cache_identity(self) -> str:
        return f"searxng:{self.base_url}:{self.engines}:{self.language}"

    def _request(self, query: str, k: int) -> httpx.Request:
        params = {"q": query, "format": "json"}
        if self.engines:
            params["engines"] = self.engines
        if self.language:
            params["language"] = self.language
        return self._client.build_request("GET", f"{self.base_url}/search", params=params)

    def _denied_message(self, status: int) -> str:
        return (
            f"SearXNG at {self.base_url} refused the JSON API (HTTP {status}); enable 'json' under "
            "search.formats in its settings.yml"
        )

    def _parse(self, data: Any, query: str) -> list[Passage]:
        out = []
        for r, url, title, text in self._results(data):
            if not (text.strip() or title.strip()):
                continue
            meta: dict[str, Any] = {}
            if r.get("engine"):
                meta["engine"] = str(r["engine"])
            if r.get("publishedDate"):
                meta["published_date"] = str(r["publishedDate"])
            out.append(
                self._passage(url, title, text, source="searxng", score=r.get("score"), meta=meta, or_title=True)
            )
        out.sort(key=lambda p: -p.score)
        return out
