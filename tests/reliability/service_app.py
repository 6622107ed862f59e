"""An app factory for ``uvicorn --factory --workers N`` in the process tests (settings from the environment)."""

from __future__ import annotations

import os

from fastapi import FastAPI

from sleuth.server import ServerSettings, create_app


def make_app() -> FastAPI:
    return create_app(
        ServerSettings(
            base_url=os.environ["RELIABILITY_LLM_URL"],
            model="fake-model",
            sources=(("en", os.environ["RELIABILITY_CORPUS"]),),
            max_concurrency=int(os.environ.get("RELIABILITY_MAX_CONCURRENCY", "8")),
            timeout_s=60,
        )
    )
