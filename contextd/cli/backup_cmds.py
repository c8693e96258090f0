"""``contextd backup`` and ``contextd restore``."""

from __future__ import annotations

import os

import click

from contextd.cli.common import CliState, emit, open_engine, pass_state


def _from_here(path: str | None) -> str | None:
    """A path typed on the command line, made absolute from the working directory (the
    owner that takes the backup may run elsewhere); a bare name stays a name of the backup
    folder."""
    if path is None or os.sep not in path:
        return path
    return os.path.abspath(os.path.expanduser(path))


@click.command("backup")
@click.option("--to", "destination", metavar="NAME",
              help="Name the snapshot: a new file of the backup folder <db dir>/backups/ "
                   "(default: a dated file there; the newest storage.backup_keep dated ones "
                   "are kept).")
@pass_state
def backup_cmd(state: CliState, destination: str | None) -> None:
    """Take a consistent snapshot of the index; works while a server or watcher runs (the
    owner takes it without stopping writers)."""
    engine = open_engine(state)
    try:
        result = engine.backup(_from_here(destination))
    finally:
        engine.close()
    emit(state, result, lambda r: click.echo(
        f"backup: {r['path']} ({r['size_bytes'] / 2**20:.1f} MiB, {r['seconds']:.2f} s)"))


@click.command("restore")
@click.argument("path")
@pass_state
def restore_cmd(state: CliState, path: str) -> None:
    """Replace the index by a backup of the backup folder (its name, or its path there),
    once it opens and answers a query. Refused while any
    process (server, watcher, MCP session) owns the index; the replaced database is kept as
    *.before-restore."""
    from contextd.runtime.backup import restore

    result = restore(state.project(), _from_here(path))
    emit(state, result, lambda r: click.echo(
        f"restored {r['restored']} from {r['from']}: {r['files']} files, {r['chunks']} chunks"))
