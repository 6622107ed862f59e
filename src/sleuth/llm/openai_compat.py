"""Former home of the OpenAI-compatible client (now :mod:`sleuth.llm.client`), kept so that existing imports work."""

from __future__ import annotations

from sleuth.llm.client import ClientStats, OpenAICompatLLM
from sleuth.llm.http_policy import RETRY_STATUS, parse_retry_after
from sleuth.llm.stops import StopCutter
from sleuth.llm.urls import api_base
from sleuth.llm.wire import MAX_SERVER_STOPS, usage_from

__all__ = [
    "MAX_SERVER_STOPS",
    "RETRY_STATUS",
    "ClientStats",
    "OpenAICompatLLM",
    "StopCutter",
    "api_base",
    "parse_retry_after",
    "usage_from",
]
