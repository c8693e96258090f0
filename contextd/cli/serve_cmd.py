"""``contextd serve``: the MCP server."""

from __future__ import annotations

import os
import sys

import click

from contextd.cli.common import CliState, pass_state


@click.command("serve")
@click.option("--http", "http_port", type=click.IntRange(1, 65535), envvar="CONTEXTD_HTTP_PORT",
              help="Serve streamable HTTP on 127.0.0.1:PORT (path /mcp) instead of stdio.")
@click.option("--tools", "tool_groups", metavar="GROUPS",
              help="Tool groups to offer beside the core, comma-separated: admin, memory, "
                   "knowledge, reports, contextual, related, or all (default: [mcp] tools of "
                   "context.toml, else none).")
@pass_state
def serve(state: CliState, http_port: int | None, tool_groups: str | None) -> None:
    """Run the MCP server of this project (stdio unless --http).

    \b
    Core tools, always offered: query_context, refresh_context, get_context_stats.
    Opt-in groups (--tools or [mcp] tools; docs/MCP_TOOLS.md lists every tool's group):
      admin       rebuild jobs, reload_config, the web Index Manager
      memory      agent memory: stash_context and retrieval of it by meaning
      knowledge   knowledge contexts: documents searched beside the code
      reports     research sessions and cited Markdown reports
      contextual  contextual retrieval and token-usage reports
      related     find_related: the code most like a function (contextd related)
    [mcp] compatibility = "seed002" offers every group and the seed-002 names.

    \b
    Any number of servers (one per agent session) share one index: the first owns the
    database, the others talk to it, and a survivor takes over when the owner exits.
    Stdout carries only MCP messages; logs go to stderr.

    \b
    Examples:
      contextd serve --root /path/to/project
      contextd serve --tools memory,reports
      contextd serve --http 8765     # http://127.0.0.1:8765/mcp
    """
    from pathlib import Path

    from contextd.config.project import check_root
    from contextd.mcp.lifecycle import serve as run
    from contextd.mcp.offer import chosen_groups

    tools = None if tool_groups is None else tool_groups.split(",")
    if tools is not None:  # a mistyped group fails here, in one line, before anything starts
        chosen_groups(tools)
    if state.root:  # a mistyped root fails here, not in every later tool call
        check_root(Path(state.root).resolve(), state.root)
    run(state.root, state.config_path, http_port, verbose=state.verbose, tools=tools)
    # run() has closed what matters (the database, the owner lock and socket). Native
    # libraries (DuckDB, ONNX Runtime) abort when the interpreter finalises while a
    # background thread is still inside them (a model warm-up, a catch-up batch), so the
    # process ends here instead of going through finalisation.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
