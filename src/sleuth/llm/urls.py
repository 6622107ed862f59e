"""Base URLs of OpenAI-compatible servers: checked once, normalised to the ``/v1`` prefix."""

from __future__ import annotations

from urllib.parse import urlparse

from sleuth.llm.base import LLMUnavailable

__all__ = ["api_base", "check_url", "usable_url"]


def api_base(base_url: str) -> str:
    """Normalise a base URL to the ``.../v1``-style prefix the endpoints hang off.

    ``http://host:8080`` -> ``http://host:8080/v1``; a URL that already has a
    path (``https://api.openai.com/v1``, ``.../compatible-mode/v1``) is kept.
    """
    url = base_url.strip().rstrip("/")
    for suffix in ("/chat/completions", "/completions"):
        if url.endswith(suffix):
            url = url[: -len(suffix)]
    path = urlparse(url).path
    if path in ("", "/"):
        url += "/v1"
    return url


def usable_url(url: str) -> bool:
    """Whether ``url`` can ever work: an http(s) scheme, a host and a well-formed port."""
    try:
        u = urlparse((url or "").strip())
        u.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError:
        return False
    return u.scheme in ("http", "https") and bool(u.hostname)


def check_url(base_url: str) -> None:
    """Refuse a base URL that can never work (no http(s) scheme, no host, bad port) in one sentence."""
    if not usable_url(base_url):
        raise LLMUnavailable(
            f"{base_url!r} is not a usable LLM server URL (expected http(s)://host[:port][/v1]); "
            "check SLEUTH_LLM_BASE_URL or --base-url"
        )
