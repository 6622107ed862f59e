"""Sleuth as a service: the HTTP API (``/v1/ask``, OpenAI-compatible ``/v1/chat/completions``)
and the web page, served by one FastAPI app from :func:`create_app`."""

from sleuth.server.app import create_app
from sleuth.server.settings import ServerConfigError, ServerSettings

__all__ = ["ServerConfigError", "ServerSettings", "create_app"]
