"""Connections and transactions of the PostgreSQL store, and its generation counter.

Every area of the store (contents, vectors, knowledge, stash, sessions, skips, usage,
operations) is a mixin over :class:`PostgresSession`: it reads through
:meth:`~PostgresSession._rows` / :meth:`~PostgresSession._row` and writes inside
:meth:`~PostgresSession._transaction`, always filtering by ``self.workspace``. That is the
whole pattern a new area follows.

**Generations across processes.** In-memory indexes catch up with ``changes_since``, which is
only correct if a reader that sees generation N also sees every write numbered ≤ N. Several
processes write one workspace, so the number is taken from the workspace row as the *last*
statement of each write transaction: the row lock it takes is held until commit, so the
next writer gets N+1 only after N is committed, and generations commit in order. Writes that
change index contents mark their transaction (:meth:`_Transaction.touch`); the bump, and the
stamping of written files and tombstones with the number, happen at commit.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

from contextd.errors import StoreError
from contextd.store.postgres.connection import describe_failure, redact
from contextd.store.postgres.workspace import lock_key


@dataclass
class _Transaction:
    """The write transaction of one thread (``batch()`` and the writes inside it)."""

    conn: Any
    bump: bool = False
    written_file_ids: set[int] = field(default_factory=set)
    removed: list[tuple[int, str]] = field(default_factory=list)
    after_commit: list[Callable[[], None]] = field(default_factory=list)
    generation: int | None = None

    def touch(self, written: Sequence[int] = (), removed: Sequence[tuple[int, str]] = ()
              ) -> None:
        """This transaction changes index contents: bump the generation at commit, and stamp
        it on the ``written`` files and on tombstones of the ``removed`` (file_id, path)."""
        self.bump = True
        self.written_file_ids.update(written)
        self.removed.extend(removed)


class PostgresSession:
    """Pool, per-thread transactions and the workspace generation (see the module doc)."""

    url: str
    workspace: str
    _pool: Any

    def _init_session(self) -> None:
        self._local = threading.local()

    # ----- reading ---------------------------------------------------------------------
    @contextlib.contextmanager
    def _connection(self) -> Iterator[Any]:
        """This thread's transaction connection inside a write, else one from the pool (so a
        read inside ``batch()`` sees the batch's own writes)."""
        tx = getattr(self._local, "tx", None)
        if tx is not None:
            yield tx.conn
            return
        with self._server_errors(), self._pool.connection() as conn:
            yield conn

    @contextlib.contextmanager
    def _server_errors(self) -> Iterator[None]:
        """A server that goes away (or a pool that cannot reach it) mid-command is one
        redacted StoreError line, like one that was never there."""
        import psycopg

        try:
            yield
        except psycopg.OperationalError as exc:
            raise StoreError(f"PostgreSQL at {redact(self.url)}: "
                             f"{describe_failure(self.url, exc)}") from exc

    def _rows(self, sql: Any, params: Sequence[Any] = ()) -> list[tuple]:
        with self._connection() as conn:
            return conn.execute(sql, params).fetchall()

    def _row(self, sql: Any, params: Sequence[Any] = ()) -> tuple | None:
        with self._connection() as conn:
            return conn.execute(sql, params).fetchone()

    # ----- writing ---------------------------------------------------------------------
    def batch(self) -> contextlib.AbstractContextManager:
        return self._transaction()

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[_Transaction]:
        """ONE transaction for the writes made inside by this thread; nested calls join it.
        Hooks registered in ``after_commit`` run once it has committed."""
        tx = getattr(self._local, "tx", None)
        if tx is not None:
            yield tx
            return
        with self._server_errors(), self._pool.connection() as conn:
            tx = _Transaction(conn)
            self._local.tx = tx
            try:
                with conn.transaction():
                    yield tx
                    self._commit_generation(tx)
            finally:
                self._local.tx = None
        for hook in tx.after_commit:
            hook()

    def _commit_generation(self, tx: _Transaction) -> None:
        if not tx.bump:
            return
        conn, ws = tx.conn, self.workspace
        row = conn.execute(
            "UPDATE workspaces SET generation = generation + 1 WHERE workspace_id = %s "
            "RETURNING generation", [ws]).fetchone()
        if row is None:
            raise StoreError(f"workspace {ws} was dropped while this process used it; "
                             "run the command again to start it afresh")
        tx.generation = row[0]
        if tx.written_file_ids:
            conn.execute("UPDATE file_state SET generation = %s WHERE workspace_id = %s "
                         "AND file_id = ANY(%s)", [tx.generation, ws, sorted(tx.written_file_ids)])
        if tx.removed:
            with conn.cursor() as cur:
                cur.executemany("INSERT INTO removed_files (workspace_id, file_id, path, "
                                "generation) VALUES (%s, %s, %s, %s)",
                                [(ws, fid, path, tx.generation) for fid, path in tx.removed])

    def _result_generation(self, tx: _Transaction) -> int:
        """The generation a write produced: known once committed; inside ``batch()`` the
        number it will most likely get (the batch has not committed yet)."""
        if tx.generation is not None:
            return tx.generation
        return self.generation() + 1

    def _lock_paths(self, conn: Any, paths: Sequence[str]) -> None:
        """Hold each file's advisory lock until commit, so processes replacing the same file
        take turns. Keys are taken in sorted order, one statement, so two writers of
        overlapping sets cannot deadlock."""
        keys = sorted({lock_key(self.workspace, f"file:{p}") for p in paths})
        if keys:
            conn.execute("SELECT count(pg_advisory_xact_lock(k)) FROM unnest(%s::bigint[]) AS k",
                         [keys])

    @staticmethod
    def _copy(conn: Any, table: str, workspace: str, columns: dict[str, list]) -> None:
        """Bulk-insert column lists with COPY (one round trip for any number of rows)."""
        if not next(iter(columns.values())):
            return
        names = ", ".join(("workspace_id", *columns))
        with conn.cursor() as cur, cur.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
            for row in zip(*columns.values()):
                copy.write_row((workspace, *row))

    # ----- the generation --------------------------------------------------------------
    def generation(self) -> int:
        # One indexed primary-key read (~0.1 ms on a local socket): other machines write this
        # workspace too, so no process may keep the number in memory.
        row = self._row("SELECT generation FROM workspaces WHERE workspace_id = %s",
                        [self.workspace])
        return int(row[0]) if row else 0
