"""Index contents on PostgreSQL: files, chunks, symbols, links and what changed when.

A file's replace runs under its advisory lock (:meth:`PostgresSession._lock_paths`), so two
processes re-indexing one file take turns and the last one wins whole; readers see the old
rows or the new ones (one transaction). Ordering is byte order (``COLLATE "C"``), as DuckDB's.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from contextd.store.base import KNOWLEDGE_PREFIX, Changes, ChunkRow, FileRecord, FileState
from contextd.store.postgres.session import PostgresSession
from contextd.store.postgres.vectors import as_array
from contextd.store.rows import TRANSFER_COLUMNS, record_columns, renumber_files

_CHUNK_ROW_SQL = """
    SELECT c.chunk_id, c.file_id, f.path, c.ordinal, c.kind, coalesce(c.label, ''),
           coalesce(c.language, ''), c.start_line, c.end_line, c.tokens_est, c.text,
           coalesce(c.index_text, c.text), c.embed_hash, coalesce(c.parent, '')
    FROM chunks c JOIN file_state f ON f.workspace_id = c.workspace_id AND f.file_id = c.file_id
    WHERE c.workspace_id = %s
"""
# Tables holding rows per file, deleted when a file is replaced or removed.
_FILE_TABLES = ("chunks", "symbols", "links", "file_state")


class ContentsMixin(PostgresSession):
    """IndexStore's file, chunk, symbol and link methods."""

    def write_files(self, records: Sequence[FileRecord]) -> int:
        if not records:
            return self.generation()
        ws = self.workspace
        with self._transaction() as tx:
            conn = tx.conn
            paths = [r.path for r in records]
            self._lock_paths(conn, paths)
            existing = dict(conn.execute(
                "SELECT path, file_id FROM file_state WHERE workspace_id = %s "
                "AND path = ANY(%s)", [ws, paths]).fetchall())
            self._delete_rows(conn, list(existing.values()))
            new_paths = [p for p in paths if p not in existing]
            if new_paths:
                ids = conn.execute("SELECT nextval('file_id_seq') FROM generate_series(1, %s)",
                                   [len(new_paths)]).fetchall()
                existing.update(zip(new_paths, (i[0] for i in ids)))
            for table, columns in record_columns(records, existing, 0).items():
                self._copy(conn, table, ws, columns)
            tx.touch(written=list(existing.values()))
        return self._result_generation(tx)

    def _delete_rows(self, conn: Any, file_ids: list[int]) -> None:
        if file_ids:
            for table in _FILE_TABLES:
                conn.execute(f"DELETE FROM {table} WHERE workspace_id = %s "
                             "AND file_id = ANY(%s)", [self.workspace, file_ids])

    def delete_files(self, paths: Iterable[str]) -> int:
        paths = list(paths)
        if not paths:
            return 0
        with self._transaction() as tx:
            self._lock_paths(tx.conn, paths)
            rows = tx.conn.execute("SELECT file_id, path FROM file_state WHERE workspace_id = %s "
                                   "AND path = ANY(%s)", [self.workspace, paths]).fetchall()
            if rows:
                self._delete_rows(tx.conn, [r[0] for r in rows])
                tx.touch(removed=rows)
        return len(rows)

    def update_file_stats(self, rows: Sequence[tuple[str, int, int]]) -> None:
        if not rows:
            return
        with self._transaction() as tx, tx.conn.cursor() as cur:
            cur.executemany("UPDATE file_state SET size_bytes = %s, mtime_ns = %s "
                            "WHERE workspace_id = %s AND path = %s",
                            [(size, mtime, self.workspace, path) for path, size, mtime in rows])

    def file_states(self, prefix: str | None = None) -> dict[str, FileState]:
        sql = ("SELECT file_id, path, size_bytes, mtime_ns, content_hash FROM file_state "
               "WHERE workspace_id = %s")
        params: list[Any] = [self.workspace]
        if prefix:
            sql += " AND starts_with(path, %s)"
            params.append(prefix)
        else:  # the project's files only: knowledge documents live under their own prefix
            sql += " AND NOT starts_with(path, %s)"
            params.append(KNOWLEDGE_PREFIX)
        return {r[1]: FileState(*r) for r in self._rows(sql, params)}

    def clear_index(self, path_prefixes: Sequence[str] | None = None) -> int:
        if path_prefixes:
            paths = [p for prefix in path_prefixes for p in self.file_states(prefix)]
        else:
            paths = list(self.file_states())
        return self.delete_files(paths)

    # ----- reading ---------------------------------------------------------------------
    def changes_since(self, generation: int) -> Changes:
        ws = self.workspace
        with self._server_errors(), self._pool.connection() as conn, conn.transaction():
            # One snapshot for the three reads (generations commit in order: see session.py).
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            row = conn.execute("SELECT generation FROM workspaces WHERE workspace_id = %s",
                               [ws]).fetchone()
            changed = [r[0] for r in conn.execute(
                "SELECT file_id FROM file_state WHERE workspace_id = %s AND generation > %s",
                [ws, generation]).fetchall()]
            removed = [r[0] for r in conn.execute(
                "SELECT DISTINCT file_id FROM removed_files WHERE workspace_id = %s "
                "AND generation > %s", [ws, generation]).fetchall()]
        return Changes(int(row[0]) if row else 0, tuple(changed), tuple(removed))

    def chunks_for_files(self, file_ids: Sequence[int] | None = None) -> list[ChunkRow]:
        sql, params = _CHUNK_ROW_SQL, [self.workspace]
        if file_ids is not None:
            sql += " AND c.file_id = ANY(%s)"
            params.append(list(file_ids))
        sql += ' ORDER BY f.path COLLATE "C", c.ordinal'
        return [ChunkRow(*r) for r in self._rows(sql, params)]

    def chunks_by_id(self, chunk_ids: Sequence[str]) -> dict[str, ChunkRow]:
        rows = self._rows(_CHUNK_ROW_SQL + " AND c.chunk_id = ANY(%s)",
                          [self.workspace, list(chunk_ids)])
        return {r[0]: ChunkRow(*r) for r in rows}

    def find_symbols(self, names_lower: Sequence[str], prefixes_lower: Sequence[str] = ()
                     ) -> list[tuple[str, str, str, int]]:
        clauses = ["name_lower = ANY(%s)", "short_lower = ANY(%s)"]
        params: list[Any] = [self.workspace, list(names_lower), list(names_lower)]
        for prefix in prefixes_lower:
            clauses.append("starts_with(short_lower, %s)")
            params.append(prefix)
        return self._rows(
            f"SELECT chunk_id, name, kind, line FROM symbols WHERE workspace_id = %s "
            f"AND ({' OR '.join(clauses)}) ORDER BY name COLLATE \"C\", chunk_id COLLATE \"C\"",
            params)

    def find_references(self, targets_lower: Sequence[str]) -> list[tuple[str, str]]:
        return self._rows(
            """SELECT src_chunk_id, target FROM (
                   SELECT DISTINCT src_chunk_id, target FROM links WHERE workspace_id = %s
                   AND (lower(target) = ANY(%s) OR lower(split_part(target, '.', -1)) = ANY(%s))
               ) found ORDER BY src_chunk_id COLLATE "C", target COLLATE "C" """,
            [self.workspace, list(targets_lower), list(targets_lower)])

    def symbols_for_files(self, file_ids: Sequence[int] | None = None
                          ) -> list[tuple[int, str, str, str, int]]:
        sql = "SELECT file_id, chunk_id, name, kind, line FROM symbols WHERE workspace_id = %s"
        params: list[Any] = [self.workspace]
        if file_ids is not None:
            sql += " AND file_id = ANY(%s)"
            params.append(list(file_ids))
        return self._rows(sql, params)

    def links_for_files(self, file_ids: Sequence[int] | None = None
                        ) -> list[tuple[int, str, str]]:
        sql = ("SELECT DISTINCT file_id, src_chunk_id, target FROM links "
               "WHERE workspace_id = %s")
        params: list[Any] = [self.workspace]
        if file_ids is not None:
            sql += " AND file_id = ANY(%s)"
            params.append(list(file_ids))
        return self._rows(sql, params)

    # ----- moving an index between backends ----------------------------------------------
    def export_rows(self, table: str) -> list[tuple]:
        columns = ", ".join(TRANSFER_COLUMNS[table])
        rows = self._rows(f"SELECT {columns} FROM {table} WHERE workspace_id = %s",
                          [self.workspace])
        if table == "embeddings":
            return [(m, h, as_array(v)) for m, h, v in rows]
        return rows

    def import_rows(self, tables: dict[str, list[tuple]]) -> int:
        files = tables.get("file_state", [])
        ws = self.workspace
        with self._transaction() as tx:
            conn = tx.conn
            old = conn.execute("SELECT file_id, path FROM file_state WHERE workspace_id = %s",
                               [ws]).fetchall()
            self._lock_paths(conn, [p for _, p in old] + [row[1] for row in files])
            for table in TRANSFER_COLUMNS:
                conn.execute(f"DELETE FROM {table} WHERE workspace_id = %s", [ws])
            ids = [i[0] for i in conn.execute(
                "SELECT nextval('file_id_seq') FROM generate_series(1, %s)",
                [len(files)]).fetchall()]
            columns = renumber_files(tables, {row[0]: i for row, i in zip(files, ids)})
            vectors = columns.pop("embeddings", None)
            for table, data in columns.items():
                self._copy(conn, table, ws, data)
            if vectors and vectors["vector"]:
                self._copy_vectors(conn, "embeddings", vectors["model"], vectors["text_hash"],
                                   vectors["vector"])
                for model, dimension in {(m, len(v)) for m, v in zip(vectors["model"],
                                                                     vectors["vector"])}:
                    self._index_after_commit(tx, model, dimension)
            self._ensure_default_context()  # type: ignore[attr-defined]  (knowledge.py)
            tx.touch(written=ids, removed=old)
        return len(files)
