"""Files the boundary skipped, with the reason for each."""

from __future__ import annotations

from typing import Any, Sequence

from contextd.store.base import SkippedFile
from contextd.store.duckdb.sql import insert_columns


class SkipsMixin:
    """Files the boundary skipped, with the reason for each, of
    :class:`contextd.store.duckdb.store.DuckDBStore`."""

    def replace_skips(self, skips: Sequence[SkippedFile], reasons: Sequence[str],
                      prefixes: Sequence[str] | None = None) -> None:
        with self._transaction() as cur:
            where, params = "reason IN (SELECT unnest(?))", [list(reasons)]
            if prefixes is not None:
                where += " AND (" + " OR ".join(
                    "path = ? OR starts_with(path, ?)" for _ in prefixes) + ")"
                for prefix in prefixes:
                    params += [prefix, prefix.rstrip("/") + "/"]
            cur.execute(f"DELETE FROM skipped_files WHERE {where}", params)
            if skips:
                insert_columns(cur, "skipped_files", {
                    "path": [s.path for s in skips], "reason": [s.reason for s in skips],
                    "detail": [s.detail for s in skips],
                    "size_bytes": [s.size_bytes for s in skips],
                    "mtime_ns": [s.mtime_ns for s in skips]})

    def list_skips(self, path: str | None = None, limit: int = 100) -> list[SkippedFile]:
        sql = "SELECT path, reason, detail, size_bytes, mtime_ns FROM skipped_files"
        params: list[Any] = []
        if path is not None:
            sql += " WHERE path = ?"
            params.append(path)
        rows = self._cursor().execute(sql + " ORDER BY path, reason LIMIT ?",
                                      params + [limit]).fetchall()
        return [SkippedFile(*row) for row in rows]
