"""``contextd workspaces list|drop``: the projects of a shared PostgreSQL database."""

from __future__ import annotations

import sys

import click

from contextd.cli.common import CliState, emit, pass_state
from contextd.cli.store_cmd import postgres_url
from contextd.errors import ContextdError


@click.group("workspaces")
def workspaces_group() -> None:
    """Projects (workspaces) of the shared PostgreSQL database."""


@workspaces_group.command("list")
@click.option("--url", envvar="DATABASE_URL", help="PostgreSQL URL (default: storage.url).")
@pass_state
def list_command(state: CliState, url: str | None) -> None:
    """Every workspace with its files, chunks and vectors, most recently opened first."""
    from contextd.store.postgres.admin import list_workspaces

    found = list_workspaces(postgres_url(state, url))

    def human(rows) -> None:
        for w in rows:
            click.echo(f"{w.workspace_id}  {w.files:>7,} files {w.chunks:>9,} chunks "
                       f"{w.vectors:>9,} vectors  {w.identity}")
        click.echo(f"{len(rows)} workspaces")
    emit(state, found, human)


@workspaces_group.command("drop")
@click.argument("workspace_id")
@click.option("--url", envvar="DATABASE_URL", help="PostgreSQL URL (default: storage.url).")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@pass_state
def drop_command(state: CliState, workspace_id: str, url: str | None, yes: bool) -> None:
    """Delete a workspace's index (every row and its vector indexes); refused while one of
    its rebuilds runs. Asks first on a terminal; without one, only with --yes."""
    from contextd.store.postgres.admin import drop_workspace

    if not yes:
        _confirm_drop(workspace_id)
    files = drop_workspace(postgres_url(state, url), workspace_id)
    emit(state, {"dropped": workspace_id, "files": files},
         lambda r: click.echo(f"dropped workspace {workspace_id} ({files:,} files)"))


def _confirm_drop(workspace_id: str) -> None:
    """A drop cannot be undone (the index is rebuilt from the files, a stash is lost): ask
    on a terminal, refuse without one (a script says --yes)."""
    if not sys.stdin.isatty():
        raise ContextdError(f"workspaces drop deletes the index of workspace {workspace_id}; "
                            "pass --yes to run it without a terminal to confirm on")
    click.confirm(f"Delete the index of workspace {workspace_id}? This cannot be undone.",
                  abort=True, err=True)
