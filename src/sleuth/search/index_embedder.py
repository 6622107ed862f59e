"""Which embedder an index's queries use: the one that made its vectors (a bundled model, or a
server recorded in the manifest), and one clear error for any other."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sleuth.search.generations import IndexError_
from sleuth.search.remote import HTTP_PREFIX, EmbedServer


def query_embed_server(
    root: Path, gen: Path, embed_model: str | None, embed_base_url: str | None
) -> EmbedServer | None:
    """The server an index's queries are embedded by: the arguments, else ``SLEUTH_EMBED_*``, else
    the one the index was built with (for an index embedded through a server)."""
    try:
        manifest = json.loads((gen / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None  # a damaged manifest: Index() says so in one sentence
    if not isinstance(manifest, dict):
        return None
    rec = manifest.get("embed_server") or {}
    if not manifest.get("dense"):
        return None  # no vectors: nothing to embed a query for
    if not rec:  # a bundled model made the vectors: a named server is refused by check_embed_server
        if embed_model or embed_base_url:
            model = (embed_model or embed_base_url or "").removeprefix(HTTP_PREFIX)
            return EmbedServer(model=model, base_urls=(embed_base_url or "",))
        return None
    return EmbedServer.resolve(
        embed_model or rec.get("model"),
        embed_base_url,
        fallback_url=rec.get("base_url"),
        query_prefix=rec.get("query_prefix"),
        passage_prefix=rec.get("passage_prefix"),
    )


def check_embed_server(root: Path, manifest: dict[str, Any], server: EmbedServer | None) -> EmbedServer | None:
    """``server`` if it makes the vectors the index holds, else one clear :class:`IndexError_`."""
    if not manifest.get("dense"):
        return server
    made_by = manifest.get("embedder") or "?"
    rec = manifest.get("embed_server") or {}
    if not rec:
        if server is not None:
            raise IndexError_(
                f"{root} was embedded with the bundled model {made_by}, not {server.model!r} from a server: "
                "drop --embed-model/--embed-base-url (and SLEUTH_EMBED_*) or rebuild the index with them"
            )
        return None
    if server is not None and server.model != rec.get("model"):
        raise IndexError_(
            f"{root} was embedded with {rec.get('model')!r} ({rec.get('dim')} dims); the query embedder is "
            f"{server.model!r}: use --embed-model {rec.get('model')} or rebuild the index with {server.model!r}"
        )
    return server
