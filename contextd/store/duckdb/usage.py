"""Usage metrics: one row per query, and their summary."""

from __future__ import annotations

import json
from typing import Any, Sequence


from contextd.store.rows import complete_usage_rows, summarise_usage
from contextd.store.duckdb.sql import first_row


class UsageMixin:
    """Usage metrics of :class:`contextd.store.duckdb.store.DuckDBStore`."""

    def record_usage_many(self, rows: Sequence[tuple]) -> None:
        if not rows:
            return
        rows = complete_usage_rows(rows)
        with self._transaction() as cur:
            wanted = sorted({path for row in rows for path in (row[7] or ())})
            file_tokens = dict(cur.execute(
                """SELECT f.path, sum(c.tokens_est) FROM chunks c JOIN file_state f
                   ON f.file_id = c.file_id WHERE f.path IN (SELECT unnest(?))
                   GROUP BY f.path""", [wanted]).fetchall()) if wanted else {}
            values = [(task_id, query, list(providers), snippets, tokens, latency_ms,
                       cache_hits, list(files or ()),
                       sum(int(file_tokens.get(path, 0)) for path in files or ()),
                       json.dumps(scores) if scores else None)
                      for task_id, query, providers, snippets, tokens, latency_ms, cache_hits,
                      files, scores in rows]
            cur.executemany("""INSERT INTO usage_metrics (task_id, query, providers_used,
                               snippets_count, context_tokens, query_latency_ms, cache_hits,
                               files_served, source_tokens, provider_scores)
                               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""", values)

    def usage_summary(self, days: int = 30) -> dict[str, Any]:
        cur = self._cursor()
        since = "recorded_at >= now() - to_days(CAST(? AS INTEGER))"
        totals = first_row(cur.execute(
            f"""SELECT count(*), coalesce(sum(context_tokens), 0),
                       coalesce(sum(source_tokens), 0),
                       quantile_cont(query_latency_ms, 0.5), quantile_cont(query_latency_ms, 0.95),
                       quantile_cont(query_latency_ms, 0.99)
                FROM usage_metrics WHERE {since}""", [days]))
        per_day = cur.execute(
            f"""SELECT strftime(date_trunc('day', recorded_at), '%Y-%m-%d'), count(*),
                       coalesce(sum(context_tokens), 0), coalesce(sum(source_tokens), 0)
                FROM usage_metrics WHERE {since} GROUP BY 1 ORDER BY 1""", [days]).fetchall()
        per_task = cur.execute(
            f"""SELECT coalesce(nullif(task_id, ''), '(no task)'), count(*),
                       coalesce(sum(context_tokens), 0), coalesce(sum(source_tokens), 0)
                FROM usage_metrics WHERE {since} GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 20""",
            [days]).fetchall()
        per_provider = cur.execute(
            f"""SELECT provider, count(*) FROM (
                    SELECT unnest(providers_used) AS provider FROM usage_metrics
                    WHERE {since}) GROUP BY 1 ORDER BY 2 DESC, 1""", [days]).fetchall()
        scores = [raw for (raw,) in cur.execute(
            f"""SELECT provider_scores FROM usage_metrics
                WHERE {since} AND provider_scores IS NOT NULL""", [days]).fetchall()]
        return summarise_usage(days, totals, per_day, per_task, per_provider, scores)
