"""Sleuth as a tool for agents: an MCP server (the official ``mcp`` SDK, the ``mcp`` extra).

* :mod:`sleuth.mcp.tools`: what the tools do (scope, checks, runs on the server runtime);
* :mod:`sleuth.mcp.server`: the ``MCPServer`` with the tools ``ask``, ``search``, ``sources``
  and the resource ``trace://ID``;
* :mod:`sleuth.mcp.http`: ``/mcp`` inside ``sleuth serve`` (Streamable HTTP, bearer auth);
* ``sleuth mcp`` (:mod:`sleuth.cli.mcp`): the same server over stdio for the local user.
"""
