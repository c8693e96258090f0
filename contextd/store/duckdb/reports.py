"""What the contextual-retrieval and token-reduction reports read: each chunk's prefix
quality and tokens, and the task token usage agents report."""

from __future__ import annotations

from typing import Any, Sequence

from contextd.store.duckdb.sql import first_row, iso
from contextd.store.rows import (
    CACHE_HIT_RATE_SQL, PREFIX_SUMMARY_SQL, TASK_USAGE_COLUMNS, prefix_summary_of, rate_of,
)


class ReportsMixin:
    """Prefix details and task usage of :class:`contextd.store.duckdb.store.DuckDBStore`."""

    def prefix_details(self, chunk_ids: Sequence[str]) -> dict[str, tuple[float | None, int]]:
        rows = self._cursor().execute(
            "SELECT chunk_id, prefix_quality, coalesce(prefix_tokens, 0) FROM chunks "
            "WHERE chunk_id IN (SELECT unnest(?))", [list(chunk_ids)]).fetchall()
        return {cid: (quality, int(tokens)) for cid, quality, tokens in rows}

    def prefix_summary(self) -> dict[str, Any]:
        return prefix_summary_of(first_row(self._cursor().execute(PREFIX_SUMMARY_SQL)))

    def cache_hit_rate(self) -> float | None:
        return rate_of(first_row(self._cursor().execute(CACHE_HIT_RATE_SQL)))

    def record_task_usage(self, op: str, task_id: str, tokens_input: int, tokens_output: int,
                          agent: str | None = None, context_tokens: int | None = None,
                          notes: str | None = None) -> None:
        with self._transaction() as cur:
            cur.execute("""INSERT INTO task_usage (op, agent, task_id, tokens_input,
                           tokens_output, context_tokens, notes)
                           VALUES (?, ?, ?, ?, ?, ?, ?)""",
                        [op, agent, task_id, tokens_input, tokens_output, context_tokens, notes])

    def task_usage(self) -> list[dict[str, Any]]:
        rows = self._cursor().execute(
            f"SELECT {', '.join(TASK_USAGE_COLUMNS)} FROM task_usage ORDER BY report_id"
        ).fetchall()
        return [dict(zip(TASK_USAGE_COLUMNS, (iso(row[0]), *row[1:]))) for row in rows]
