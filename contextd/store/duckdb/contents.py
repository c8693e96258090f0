"""Index contents: files, chunks, symbols and links written per batch, and read back by the providers."""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import duckdb

from contextd.store.base import KNOWLEDGE_PREFIX, Changes, ChunkRow, FileRecord, FileState
from contextd.store.rows import record_columns
from contextd.store.duckdb.sql import CHUNK_ROW_SQL, insert_columns


class ContentsMixin:
    """Index contents of :class:`contextd.store.duckdb.store.DuckDBStore`."""

    def write_files(self, records: Sequence[FileRecord]) -> int:
        if not records:
            return self.generation()
        with self._transaction() as cur:
            gen = self._bump_generation(cur)
            paths = [r.path for r in records]
            existing = dict(cur.execute(
                "SELECT path, file_id FROM file_state WHERE path IN (SELECT unnest(?))",
                [paths]).fetchall())
            self._delete_rows(cur, list(existing.values()))
            new_paths = [p for p in paths if p not in existing]
            if new_paths:
                ids = cur.execute("SELECT nextval('file_id_seq') FROM range(?)",
                                  [len(new_paths)]).fetchall()
                existing.update(zip(new_paths, (i[0] for i in ids)))
            self._insert_records(cur, records, existing, gen)
        return gen

    def _delete_rows(self, cur: duckdb.DuckDBPyConnection, file_ids: list[int]) -> None:
        if not file_ids:
            return
        for table in ("chunks", "symbols", "links", "file_state"):
            cur.execute(f"DELETE FROM {table} WHERE file_id IN (SELECT unnest(?))", [file_ids])

    def _insert_records(self, cur: duckdb.DuckDBPyConnection, records: Sequence[FileRecord],
                        ids: dict[str, int], gen: int) -> None:
        for table, columns in record_columns(records, ids, gen).items():
            self._insert(cur, table, columns)

    @staticmethod
    def _insert(cur: duckdb.DuckDBPyConnection, table: str, columns: dict[str, Any]) -> None:
        if len(next(iter(columns.values()))) == 0:
            return
        insert_columns(cur, table, columns)

    def delete_files(self, paths: Iterable[str]) -> int:
        paths = list(paths)
        if not paths:
            return 0
        with self._transaction() as cur:
            rows = cur.execute("SELECT file_id, path FROM file_state WHERE path IN "
                               "(SELECT unnest(?))", [paths]).fetchall()
            if rows:
                gen = self._bump_generation(cur)
                self._delete_rows(cur, [r[0] for r in rows])
                insert_columns(cur, "removed_files", {
                    "file_id": [fid for fid, _ in rows], "path": [path for _, path in rows],
                    "generation": [gen] * len(rows)})
        return len(rows)

    def update_file_stats(self, rows: Sequence[tuple[str, int, int]]) -> None:
        if not rows:
            return
        # One statement over the rows unnested: DuckDB runs an executemany row by row, and
        # after a git checkout the hundreds of files whose bytes did not change cost seconds.
        paths, sizes, mtimes = (list(column) for column in zip(*rows))
        with self._transaction() as cur:
            cur.execute("UPDATE file_state SET size_bytes = n.size_bytes, mtime_ns = n.mtime_ns "
                        "FROM (SELECT unnest(?) AS path, unnest(?) AS size_bytes, "
                        "unnest(?) AS mtime_ns) AS n WHERE file_state.path = n.path",
                        [paths, sizes, mtimes])

    def file_states(self, prefix: str | None = None) -> dict[str, FileState]:
        sql = "SELECT file_id, path, size_bytes, mtime_ns, content_hash FROM file_state"
        params: list[Any] = []
        if prefix:
            sql += " WHERE starts_with(path, ?)"
            params.append(prefix)
        else:
            sql += " WHERE NOT starts_with(path, ?)"
            params.append(KNOWLEDGE_PREFIX)
        return {r[1]: FileState(*r) for r in self._cursor().execute(sql, params).fetchall()}

    def clear_index(self, path_prefixes: Sequence[str] | None = None) -> int:
        if path_prefixes:
            paths = [p for prefix in path_prefixes for p in self.file_states(prefix)]
        else:
            paths = list(self.file_states())
        return self.delete_files(paths)

    def changes_since(self, generation: int) -> Changes:
        cur = self._cursor()
        cur.execute("BEGIN TRANSACTION")
        try:
            current = self._stored_generation()
            changed = [r[0] for r in cur.execute(
                "SELECT file_id FROM file_state WHERE generation > ?", [generation]).fetchall()]
            removed = [r[0] for r in cur.execute(
                "SELECT DISTINCT file_id FROM removed_files WHERE generation > ?",
                [generation]).fetchall()]
        finally:
            cur.execute("COMMIT")
        return Changes(current, tuple(changed), tuple(removed))

    def chunks_for_files(self, file_ids: Sequence[int] | None = None) -> list[ChunkRow]:
        sql, params = CHUNK_ROW_SQL, []
        if file_ids is not None:
            sql += " WHERE c.file_id IN (SELECT unnest(?))"
            params.append(list(file_ids))
        sql += " ORDER BY f.path, c.ordinal"
        return [ChunkRow(*r) for r in self._cursor().execute(sql, params).fetchall()]

    def chunks_by_id(self, chunk_ids: Sequence[str]) -> dict[str, ChunkRow]:
        rows = self._cursor().execute(CHUNK_ROW_SQL + " WHERE c.chunk_id IN (SELECT unnest(?))",
                                      [list(chunk_ids)]).fetchall()
        return {r[0]: ChunkRow(*r) for r in rows}

    def find_symbols(self, names_lower: Sequence[str], prefixes_lower: Sequence[str] = ()
                     ) -> list[tuple[str, str, str, int]]:
        clauses = ["name_lower IN (SELECT unnest(?))", "short_lower IN (SELECT unnest(?))"]
        params: list[Any] = [list(names_lower), list(names_lower)]
        for prefix in prefixes_lower:
            clauses.append("starts_with(short_lower, ?)")
            params.append(prefix)
        return self._cursor().execute(
            f"SELECT chunk_id, name, kind, line FROM symbols WHERE {' OR '.join(clauses)} "
            "ORDER BY name, chunk_id", params).fetchall()

    def find_references(self, targets_lower: Sequence[str]) -> list[tuple[str, str]]:
        return self._cursor().execute(
            """SELECT DISTINCT src_chunk_id, target FROM links
               WHERE lower(target) IN (SELECT unnest(?))
                  OR lower(split_part(target, '.', -1)) IN (SELECT unnest(?))
               ORDER BY src_chunk_id""",
            [list(targets_lower), list(targets_lower)]).fetchall()

    def symbols_for_files(self, file_ids: Sequence[int] | None = None
                          ) -> list[tuple[int, str, str, str, int]]:
        """Definitions of the given files (None: all): (file_id, chunk_id, name, kind, line);
        the symbol provider keeps them in memory."""
        sql, params = "SELECT file_id, chunk_id, name, kind, line FROM symbols", []
        if file_ids is not None:
            sql += " WHERE file_id IN (SELECT unnest(?))"
            params.append(list(file_ids))
        return self._cursor().execute(sql, params).fetchall()

    def links_for_files(self, file_ids: Sequence[int] | None = None
                        ) -> list[tuple[int, str, str]]:
        """References made by chunks of the given files (None: all):
        (file_id, src_chunk_id, target)."""
        sql, params = "SELECT DISTINCT file_id, src_chunk_id, target FROM links", []
        if file_ids is not None:
            sql += " WHERE file_id IN (SELECT unnest(?))"
            params.append(list(file_ids))
        return self._cursor().execute(sql, params).fetchall()
