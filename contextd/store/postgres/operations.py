"""Operational rows on PostgreSQL: jobs, bootstrap progress and errors, metadata, the
prefix cache, the boundary settings and the totals of ``stats``."""

from __future__ import annotations

import json
import uuid
from typing import Any, Sequence

from contextd.store.base import KNOWLEDGE_PREFIX, Job
from contextd.store.postgres.session import PostgresSession
from contextd.store.rows import (
    JOB_FIELDS, PROJECT_CONFIG_KEYS, iso, job_assignments, job_from_row,
)


class OperationsMixin(PostgresSession):
    """IndexStore's jobs, progress, errors, metadata, prefixes, config and stats."""

    # ----- jobs ------------------------------------------------------------------------
    def create_job(self, job_type: str, scope: str, files_total: int | None, created_by: str,
                   params: dict[str, Any] | None = None, status: str = "queued") -> Job:
        job_id = f"{job_type.split('_')[0]}-{uuid.uuid4().hex[:12]}"
        with self._transaction() as tx:
            tx.conn.execute(
                """INSERT INTO jobs (workspace_id, job_id, job_type, status, scope, files_total,
                                     created_by, params, updated_at)
                   VALUES (%s, %s, %s, %s, %s, %s, %s, %s::jsonb, now())""",
                [self.workspace, job_id, job_type, status, scope, files_total, created_by,
                 json.dumps(params or {})])
        job = self.get_job(job_id)
        assert job is not None
        return job

    def update_job(self, job_id: str, **fields: Any) -> None:
        sets, params = job_assignments(fields, "clock_timestamp()", "%s", "%s::jsonb")
        with self._transaction() as tx:
            tx.conn.execute(f"UPDATE jobs SET {', '.join(sets)} WHERE workspace_id = %s "
                            "AND job_id = %s", [*params, self.workspace, job_id])

    def _jobs(self, where: str, params: list[Any], limit: int) -> list[Job]:
        rows = self._rows(
            f"SELECT {', '.join(JOB_FIELDS)} FROM jobs WHERE workspace_id = %s {where} "
            f"ORDER BY started_at DESC, job_id COLLATE \"C\" LIMIT %s",
            [self.workspace, *params, limit])
        return [job_from_row(row) for row in rows]

    def get_job(self, job_id: str) -> Job | None:
        found = self._jobs("AND job_id = %s", [job_id], 1)
        return found[0] if found else None

    def list_jobs(self, statuses: Sequence[str] = (), limit: int = 20) -> list[Job]:
        if statuses:
            return self._jobs("AND status = ANY(%s)", [list(statuses)], limit)
        return self._jobs("", [], limit)

    # ----- bootstrap progress and errors ------------------------------------------------
    def progress_begin(self, job_id: str, paths: Sequence[str]) -> None:
        with self._transaction() as tx:
            tx.conn.execute("DELETE FROM bootstrap_progress WHERE workspace_id = %s",
                            [self.workspace])
            self._copy(tx.conn, "bootstrap_progress", self.workspace, {
                "file_path": list(dict.fromkeys(paths)), "status": ["pending"] * len(set(paths)),
                "job_id": [job_id] * len(set(paths))})

    def progress_mark(self, paths: Sequence[str], status: str, error: str | None = None) -> None:
        if not paths:
            return
        stamp = "started_at" if status == "processing" else "completed_at"
        with self._transaction() as tx:
            tx.conn.execute(f"""UPDATE bootstrap_progress SET status = %s, {stamp} = now(),
                                error_message = %s WHERE workspace_id = %s
                                AND file_path = ANY(%s)""",
                            [status, error, self.workspace, sorted(paths)])

    def progress_pending(self) -> tuple[str | None, list[str]]:
        rows = self._rows("""SELECT job_id, file_path FROM bootstrap_progress
                             WHERE workspace_id = %s AND status IN ('pending', 'processing')
                             ORDER BY file_path COLLATE "C" """, [self.workspace])
        if not rows:
            return None, []
        return rows[0][0], [r[1] for r in rows]

    def progress_clear(self) -> None:
        with self._transaction() as tx:
            tx.conn.execute("DELETE FROM bootstrap_progress WHERE workspace_id = %s",
                            [self.workspace])

    def record_error(self, path: str, error_type: str, message: str,
                     stack_trace: str | None = None) -> None:
        with self._transaction() as tx:
            row = tx.conn.execute("SELECT max(retry_count) FROM bootstrap_errors "
                                  "WHERE workspace_id = %s AND file_path = %s",
                                  [self.workspace, path]).fetchone()
            retries = 0 if row[0] is None else row[0] + 1
            tx.conn.execute("DELETE FROM bootstrap_errors WHERE workspace_id = %s "
                            "AND file_path = %s", [self.workspace, path])
            tx.conn.execute("""INSERT INTO bootstrap_errors (workspace_id, file_path, error_type,
                               error_message, stack_trace, retry_count)
                               VALUES (%s, %s, %s, %s, %s, %s)""",
                            [self.workspace, path, error_type, message, stack_trace, retries])

    def clear_errors(self, paths: Sequence[str] | None = None) -> None:
        with self._transaction() as tx:
            if paths is None:
                tx.conn.execute("DELETE FROM bootstrap_errors WHERE workspace_id = %s",
                                [self.workspace])
            else:
                tx.conn.execute("DELETE FROM bootstrap_errors WHERE workspace_id = %s "
                                "AND file_path = ANY(%s)", [self.workspace, list(paths)])

    def list_errors(self, limit: int = 100) -> list[dict[str, Any]]:
        names = ("file_path", "error_type", "error_message", "occurred_at", "retry_count")
        rows = self._rows(f"""SELECT {', '.join(names)} FROM bootstrap_errors
                              WHERE workspace_id = %s
                              ORDER BY occurred_at DESC, file_path COLLATE "C" LIMIT %s""",
                          [self.workspace, limit])
        return [{k: iso(v) for k, v in zip(names, row)} for row in rows]

    # ----- metadata, prefixes, config -------------------------------------------
    def get_meta(self, key: str) -> str | None:
        row = self._row("SELECT value FROM index_meta WHERE workspace_id = %s AND key = %s",
                        [self.workspace, key])
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        with self._transaction() as tx:
            tx.conn.execute("""INSERT INTO index_meta (workspace_id, key, value)
                               VALUES (%s, %s, %s) ON CONFLICT (workspace_id, key)
                               DO UPDATE SET value = EXCLUDED.value""",
                            [self.workspace, key, value])

    def get_prefixes(self, model: str, keys: Sequence[tuple[str, str]]
                     ) -> dict[tuple[str, str], str]:
        if not keys:
            return {}
        rows = self._rows("""SELECT chunk_hash, doc_hash, prefix FROM prefix_cache
                             WHERE workspace_id = %s AND model = %s AND chunk_hash = ANY(%s)""",
                          [self.workspace, model, [k[0] for k in keys]])
        wanted = set(keys)
        return {(c, d): p for c, d, p in rows if (c, d) in wanted}

    def put_prefixes(self, model: str, rows: Sequence[tuple[str, str, str]]) -> None:
        if not rows:
            return
        with self._transaction() as tx, tx.conn.cursor() as cur:
            cur.executemany("""INSERT INTO prefix_cache (workspace_id, model, chunk_hash,
                               doc_hash, prefix) VALUES (%s, %s, %s, %s, %s)
                               ON CONFLICT DO NOTHING""",
                            [(self.workspace, model, *r) for r in rows])

    def save_project_config(self, snapshot: dict[str, Any]) -> bool:
        keys = PROJECT_CONFIG_KEYS
        values = [snapshot.get(k) for k in keys]
        with self._transaction() as tx:
            row = tx.conn.execute(f"SELECT {', '.join(keys)} FROM project_config "
                                  "WHERE workspace_id = %s FOR UPDATE",
                                  [self.workspace]).fetchone()
            if row is not None and list(row) == values:
                return False
            tx.conn.execute(
                f"""INSERT INTO project_config (workspace_id, {', '.join(keys)})
                    VALUES (%s, {', '.join(['%s'] * len(keys))})
                    ON CONFLICT (workspace_id) DO UPDATE SET
                    {', '.join(f'{k} = EXCLUDED.{k}' for k in keys)}, updated_at = now()""",
                [self.workspace, *values])
            return row is not None

    def stats(self) -> dict[str, Any]:
        ws = [self.workspace]
        files, redacted, last = self._row(
            "SELECT count(*), coalesce(sum(secrets_redacted), 0), max(indexed_at) "
            "FROM file_state WHERE workspace_id = %s AND NOT starts_with(path, %s)",
            [*ws, KNOWLEDGE_PREFIX])
        documents, document_chunks = self._row(
            "SELECT count(*), coalesce(sum(chunk_count), 0) FROM file_state "
            "WHERE workspace_id = %s AND starts_with(path, %s)", [*ws, KNOWLEDGE_PREFIX])
        chunks, contextualized = self._row(
            "SELECT count(*), count(*) FILTER (WHERE contextualized) FROM chunks "
            "WHERE workspace_id = %s", ws)
        by_model = dict(self._rows(
            """SELECT e.model, count(*) FROM chunks c JOIN embeddings e
               ON e.workspace_id = c.workspace_id AND e.text_hash = c.embed_hash
               WHERE c.workspace_id = %s GROUP BY e.model""", ws))
        languages = dict(self._rows(
            "SELECT coalesce(language, 'unknown'), count(*) FROM chunks WHERE workspace_id = %s "
            "GROUP BY 1 ORDER BY 2 DESC", ws))
        usage = self._row("SELECT count(*), avg(query_latency_ms), avg(context_tokens) "
                          "FROM usage_metrics WHERE workspace_id = %s", ws)
        errors = self._row("SELECT count(*) FROM bootstrap_errors WHERE workspace_id = %s",
                           ws)[0]
        skipped = dict(self._rows(
            "SELECT reason, count(*) FROM skipped_files WHERE workspace_id = %s GROUP BY 1 "
            'ORDER BY 2 DESC, reason COLLATE "C"', ws))
        size = self._row("SELECT pg_database_size(current_database())")[0]
        return {
            "total_files": files, "total_chunks": chunks - document_chunks,
            "knowledge_documents": documents, "knowledge_chunks": int(document_chunks),
            "embeddings_by_model": by_model,
            "contextualized_chunks": contextualized, "languages": languages,
            "db_size_mb": round(size / 2**20, 2), "last_indexed": iso(last),
            "secrets_redacted": int(redacted), "errors": errors, "skipped": skipped,
            "queries": usage[0],
            "avg_query_latency_ms": float(usage[1]) if usage[1] is not None else None,
            "avg_tokens_per_query": float(usage[2]) if usage[2] is not None else None,
            "generation": self.generation(), "backend": "postgres",
            "workspace": self.workspace,
        }
