"""``contextd store copy``: move a project's index between DuckDB and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import click

from contextd.cli.common import CliState, emit, pass_state
from contextd.errors import UsageError


def postgres_url(state: CliState, url: str | None) -> str:
    """The PostgreSQL URL of a command: ``--url``, else the project's ``storage.url``."""
    found = url or state.project().config.storage.url
    if not found:
        raise UsageError('no PostgreSQL database: pass --url or set [storage] url '
                         '(e.g. url = "${DATABASE_URL}") in context.toml')
    return found


def _open_workspace(state: CliState, url: str):
    from contextd.store.postgres import open_postgres
    from contextd.store.postgres.workspace import project_identity, workspace_id

    project = state.project()
    identity = project_identity(project.root, project.config.storage.workspace)
    return open_postgres(url, workspace_id(identity), identity, str(project.root))


@click.group("store")
def store_group() -> None:
    """The index database itself."""


@store_group.command("copy")
@click.option("--to", "target", type=click.Choice(["postgres", "duckdb"]), required=True,
              help="postgres: copy the project's DuckDB file into its workspace of the "
                   "PostgreSQL database; duckdb: copy the workspace back into a DuckDB file.")
@click.option("--url", envvar="DATABASE_URL", help="PostgreSQL URL (default: storage.url).")
@click.option("--path", "db_path", type=click.Path(dir_okay=False),
              help="DuckDB file (default: storage.db_path).")
@pass_state
def copy_command(state: CliState, target: str, url: str | None, db_path: str | None) -> None:
    """Copy the index between DuckDB and PostgreSQL, vectors included (nothing is
    re-embedded); the target's index of this project is replaced. Then set
    [storage] backend accordingly."""
    from contextd.store.duckdb import DuckDBStore
    from contextd.store.transfer import copy_index

    project = state.project()
    file = Path(db_path) if db_path else project.db_path
    pg = _open_workspace(state, postgres_url(state, url))
    try:
        if target == "postgres":
            if not file.is_file():
                raise UsageError(f"no DuckDB index at {file}; run 'contextd refresh' first or "
                                 "pass --path")
            source, sink = DuckDBStore(file, read_only=True), pg
        else:
            source, sink = pg, DuckDBStore(file)
        try:
            counts = copy_index(source, sink)
        finally:
            (source if target == "postgres" else sink).close()
    finally:
        pg.close()
    where = f"workspace {pg.workspace} of {pg.path}" if target == "postgres" else str(file)
    emit(state, {"to": target, "where": where, "rows": counts},
         lambda r: click.echo(f"copied {counts['file_state']:,} files, {counts['chunks']:,} "
                              f"chunks and {counts['embeddings']:,} vectors to {where}"))
