"""``contextd serve``: the MCP server."""

from __future__ import annotations

import os
import sys

import click

from contextd.cli.common import CliState, pass_state


@click.command("serve")
@click.option("--http", "http_port", type=click.IntRange(1, 65535), envvar="CONTEXTD_HTTP_PORT",
              help="Serve streamable HTTP on 127.0.0.1:PORT (path /mcp) instead of stdio.")
@pass_state
def serve(state: CliState, http_port: int | None) -> None:
    """Run the MCP server of this project (stdio unless --http).

    \b
    Tools: query_context, refresh_context, get_context_stats, rebuild_context,
    get_rebuild_status, cancel_rebuild. Any number of servers (one per agent session) share
    one index: the first owns the database, the others talk to it, and a survivor takes
    over when the owner exits. Stdout carries only MCP messages; logs go to stderr.

    \b
    Examples:
      contextd serve --root /path/to/project
      contextd serve --http 8765     # http://127.0.0.1:8765/mcp
    """
    from pathlib import Path

    from contextd.config.project import check_root
    from contextd.mcp import serve as run

    if state.root:  # a mistyped root fails here, not in every later tool call
        check_root(Path(state.root).resolve(), state.root)
    run(state.root, state.config_path, http_port, verbose=state.verbose)
    # run() has closed what matters (the database, the owner lock and socket). Native
    # libraries (DuckDB, ONNX Runtime) abort when the interpreter finalises while a
    # background thread is still inside them (a model warm-up, a catch-up batch), so the
    # process ends here instead of going through finalisation.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
