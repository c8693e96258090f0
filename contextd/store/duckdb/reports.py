"""What the contextual-retrieval and token-reduction reports read: each chunk's prefix
quality and tokens, and the task token usage agents report."""

from __future__ import annotations

from typing import Any, Iterator, Sequence

from contextd.store.duckdb.sql import first_row, iso
from contextd.store.rows import (
    CACHE_HIT_RATE_SQL, PREFIX_SUMMARY_SQL, RATING_PAGE, TASK_USAGE_COLUMNS, UNRATED_WHERE,
    prefix_summary_of, rate_of, unrated_qualities,
)


class ReportsMixin:
    """Prefix details and task usage of :class:`contextd.store.duckdb.store.DuckDBStore`."""

    def prefix_details(self, chunk_ids: Sequence[str],
                       min_key_term_share: float | None = None
                       ) -> dict[str, tuple[float | None, int]]:
        rows = self._cursor().execute(
            "SELECT chunk_id, prefix_quality, coalesce(prefix_tokens, 0) FROM chunks "
            "WHERE chunk_id IN (SELECT unnest(?))", [list(chunk_ids)]).fetchall()
        rated = dict(unrated_qualities(self._unrated(chunk_ids), min_key_term_share))
        return {cid: (rated.get(cid, quality), int(tokens)) for cid, quality, tokens in rows}

    def prefix_summary(self, min_key_term_share: float | None = None) -> dict[str, Any]:
        return prefix_summary_of(first_row(self._cursor().execute(PREFIX_SUMMARY_SQL)), (
            quality for _, quality in unrated_qualities(self._unrated(), min_key_term_share)))

    def _unrated(self, chunk_ids: Sequence[str] | None = None) -> Iterator[tuple]:
        """unrated_qualities' rows (chunk id, text, index text, defined names), of
        ``chunk_ids`` or all, fetched a page at a time."""
        among, params = "", []
        if chunk_ids is not None:
            among = " AND c.chunk_id IN (SELECT unnest(?))"
            params.append(list(chunk_ids))
        with self._own_cursor() as cur:
            cur.execute(
                "SELECT c.chunk_id, c.text, c.index_text, s.names FROM chunks c LEFT JOIN "
                "(SELECT chunk_id, list(name ORDER BY line) AS names FROM symbols "
                f"GROUP BY chunk_id) s USING (chunk_id) WHERE {UNRATED_WHERE}{among}", params)
            while page := cur.fetchmany(RATING_PAGE):
                yield from page

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
