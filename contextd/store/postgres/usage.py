"""Usage metrics on PostgreSQL: one row per answer (what it served, from which files, which
providers and how they scored) and the summary the Index Manager's savings page shows."""

from __future__ import annotations

import json
from typing import Any, Sequence

from contextd.store.postgres.session import PostgresSession
from contextd.store.rows import complete_usage_rows, summarise_usage


class UsageMixin(PostgresSession):
    """IndexStore's ``record_usage_many`` (``record_usage`` is one row of it) and
    ``usage_summary``."""

    def record_usage_many(self, rows: Sequence[tuple]) -> None:
        if not rows:
            return
        rows = complete_usage_rows(rows)
        ws = self.workspace
        with self._transaction() as tx:
            wanted = sorted({path for row in rows for path in (row[7] or ())})
            # Whole-file tokens now: the row keeps what an agent would have read then.
            file_tokens = dict(tx.conn.execute(
                """SELECT f.path, sum(c.tokens_est) FROM chunks c JOIN file_state f
                   ON f.workspace_id = c.workspace_id AND f.file_id = c.file_id
                   WHERE c.workspace_id = %s AND f.path = ANY(%s) GROUP BY f.path""",
                [ws, wanted]).fetchall()) if wanted else {}
            values = [(ws, task_id, query, list(providers), snippets, tokens, latency_ms,
                       cache_hits, list(files or ()),
                       sum(int(file_tokens.get(path, 0)) for path in files or ()),
                       json.dumps(scores) if scores else None)
                      for task_id, query, providers, snippets, tokens, latency_ms, cache_hits,
                      files, scores in rows]
            with tx.conn.cursor() as cur:
                cur.executemany("""INSERT INTO usage_metrics (workspace_id, task_id, query,
                                   providers_used, snippets_count, context_tokens,
                                   query_latency_ms, cache_hits, files_served, source_tokens,
                                   provider_scores)
                                   VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s::jsonb)""",
                                values)

    def usage_summary(self, days: int = 30) -> dict[str, Any]:
        since = ("FROM usage_metrics WHERE workspace_id = %s "
                 "AND recorded_at >= now() - make_interval(days => %s::int)")
        params = [self.workspace, days]
        totals = self._row(
            f"""SELECT count(*), coalesce(sum(context_tokens), 0),
                       coalesce(sum(source_tokens), 0),
                       percentile_cont(0.5) WITHIN GROUP (ORDER BY query_latency_ms),
                       percentile_cont(0.95) WITHIN GROUP (ORDER BY query_latency_ms),
                       percentile_cont(0.99) WITHIN GROUP (ORDER BY query_latency_ms)
                {since}""", params)
        per_day = self._rows(
            f"""SELECT to_char(recorded_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day, count(*),
                       coalesce(sum(context_tokens), 0), coalesce(sum(source_tokens), 0)
                {since} GROUP BY day ORDER BY day""", params)
        per_task = self._rows(
            f"""SELECT task, count(*), coalesce(sum(context_tokens), 0),
                       coalesce(sum(source_tokens), 0)
                FROM (SELECT coalesce(nullif(task_id, ''), '(no task)') AS task,
                             context_tokens, source_tokens {since}) tasks
                GROUP BY task ORDER BY 2 DESC, task COLLATE "C" LIMIT 20""", params)
        per_provider = self._rows(
            f"""SELECT provider, count(*) FROM (SELECT unnest(providers_used) AS provider
                {since}) used GROUP BY provider ORDER BY 2 DESC, provider COLLATE "C" """,
            params)
        scores = [raw for (raw,) in self._rows(
            f"SELECT provider_scores {since} AND provider_scores IS NOT NULL", params)]
        return summarise_usage(days, totals, per_day, per_task, per_provider, scores)
