"""``contextd ui``: the web Index Manager, and the registry of running ones."""

from __future__ import annotations

import os
import sys

import click

from contextd.cli.common import CliState, emit, emit_rows, pass_state


@click.group("ui", invoke_without_command=True)
@click.option("--port", type=click.IntRange(0, 65535), envvar="CONTEXTD_UI_PORT",
              help="Port on 127.0.0.1 (default: [ui] port; 0 = any free port).")
@click.option("--open", "open_browser", is_flag=True, default=None,
              help="Also open the page in the browser, where there is one.")
@click.pass_context
def ui_group(ctx: click.Context, port: int | None, open_browser: bool | None) -> None:
    """Serve the web Index Manager of this project until interrupted.

    The first line of stdout is the page's full URL (with its access token). Pages:
    overview, live progress, jobs (refresh, rebuild, cancel), errors, search, savings.
    Bound to 127.0.0.1 only; other sites' requests are refused.

    \b
    Examples:
      contextd ui                 # prints http://127.0.0.1:PORT/?token=...
      contextd ui --port 8766 --open
      contextd ui list            # managers running for any project
      contextd ui stop WORKSPACE_ID
    """
    if ctx.invoked_subcommand is not None:
        return
    from contextd.web.server import run_manager

    state = ctx.find_object(CliState)
    run_manager(state.project(), state.config_path, port, open_browser)
    # As `contextd serve` does: the engine is closed; native libraries (DuckDB, ONNX
    # Runtime) may abort if the interpreter finalises while a daemon thread is inside them.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


@ui_group.command("list")
@pass_state
def list_cmd(state: CliState) -> None:
    """List the Index Managers running for any project."""
    from contextd.web.registry import list_managers

    emit_rows(state, list_managers(), "no Index Manager is running",
              lambda e: f"{e.workspace_id}  pid {e.pid}  {e.url}  {e.root}")


@ui_group.command("stop")
@click.argument("workspace_id")
@pass_state
def stop_cmd(state: CliState, workspace_id: str) -> None:
    """Stop the Index Manager of a workspace (see `contextd ui list`)."""
    from contextd.web.registry import stop

    entry = stop(workspace_id)
    emit(state, entry, lambda e: click.echo(f"stopped the Index Manager of {e.root} "
                                            f"(pid {e.pid})"))
