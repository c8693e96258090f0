"""The MCP server of contextd (``contextd serve``): the context tools of docs/MCP_TOOLS.md over
stdio, or streamable HTTP on 127.0.0.1.

* :mod:`contextd.mcp.app` — the tools and their descriptions;
* :mod:`contextd.mcp.schemas` — typed inputs and outputs (the tools' JSON Schemas);
* :mod:`contextd.mcp.render` — Engine records to answers and texts;
* :mod:`contextd.mcp.lifecycle` — start-up in the background, shutdown on stdin close or
  a signal.

Every server process shares the project's index through :mod:`contextd.runtime.owner`: one of them
(or a CLI, or a watcher) owns the database, the others are its clients.
"""

from contextd.mcp.lifecycle import serve

__all__ = ["serve"]
