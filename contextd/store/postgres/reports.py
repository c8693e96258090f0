"""Prefix quality and tokens of chunks and agent-reported task token usage
per workspace: the PostgreSQL side of the reports."""

from __future__ import annotations

from typing import Any, Iterator, Sequence

from contextd.store.rows import (
    CACHE_HIT_RATE_SQL, PREFIX_SUMMARY_SQL, RATING_PAGE, TASK_USAGE_COLUMNS, UNRATED_WHERE,
    prefix_summary_of, rate_of, unrated_qualities,
)


class ReportsMixin:
    """Prefix details and task usage of :class:`contextd.store.postgres.store.PostgresStore`."""

    def prefix_details(self, chunk_ids: Sequence[str],
                       min_key_term_share: float | None = None
                       ) -> dict[str, tuple[float | None, int]]:
        rows = self._rows("SELECT chunk_id, prefix_quality, coalesce(prefix_tokens, 0) "
                          "FROM chunks WHERE workspace_id = %s AND chunk_id = ANY(%s)",
                          [self.workspace, list(chunk_ids)])
        rated = dict(unrated_qualities(self._unrated(chunk_ids), min_key_term_share))
        return {cid: (rated.get(cid, quality), int(tokens)) for cid, quality, tokens in rows}

    def prefix_summary(self, min_key_term_share: float | None = None) -> dict[str, Any]:
        return prefix_summary_of(self._row(PREFIX_SUMMARY_SQL + " WHERE workspace_id = %s",
                                           [self.workspace]), (
            quality for _, quality in unrated_qualities(self._unrated(), min_key_term_share)))

    def _unrated(self, chunk_ids: Sequence[str] | None = None) -> Iterator[tuple]:
        """unrated_qualities' rows (chunk id, text, index text, defined names), of
        ``chunk_ids`` or all, a page at a time in chunk id order."""
        among, extra = "", []
        if chunk_ids is not None:
            among = " AND c.chunk_id = ANY(%s)"
            extra.append(list(chunk_ids))
        after = ""
        while True:
            page = self._rows(
                "SELECT c.chunk_id, c.text, c.index_text, (SELECT array_agg(s.name ORDER BY "
                "s.line) FROM symbols s WHERE s.workspace_id = c.workspace_id "
                "AND s.chunk_id = c.chunk_id) FROM chunks c "
                f"WHERE c.workspace_id = %s AND {UNRATED_WHERE} AND c.chunk_id > %s{among} "
                "ORDER BY c.chunk_id LIMIT %s",
                [self.workspace, after, *extra, RATING_PAGE])
            yield from page
            if len(page) < RATING_PAGE:
                return
            after = page[-1][0]

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
