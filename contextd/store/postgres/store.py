"""The PostgreSQL store: :class:`~contextd.store.base.IndexStore` for a workspace of a shared
database, composed of one mixin per area (see :mod:`contextd.store.postgres`)."""

from __future__ import annotations

import logging
from typing import Callable

from contextd.errors import StoreError
from contextd.store.base import IndexStore
from contextd.store.postgres import connection
from contextd.store.postgres.contents import ContentsMixin
from contextd.store.postgres.knowledge import KnowledgeMixin
from contextd.store.postgres.operations import OperationsMixin
from contextd.store.postgres.reports import ReportsMixin
from contextd.store.postgres.sessions import SearchSessionsMixin
from contextd.store.postgres.skips import SkipsMixin
from contextd.store.postgres.stash import StashMixin
from contextd.store.postgres.usage import UsageMixin
from contextd.store.postgres.vectors import VectorsMixin, configure_connection
from contextd.store.postgres.workspace import lock_key

log = logging.getLogger(__name__)

# Every table with rows per workspace: what `contextd workspaces drop` deletes and
# `vacuum` tidies. A new area's tables are added here.
WORKSPACE_TABLES = ("chunks", "symbols", "links", "file_state", "removed_files", "embeddings",
                    "usage_metrics", "bootstrap_progress", "bootstrap_errors", "jobs",
                    "project_config", "prefix_cache", "index_meta", "skipped_files",
                    "kb_contexts", "kb_documents", "kb_memberships", "stash_segments",
                    "search_sessions", "task_usage")


class PostgresStore(ContentsMixin, VectorsMixin, KnowledgeMixin, StashMixin, ReportsMixin,
                    SearchSessionsMixin, SkipsMixin, UsageMixin, OperationsMixin, IndexStore):
    """One workspace of a PostgreSQL database with pgvector. Thread-safe; several processes
    on several machines may open the same workspace and write it at once.

    ``identity`` is what ``workspace`` was derived from (a git remote, a path), kept in the
    workspaces table so ``contextd workspaces list`` can say which project an id is.
    """

    def __init__(self, url: str, workspace: str, identity: str = "", root: str = ""):
        self.url = url
        self.workspace = workspace
        self.path = connection.redact(url)
        connection.check_server(url)
        self.schema = connection.migrate(url)
        self._init_session()
        self._init_vectors()
        self._pool = connection.open_pool(url, configure=configure_connection)
        with self._transaction() as tx:
            tx.conn.execute(
                """INSERT INTO workspaces (workspace_id, identity, root) VALUES (%s, %s, %s)
                   ON CONFLICT (workspace_id) DO UPDATE SET root = EXCLUDED.root,
                   last_opened_at = now()""", [workspace, identity or workspace, root or None])
            self._ensure_default_context()

    def schema_version(self) -> int:
        """The contextd schema version of the database."""
        return self.schema

    # ----- claims across processes -----------------------------------------------------
    def try_exclusive(self, purpose: str, wait: bool = False) -> Callable[[], None] | None:
        """A session advisory lock on a connection kept out of the pool until released: the
        server drops it when this process dies, however it dies."""
        conn = self._pool.getconn()
        try:
            if wait:
                conn.execute("SELECT pg_advisory_lock(%s)", [lock_key(self.workspace, purpose)])
                got = True
            else:
                got = conn.execute("SELECT pg_try_advisory_lock(%s)",
                                   [lock_key(self.workspace, purpose)]).fetchone()[0]
        except BaseException:
            self._pool.putconn(conn)
            raise
        if not got:
            self._pool.putconn(conn)
            return None

        def release() -> None:
            try:
                conn.execute("SELECT pg_advisory_unlock(%s)", [lock_key(self.workspace, purpose)])
            finally:
                self._pool.putconn(conn)
        return release

    # ----- upkeep ----------------------------------------------------------------------
    def snapshot(self, destination: str) -> None:
        """Backups of a shared database are the database's own (pg_dump, base backups,
        point-in-time recovery), taken by whoever runs the server, not by each project."""
        raise StoreError("contextd backup copies an embedded DuckDB index; back a PostgreSQL "
                         "index up with the server's own tools (pg_dump, pg_basebackup), or "
                         "copy it out with `contextd store copy --to duckdb`")

    def vacuum(self) -> None:
        """ANALYZE the tables after a rebuild, so the planner knows the new sizes. No VACUUM:
        the tables are shared by every workspace (vacuuming a million rows for one project's
        rebuild), and autovacuum reclaims dead rows for reuse anyway."""
        with self._pool.connection() as conn:
            for table in WORKSPACE_TABLES:
                conn.execute(f"ANALYZE {table}")

    def close(self) -> None:
        self._pool.close()

    def __repr__(self) -> str:
        return f"PostgresStore({self.path!r}, workspace={self.workspace!r})"


def open_postgres(url: str, workspace: str, identity: str = "", root: str = ""
                  ) -> PostgresStore:
    """Open a workspace; driver errors that escape the checks become one redacted line."""
    try:
        import psycopg
    except ImportError:
        connection.check_server(url)  # raises the "install the extra" message
        raise
    try:
        return PostgresStore(url, workspace, identity, root)
    except psycopg.Error as exc:
        raise StoreError(f"PostgreSQL at {connection.redact(url)}: "
                         f"{connection.describe_failure(url, exc)}") from None
