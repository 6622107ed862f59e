"""The command-line options several commands share: one definition and help text each
(``name: flags.EmbedModel = None`` in a command's signature)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from sleuth.strategies.options import bounds

#: the bounds of the options that are flags too are the strategies' own
K_MIN, K_MAX = (int(x) for x in bounds("k"))
STEPS_MIN, STEPS_MAX = (int(x) for x in bounds("max_steps"))
TOKENS_MIN, TOKENS_MAX = (int(x) for x in bounds("max_tokens"))

EMBED_MODEL_HELP = "Embedding model on an OpenAI-compatible /v1/embeddings server (default $SLEUTH_EMBED_MODEL)."
EMBED_URL_HELP = (
    "Embedding server URL, or several comma-separated (a pool); key from $SLEUTH_EMBED_API_KEY "
    "(default $SLEUTH_EMBED_BASE_URL; an index embedded through a server remembers its URL)."
)
RERANK_HELP = (
    "Rerank stage after fusion: none, llm (the LLM orders the candidates) or a rerank server URL "
    "(/v1/rerank or /rerank, Jina/Cohere/TEI; key from $SLEUTH_RERANK_API_KEY). Default: $SLEUTH_RERANK_BASE_URL, else none."
)
OPT_HELP = (
    "A strategy option key=value, repeatable, e.g. --opt k_stepback=3 (k-stepback also works). Values: "
    "true/false, numbers, JSON, else text. An unknown option is refused with the strategy's valid ones "
    "(docs/strategies.md lists them)."
)
STRATEGY_HELP = "direct, cot, rag, self-ask, rat, step-back, search-o1"

EmbedModel = Annotated[str | None, typer.Option("--embed-model", help=EMBED_MODEL_HELP)]
EmbedURL = Annotated[str | None, typer.Option("--embed-base-url", help=EMBED_URL_HELP)]
Rerank = Annotated[str | None, typer.Option("--rerank", help=RERANK_HELP)]
RerankURL = Annotated[str | None, typer.Option("--rerank-base-url", help="A rerank server URL (= --rerank URL).")]
RerankModel = Annotated[str | None, typer.Option("--rerank-model", help="Model name sent to the rerank server.")]
RerankDepth = Annotated[int, typer.Option("--rerank-depth", min=1, max=200, help="Candidates the reranker sees.")]
Model = Annotated[str | None, typer.Option("--model", "-m", help="Model (default: the configured / embedded default).")]
BaseURL = Annotated[str | None, typer.Option("--base-url", help="An OpenAI-compatible LLM server URL.")]
Lang = Annotated[str, typer.Option("--lang", help="Prompt language: auto (by the question), en or zh.")]
K = Annotated[int, typer.Option("--k", min=K_MIN, max=K_MAX, help="Passages per search.")]
MaxSteps = Annotated[
    int, typer.Option("--max-steps", min=STEPS_MIN, max=STEPS_MAX, help="Step limit (follow-ups, revisions, searches).")
]
MaxTokens = Annotated[
    int | None,
    typer.Option(
        "--max-tokens",
        min=TOKENS_MIN,
        max=TOKENS_MAX,
        help="Tokens per LLM call (default: 256; 400 for rat, 320 for step-back).",
    ),
]
Opts = Annotated[list[str], typer.Option("--opt", help=OPT_HELP)]
Mode = Annotated[
    str,
    typer.Option(
        "--mode",
        help="default: the paper's method and the repairs that earned their place; paper: exactly as published.",
    ),
]
IndexDir = Annotated[Path | None, typer.Option("--index", help="An index folder (sleuth index build).")]
CorpusPath = Annotated[Path | None, typer.Option("--corpus", help="A corpus file or folder (indexed once, cached).")]
