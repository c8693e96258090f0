"""Files left out of the index on PostgreSQL (skipped_files): what a walk refused and why,
and files the indexer gave up on."""

from __future__ import annotations

from typing import Any, Sequence

from contextd.store.base import SkippedFile
from contextd.store.postgres.session import PostgresSession


class SkipsMixin(PostgresSession):
    """IndexStore's ``replace_skips`` and ``list_skips``."""

    def replace_skips(self, skips: Sequence[SkippedFile], reasons: Sequence[str],
                      prefixes: Sequence[str] | None = None) -> None:
        where, params = "workspace_id = %s AND reason = ANY(%s)", [self.workspace, list(reasons)]
        if prefixes is not None:
            where += " AND (" + " OR ".join(
                "path = %s OR starts_with(path, %s)" for _ in prefixes) + " OR false)"
            for prefix in prefixes:
                params += [prefix, prefix.rstrip("/") + "/"]
        with self._transaction() as tx:
            tx.conn.execute(f"DELETE FROM skipped_files WHERE {where}", params)
            if skips:
                with tx.conn.cursor() as cur:
                    # One row per (path, reason): a repeated pair keeps its last detail.
                    cur.executemany(
                        """INSERT INTO skipped_files (workspace_id, path, reason, detail,
                           size_bytes, mtime_ns) VALUES (%s, %s, %s, %s, %s, %s)
                           ON CONFLICT (workspace_id, path, reason) DO UPDATE SET
                           detail = EXCLUDED.detail, size_bytes = EXCLUDED.size_bytes,
                           mtime_ns = EXCLUDED.mtime_ns, recorded_at = now()""",
                        [(self.workspace, s.path, s.reason, s.detail, s.size_bytes, s.mtime_ns)
                         for s in skips])

    def list_skips(self, path: str | None = None, limit: int = 100) -> list[SkippedFile]:
        sql = ("SELECT path, reason, detail, size_bytes, mtime_ns FROM skipped_files "
               "WHERE workspace_id = %s")
        params: list[Any] = [self.workspace]
        if path is not None:
            sql += " AND path = %s"
            params.append(path)
        rows = self._rows(sql + ' ORDER BY path COLLATE "C", reason COLLATE "C" LIMIT %s',
                          params + [limit])
        return [SkippedFile(*row) for row in rows]
