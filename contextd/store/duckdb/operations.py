"""Operations: rebuild jobs, bootstrap progress and errors, metadata, prefix cache, the project's config snapshot, and rows moved between stores."""

from __future__ import annotations

import json
import uuid
from typing import Any, Sequence

import numpy as np

from contextd.store.base import Job
from contextd.store.rows import (
    JOB_FIELDS, PROJECT_CONFIG_KEYS, TRANSFER_COLUMNS, job_assignments, job_from_row,
    renumber_files,
)
from contextd.store.duckdb.sql import first_row, iso


class OperationsMixin:
    """Operations of :class:`contextd.store.duckdb.store.DuckDBStore`."""

    def export_rows(self, table: str) -> list[tuple]:
        columns = ", ".join(TRANSFER_COLUMNS[table])
        rows = self._cursor().execute(f"SELECT {columns} FROM {table}").fetchall()
        if table == "embeddings":
            return [(m, h, np.asarray(v, dtype=np.float32)) for m, h, v in rows]
        return rows

    def import_rows(self, tables: dict[str, list[tuple]]) -> int:
        files = tables.get("file_state", [])
        with self._transaction() as cur:
            gen = self._bump_generation(cur)
            cur.execute("INSERT INTO removed_files SELECT file_id, path, ? FROM file_state",
                        [gen])
            for table in TRANSFER_COLUMNS:
                cur.execute(f"DELETE FROM {table}")
            ids = cur.execute("SELECT nextval('file_id_seq') FROM range(?)",
                              [len(files)]).fetchall()
            columns = renumber_files(tables, {row[0]: i[0] for row, i in zip(files, ids)})
            if "file_state" in columns:
                columns["file_state"]["generation"] = [gen] * len(files)
            vectors = columns.pop("embeddings", None)
            for table, data in columns.items():
                self._insert(cur, table, data)
            if vectors and vectors["vector"]:
                matrix = np.stack([np.asarray(v, dtype=np.float32) for v in vectors["vector"]])
                self._insert(cur, "embeddings", {"model": vectors["model"],
                                                 "text_hash": vectors["text_hash"],
                                                 "vector": matrix})
        return len(files)

    def create_job(self, job_type: str, scope: str, files_total: int | None, created_by: str,
                   params: dict[str, Any] | None = None, status: str = "queued") -> Job:
        job_id = f"{job_type.split('_')[0]}-{uuid.uuid4().hex[:12]}"
        with self._transaction() as cur:
            cur.execute(
                """INSERT INTO jobs (job_id, job_type, status, scope, files_total, created_by,
                                     params, updated_at)
                   VALUES (?, ?, ?, ?, ?, ?, ?, now())""",
                [job_id, job_type, status, scope, files_total, created_by,
                 json.dumps(params or {})])
        job = self.get_job(job_id)
        assert job is not None
        return job

    def update_job(self, job_id: str, **fields: Any) -> None:
        sets, params = job_assignments(fields, "now()", "?", "?")
        with self._transaction() as cur:
            cur.execute(f"UPDATE jobs SET {', '.join(sets)} WHERE job_id = ?", [*params, job_id])

    def _jobs(self, where: str, params: list[Any], limit: int) -> list[Job]:
        rows = self._cursor().execute(
            f"SELECT {', '.join(JOB_FIELDS)} FROM jobs {where} "
            f"ORDER BY started_at DESC, job_id LIMIT ?", [*params, limit]).fetchall()
        return [job_from_row(row) for row in rows]

    def get_job(self, job_id: str) -> Job | None:
        found = self._jobs("WHERE job_id = ?", [job_id], 1)
        return found[0] if found else None

    def list_jobs(self, statuses: Sequence[str] = (), limit: int = 20) -> list[Job]:
        if statuses:
            return self._jobs("WHERE status IN (SELECT unnest(?))", [list(statuses)], limit)
        return self._jobs("", [], limit)

    def progress_begin(self, job_id: str, paths: Sequence[str]) -> None:
        with self._transaction() as cur:
            cur.execute("DELETE FROM bootstrap_progress")
            self._insert(cur, "bootstrap_progress", {
                "file_path": list(paths), "status": ["pending"] * len(paths),
                "job_id": [job_id] * len(paths)})

    def progress_mark(self, paths: Sequence[str], status: str, error: str | None = None) -> None:
        if not paths:
            return
        stamp = "started_at" if status == "processing" else "completed_at"
        with self._transaction() as cur:
            cur.execute(f"""UPDATE bootstrap_progress SET status = ?, {stamp} = now(),
                            error_message = ? WHERE file_path IN (SELECT unnest(?))""",
                        [status, error, list(paths)])

    def progress_pending(self) -> tuple[str | None, list[str]]:
        rows = self._cursor().execute(
            """SELECT job_id, file_path FROM bootstrap_progress
               WHERE status IN ('pending', 'processing') ORDER BY file_path""").fetchall()
        if not rows:
            return None, []
        return rows[0][0], [r[1] for r in rows]

    def progress_clear(self) -> None:
        with self._transaction() as cur:
            cur.execute("DELETE FROM bootstrap_progress")

    def record_error(self, path: str, error_type: str, message: str,
                     stack_trace: str | None = None) -> None:
        with self._transaction() as cur:
            row = first_row(cur.execute(
                "SELECT max(retry_count) FROM bootstrap_errors WHERE file_path = ?", [path]))
            retries = 0 if row[0] is None else row[0] + 1
            cur.execute("DELETE FROM bootstrap_errors WHERE file_path = ?", [path])
            cur.execute("""INSERT INTO bootstrap_errors (file_path, error_type, error_message,
                           stack_trace, retry_count) VALUES (?, ?, ?, ?, ?)""",
                        [path, error_type, message, stack_trace, retries])

    def clear_errors(self, paths: Sequence[str] | None = None) -> None:
        with self._transaction() as cur:
            if paths is None:
                cur.execute("DELETE FROM bootstrap_errors")
            else:
                cur.execute("DELETE FROM bootstrap_errors WHERE file_path IN (SELECT unnest(?))",
                            [list(paths)])

    def list_errors(self, limit: int = 100) -> list[dict[str, Any]]:
        cur = self._cursor().execute(
            """SELECT file_path, error_type, error_message, occurred_at, retry_count
               FROM bootstrap_errors ORDER BY occurred_at DESC, file_path LIMIT ?""", [limit])
        names = [d[0] for d in cur.description]
        return [{k: iso(v) for k, v in zip(names, row)} for row in cur.fetchall()]

    def get_meta(self, key: str) -> str | None:
        row = first_row(self._cursor().execute("SELECT value FROM index_meta WHERE key = ?",
                                            [key]))
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        with self._transaction() as cur:
            cur.execute("DELETE FROM index_meta WHERE key = ?", [key])
            cur.execute("INSERT INTO index_meta VALUES (?, ?)", [key, value])

    def get_prefixes(self, model: str, keys: Sequence[tuple[str, str]]
                     ) -> dict[tuple[str, str], str]:
        if not keys:
            return {}
        rows = self._cursor().execute(
            """SELECT chunk_hash, doc_hash, prefix FROM prefix_cache
               WHERE model = ? AND chunk_hash IN (SELECT unnest(?))""",
            [model, [k[0] for k in keys]]).fetchall()
        wanted = set(keys)
        return {(c, d): p for c, d, p in rows if (c, d) in wanted}

    def put_prefixes(self, model: str, rows: Sequence[tuple[str, str, str]]) -> None:
        if not rows:
            return
        with self._transaction() as cur:
            cur.executemany("INSERT OR IGNORE INTO prefix_cache (model, chunk_hash, doc_hash, "
                            "prefix) VALUES (?, ?, ?, ?)", [(model, *r) for r in rows])

    def save_project_config(self, snapshot: dict[str, Any]) -> bool:
        keys = PROJECT_CONFIG_KEYS
        values = [snapshot.get(k) for k in keys]
        with self._transaction() as cur:
            row = first_row(cur.execute(f"SELECT {', '.join(keys)} FROM project_config "
                                     "WHERE config_id = 1"))
            if row is not None and list(row) == values:
                return False
            cur.execute("DELETE FROM project_config WHERE config_id = 1")
            cur.execute(f"INSERT INTO project_config (config_id, {', '.join(keys)}) "
                        f"VALUES (1, {', '.join('?' * len(keys))})", values)
            return row is not None
