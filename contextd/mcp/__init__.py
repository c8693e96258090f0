"""The MCP server of contextd (``contextd serve``): the context tools of docs/MCP_TOOLS.md over
stdio, or streamable HTTP on 127.0.0.1.

* :mod:`contextd.mcp.app` — the tools and their descriptions;
* :mod:`contextd.mcp.schemas` — typed inputs and outputs (the tools' JSON Schemas);
* :mod:`contextd.mcp.render` — Engine records to answers and texts;
* :mod:`contextd.mcp.lifecycle` — start-up in the background, shutdown on stdin close or
  a signal (its ``serve`` runs the server);
* :mod:`contextd.mcp.offer` — the tool groups offered and the handshake's instructions;
* :mod:`contextd.mcp.prelude` — the answer to ``initialize`` before the SDK has loaded, and
  :mod:`contextd.mcp.takeover` — the SDK going on with that session.

Every server process shares the project's index through :mod:`contextd.runtime.owner`: one of them
(or a CLI, or a watcher) owns the database, the others are its clients.

Importing the package imports nothing else: the prelude must start without the SDK.
"""
