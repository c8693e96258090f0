"""Workspaces of a shared database, seen from above: list them, drop one."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Iterator

from contextd.errors import ContextdError, JobConflictError
from contextd.store.postgres import connection
from contextd.store.postgres.store import WORKSPACE_TABLES
from contextd.store.postgres.workspace import lock_key


@dataclass(frozen=True)
class WorkspaceInfo:
    """One project in the database, as ``contextd workspaces list`` shows it."""

    workspace_id: str
    identity: str
    root: str | None
    files: int
    chunks: int
    vectors: int
    generation: int
    last_opened_at: str


@contextlib.contextmanager
def _admin_connection(url: str) -> Iterator[Any]:
    import psycopg

    connection.check_server(url)
    connection.migrate(url)
    try:
        with psycopg.connect(url, autocommit=True,
                             connect_timeout=connection.CONNECT_TIMEOUT_S) as conn:
            yield conn
    except psycopg.Error as exc:
        raise ContextdError(f"PostgreSQL at {connection.redact(url)}: "
                            f"{connection.describe_failure(url, exc)}") from None


def list_workspaces(url: str) -> list[WorkspaceInfo]:
    """Every workspace of the database with its size, most recently opened first."""
    with _admin_connection(url) as conn:
        rows = conn.execute(
            """SELECT w.workspace_id, w.identity, w.root,
                      (SELECT count(*) FROM file_state f WHERE f.workspace_id = w.workspace_id),
                      (SELECT count(*) FROM chunks c WHERE c.workspace_id = w.workspace_id),
                      (SELECT count(*) FROM embeddings e WHERE e.workspace_id = w.workspace_id),
                      w.generation, w.last_opened_at
               FROM workspaces w ORDER BY w.last_opened_at DESC, w.workspace_id""").fetchall()
    return [WorkspaceInfo(*row[:7], row[7].isoformat()) for row in rows]


def drop_workspace(url: str, workspace: str) -> int:
    """Delete every row and the vector indexes of a workspace; returns the files it had.
    Refused while a rebuild of it runs anywhere (the rebuild's advisory lock is held)."""
    with _admin_connection(url) as conn:
        if conn.execute("SELECT 1 FROM workspaces WHERE workspace_id = %s",
                        [workspace]).fetchone() is None:
            raise ContextdError(f"no workspace {workspace!r} in {connection.redact(url)}; "
                                "see 'contextd workspaces list'")
        key = lock_key(workspace, "rebuild")
        if not conn.execute("SELECT pg_try_advisory_lock(%s)", [key]).fetchone()[0]:
            raise JobConflictError(f"a rebuild of workspace {workspace} is running; drop it "
                                   "once the rebuild has finished")
        try:
            with conn.transaction():
                files = conn.execute("SELECT count(*) FROM file_state WHERE workspace_id = %s",
                                     [workspace]).fetchone()[0]
                for table in WORKSPACE_TABLES:
                    conn.execute(f"DELETE FROM {table} WHERE workspace_id = %s", [workspace])
                conn.execute("DELETE FROM workspaces WHERE workspace_id = %s", [workspace])
                for (name,) in conn.execute(
                        "SELECT indexname FROM pg_indexes WHERE tablename = 'embeddings' "
                        "AND indexname LIKE %s", [f"emb_hnsw_{workspace}_%"]).fetchall():
                    conn.execute(f'DROP INDEX IF EXISTS "{name}"')
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", [key])
    return files
