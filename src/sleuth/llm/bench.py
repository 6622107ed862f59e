"""Speed figures of an embedded model: load time, prompt and decode tokens/s, memory.

Used by ``sleuth models bench`` and ``benchmarks/bench_models.py``.  The
server runs in ``subprocess`` mode so that its resident memory can be read
from ``/proc`` without counting the caller.
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from sleuth.llm.embedded import EmbeddedServer

__all__ = ["ModelFigures", "bench_model", "format_table", "measure_rates"]

_FILLER = (
    "The river flows past the old mill, where the miller keeps his records of grain and flour. "
    "Each season brings new travellers who ask about the road to the northern towns. "
)


@dataclass
class ModelFigures:
    model: str
    threads: int
    load_s: float
    prompt_tokens: int
    prompt_tok_s: float
    decode_tokens: int
    decode_tok_s: float
    rss_mb: float
    peak_rss_mb: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _rss_mb(pid: int) -> tuple[float, float]:
    rss = hwm = 0.0
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024
            elif line.startswith("VmHWM:"):
                hwm = int(line.split()[1]) / 1024
    return rss, hwm


def measure_rates(
    base_url: str, *, prompt_tokens: int = 384, decode_tokens: int = 64, repeats: int = 2, timeout: float = 600
) -> tuple[int, float, int, float]:
    """Prompt and decode speed of a running llama.cpp server (its ``/tokenize``, ``/detokenize`` and
    the ``timings`` of ``/v1/completions``): ``(prompt tokens, prompt tok/s, decoded tokens, decode
    tok/s)``, best of ``repeats``.  The prompt is never served from the cache (``cache_prompt``
    off, a different first word each time); decoding ignores end-of-sequence, so every repeat
    decodes ``decode_tokens``.  Raises ``httpx.HTTPError`` or ``KeyError`` where the server is not
    llama.cpp."""
    base_url = base_url.rstrip("/")
    url = base_url + "/v1/completions"
    with httpx.Client(timeout=timeout) as c:
        text = _FILLER * 40
        toks = c.post(base_url + "/tokenize", json={"content": text}).json()["tokens"][:prompt_tokens]
        prompt = c.post(base_url + "/detokenize", json={"tokens": toks}).json()["content"]
        best_p = best_d = 0.0
        n_p = n_d = 0
        for i in range(repeats):
            r = c.post(
                url, json={"prompt": f"{i} {prompt}", "max_tokens": 1, "temperature": 0, "cache_prompt": False}
            ).json()
            t = r["timings"]
            n_p = int(t["prompt_n"])
            best_p = max(best_p, float(t["prompt_per_second"]))
            r = c.post(
                url,
                json={
                    "prompt": f"Story {i}: Once upon a time",
                    "max_tokens": decode_tokens,
                    "temperature": 0,
                    "ignore_eos": True,
                    "cache_prompt": False,
                },
            ).json()
            t = r["timings"]
            n_d = int(t["predicted_n"])
            best_d = max(best_d, float(t["predicted_per_second"]))
    return n_p, best_p, n_d, best_d


def bench_model(
    name: str,
    *,
    threads: int = 2,
    prompt_tokens: int = 384,
    decode_tokens: int = 64,
    repeats: int = 2,
    ctx_size: int = 2048,
) -> ModelFigures:
    """Start ``name`` fresh, measure it, stop it.  Best of ``repeats`` for the rates."""
    srv = EmbeddedServer(name, threads=threads, ctx_size=ctx_size, mode="subprocess")
    srv.start()
    try:
        assert srv.base_url is not None and srv.pid is not None
        n_p, best_p, n_d, best_d = measure_rates(
            srv.base_url, prompt_tokens=prompt_tokens, decode_tokens=decode_tokens, repeats=repeats
        )
        rss, hwm = _rss_mb(srv.pid)
        return ModelFigures(
            name, threads, round(srv.load_s, 2), n_p, round(best_p, 1), n_d, round(best_d, 1), round(rss), round(hwm)
        )
    finally:
        srv.stop()


def format_table(rows: list[ModelFigures]) -> str:
    """A Markdown table of figures."""
    out = [
        "| model | threads | load s | prompt tok/s | decode tok/s | RSS MB (peak) |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        out.append(
            f"| {r.model} | {r.threads} | {r.load_s:.2f} | {r.prompt_tok_s:.1f} ({r.prompt_tokens} tok) "
            f"| {r.decode_tok_s:.1f} ({r.decode_tokens} tok) | {r.rss_mb:.0f} ({r.peak_rss_mb:.0f}) |"
        )
    return "\n".join(out)
