"""``contextd backup`` and ``contextd restore``."""

from __future__ import annotations

import click

from contextd.cli.common import CliState, emit, open_engine, pass_state


@click.command("backup")
@click.option("--to", "destination", type=click.Path(dir_okay=False),
              help="Write the snapshot to this new file (default: <db dir>/backups/, keeping "
                   "the newest storage.backup_keep).")
@pass_state
def backup_cmd(state: CliState, destination: str | None) -> None:
    """Take a consistent snapshot of the index; works while a server or watcher runs (the
    owner takes it without stopping writers)."""
    engine = open_engine(state)
    try:
        result = engine.backup(destination)
    finally:
        engine.close()
    emit(state, result, lambda r: click.echo(
        f"backup: {r['path']} ({r['size_bytes'] / 2**20:.1f} MiB, {r['seconds']:.2f} s)"))


@click.command("restore")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@pass_state
def restore_cmd(state: CliState, path: str) -> None:
    """Replace the index by a backup, once it opens and answers a query. Refused while any
    process (server, watcher, MCP session) owns the index; the replaced database is kept as
    *.before-restore."""
    from contextd.runtime.backup import restore

    result = restore(state.project(), path)
    emit(state, result, lambda r: click.echo(
        f"restored {r['restored']} from {r['from']}: {r['files']} files, {r['chunks']} chunks"))
