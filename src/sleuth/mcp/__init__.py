"""Sleuth as a tool for agents: an MCP server (the official ``mcp`` SDK, the ``mcp`` extra), over stdio
(``sleuth mcp``) or Streamable HTTP (``/mcp`` in ``sleuth serve``).
"""
