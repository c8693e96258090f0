"""``contextd owner`` (hidden): the background owner a CLI command hands its index to."""

from __future__ import annotations

import click

from contextd.cli.common import CliState, pass_state


@click.command("owner", hidden=True)
@pass_state
def owner_command(state: CliState) -> None:
    """Own this project's index in the background: finish embedding, watch the files, serve
    other contextd processes warm, exit when idle ([owner] idle_exit_seconds). Started by
    commands (see contextd.runtime.background); there is no need to run it by hand."""
    from contextd.runtime.background import run_background_owner

    run_background_owner(state.project())
