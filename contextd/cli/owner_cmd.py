"""``contextd owner`` (hidden): the background owner a CLI command hands its index to."""

from __future__ import annotations

import click

from contextd.cli.common import CliState, pass_state


@click.command("owner", hidden=True)
@click.option("--lock-fd", type=click.IntRange(min=0), default=None,
              help="The owner lock's descriptor, handed on by the command that started this.")
@pass_state
def owner_command(state: CliState, lock_fd: int | None) -> None:
    """Own this project's index in the background: finish embedding, watch the files, serve
    other contextd processes warm, exit when idle ([owner] idle_exit_seconds). Started by
    commands (see contextd.runtime.background); there is no need to run it by hand."""
    from contextd.runtime.background import run_background_owner

    run_background_owner(state.project(), lock_fd=lock_fd)


@click.command("stop")
@pass_state
def stop_command(state: CliState) -> None:
    """Stop the process that owns this project's index on this machine: the background owner
    a command started, a 'contextd watch' or an MCP server ('contextd restore' needs the
    index free). The next command starts whatever it needs again.

    \b
    Example:
      contextd stop
    """
    from contextd.cli.common import emit
    from contextd.runtime.background import stop_owner

    def human(result: dict) -> None:
        if result["pid"] is None:
            click.echo("no contextd process owns this index")
            return
        how = "killed (it did not stop on SIGTERM)" if result["forced"] else "stopped"
        click.echo(f"{how} pid {result['pid']} after {result['seconds']} s"
                   + (f": {result['command']}" if result["command"] else ""))

    emit(state, stop_owner(state.project()), human)
