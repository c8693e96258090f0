"""Prefix quality and tokens of chunks and agent-reported task token usage
per workspace: the PostgreSQL side of the reports."""

from __future__ import annotations

from typing import Any, Sequence

from contextd.store.rows import (
    CACHE_HIT_RATE_SQL, PREFIX_SUMMARY_SQL, TASK_USAGE_COLUMNS, prefix_summary_of, rate_of,
)


class ReportsMixin:
    """Prefix details and task usage of :class:`contextd.store.postgres.store.PostgresStore`."""

    def prefix_details(self, chunk_ids: Sequence[str]) -> dict[str, tuple[float | None, int]]:
        rows = self._rows("SELECT chunk_id, prefix_quality, coalesce(prefix_tokens, 0) "
                          "FROM chunks WHERE workspace_id = %s AND chunk_id = ANY(%s)",
                          [self.workspace, list(chunk_ids)])
        return {cid: (quality, int(tokens)) for cid, quality, tokens in rows}

    def prefix_summary(self) -> dict[str, Any]:
        return prefix_summary_of(self._row(PREFIX_SUMMARY_SQL + " WHERE workspace_id = %s",
                                           [self.workspace]))

    def cache_hit_rate(self) -> float | None:
        return rate_of(self._row(CACHE_HIT_RATE_SQL + " WHERE workspace_id = %s",
                                 [self.workspace]))

    def record_task_usage(self, op: str, task_id: str, tokens_input: int, tokens_output: int,
                          agent: str | None = None, context_tokens: int | None = None,
                          notes: str | None = None) -> None:
        with self._transaction() as tx:
            tx.conn.execute("""INSERT INTO task_usage (workspace_id, op, agent, task_id,
                               tokens_input, tokens_output, context_tokens, notes)
                               VALUES (%s, %s, %s, %s, %s, %s, %s, %s)""",
                            [self.workspace, op, agent, task_id, tokens_input, tokens_output,
                             context_tokens, notes])

    def task_usage(self) -> list[dict[str, Any]]:
        rows = self._rows(f"SELECT {', '.join(TASK_USAGE_COLUMNS)} FROM task_usage "
                          "WHERE workspace_id = %s ORDER BY report_id", [self.workspace])
        return [dict(zip(TASK_USAGE_COLUMNS, (row[0].isoformat(), *row[1:]))) for row in rows]
