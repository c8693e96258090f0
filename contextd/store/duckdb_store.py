"""The embedded DuckDB store: one file per project, versioned schema, atomic per-batch writes.

Bulk rows go in through Arrow tables (FACTS: ~24k rows/s, where executemany manages ~580);
every write bumps a generation counter so in-memory indexes can catch up incrementally.

Reading that counter is the one database round trip of a warm query (~1 ms idle, 7-12 ms on a
loaded machine), so a read-write store keeps it in memory: DuckDB lets a single process open a
file for writing, so every write to it goes through a store object of this process, and
those objects share one :class:`_GenerationCounter` per database file.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import uuid
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import blake3
import duckdb
import numpy as np
import pyarrow as pa

from contextd.errors import StoreError
from contextd.store.base import (
    Changes, ChunkRow, FileRecord, FileState, IndexStore, Job,
)

SCHEMA_VERSION = 2

_CHUNK_COLUMNS = ("chunk_id", "file_id", "ordinal", "kind", "label", "language", "start_line",
                  "end_line", "start_byte", "end_byte", "tokens_est", "text", "embed_hash",
                  "index_text", "parent", "contextualized")
_CHUNK_ROW_SQL = """
    SELECT c.chunk_id, c.file_id, f.path, c.ordinal, c.kind, coalesce(c.label, ''),
           coalesce(c.language, ''), c.start_line, c.end_line, c.tokens_est, c.text,
           coalesce(c.index_text, c.text), c.embed_hash, coalesce(c.parent, '')
    FROM chunks c JOIN file_state f USING (file_id)
"""
_JOB_FIELDS = ("job_id", "job_type", "status", "scope", "files_total", "files_processed",
               "chunks_processed", "current_file", "started_at", "updated_at", "completed_at",
               "error_message", "metrics", "params", "created_by", "cancel_requested")


def text_hash(text: str) -> str:
    """BLAKE3 of a text, the key of the embedding cache."""
    return blake3.blake3(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _sql_resource(name: str) -> str:
    return resources.files("contextd").joinpath(name).read_text(encoding="utf-8")


def _migrations() -> list[tuple[int, str]]:
    folder = resources.files("contextd").joinpath("migrations")
    found = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            found.append((int(entry.name.split("_", 1)[0]), entry.read_text(encoding="utf-8")))
    return sorted(found)


def _iso(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


class _GenerationCounter:
    """The committed generation of one database file, shared by the store objects of this
    process that have it open for writing (``users`` of them)."""

    _registry: dict[str, "_GenerationCounter"] = {}
    _registry_lock = threading.Lock()

    def __init__(self) -> None:
        self.value = 0
        self.users = 0

    @classmethod
    def acquire(cls, key: str, read: Any) -> "_GenerationCounter":
        """The counter of ``key``; the first user reads the stored value with ``read()``."""
        with cls._registry_lock:
            counter = cls._registry.setdefault(key, cls())
            if counter.users == 0:
                counter.value = read()
            counter.users += 1
            return counter

    @classmethod
    def release(cls, key: str) -> None:
        """Forget the counter once no store of this process has the file open."""
        with cls._registry_lock:
            counter = cls._registry.get(key)
            if counter is not None:
                counter.users -= 1
                if counter.users <= 0:
                    del cls._registry[key]

    def publish(self, generation: int) -> None:
        """Record a committed generation (writers of two store objects may finish in any
        order; the counter only moves forward)."""
        with self._registry_lock:
            self.value = max(self.value, generation)


def _first(result: duckdb.DuckDBPyConnection) -> tuple | None:
    """The first row of a result, read to its end. DuckDB keeps a half-read result (and its
    transaction) open on the cursor: it makes CHECKPOINT wait for ever and the cursor refuse
    other work."""
    rows = result.fetchall()
    return rows[0] if rows else None


class DuckDBStore(IndexStore):
    """IndexStore on one DuckDB file (``":memory:"`` works too, for throwaway indexes)."""

    def __init__(self, path: Path | str, read_only: bool = False):
        self.path = str(path)
        self.read_only = read_only
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._con = duckdb.connect(self.path, read_only=read_only)
        except duckdb.IOException as exc:
            raise StoreError(f"cannot open index {self.path}: {exc}") from None
        self._write_lock = threading.RLock()
        self._local = threading.local()
        # Every thread's cursor, so close() can close them all: a cursor left in the
        # thread-local of a still-running pool thread would outlive the connection and be
        # reported as leaked by DuckDB's bindings when the interpreter exits.
        self._cursors: list[duckdb.DuckDBPyConnection] = []
        self._counter_key: str | None = None
        self._counter: _GenerationCounter | None = None
        if not read_only:
            self._migrate()
            # ":memory:" databases are private to their connection: a key of their own.
            self._counter_key = (os.path.realpath(self.path) if self.path != ":memory:"
                                 else f":memory:{id(self)}")
            self._counter = _GenerationCounter.acquire(self._counter_key,
                                                       self._stored_generation)
        else:
            self._check_version(self._version())

    # ----- schema ----------------------------------------------------------------------
    def _version(self) -> int | None:
        tables = {r[0] for r in self._con.execute(
            "SELECT table_name FROM information_schema.tables").fetchall()}
        if "schema_version" not in tables:
            return 0 if "file_state" in tables else None
        row = _first(self._con.execute("SELECT max(version) FROM schema_version"))
        return row[0] or 0

    def _check_version(self, version: int | None) -> None:
        if version is not None and version > SCHEMA_VERSION:
            raise StoreError(
                f"index {self.path} has schema version {version}, newer than this contextd "
                f"understands ({SCHEMA_VERSION}); upgrade contextd or delete the index file")

    def _migrate(self) -> None:
        version = self._version()
        self._check_version(version)
        if version == SCHEMA_VERSION:
            return
        con = self._con
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute("CREATE TABLE IF NOT EXISTS schema_version "
                        "(version INTEGER NOT NULL, applied_at TIMESTAMP DEFAULT now())")
            if version is None:
                con.execute(_sql_resource("schema.sql"))
            else:
                for number, sql in _migrations():
                    if number > version:
                        con.execute(sql)
            con.execute("INSERT INTO schema_version (version) VALUES (?)", [SCHEMA_VERSION])
            con.execute("COMMIT")
        except Exception:
            con.execute("ROLLBACK")
            raise

    def schema_version(self) -> int:
        """The schema version of the open database."""
        return self._version() or 0

    # ----- connections -----------------------------------------------------------------
    def _cursor(self) -> duckdb.DuckDBPyConnection:
        cur = getattr(self._local, "cursor", None)
        if cur is None:
            cur = self._con.cursor()
            self._local.cursor = cur
            with self._write_lock:
                self._cursors.append(cur)
        return cur

    def batch(self) -> contextlib.AbstractContextManager:
        return self._transaction()

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self._write_lock:
            cur = self._cursor()
            if getattr(self._local, "in_transaction", False):  # inside batch(): join it
                yield cur
                return
            self._local.bumped = None
            self._local.in_transaction = True
            cur.execute("BEGIN TRANSACTION")
            try:
                yield cur
            except BaseException:
                cur.execute("ROLLBACK")
                raise
            finally:
                self._local.in_transaction = False
            cur.execute("COMMIT")
            # Published only once committed: a reader that sees the new generation must also
            # see the rows written under it.
            if self._local.bumped is not None and self._counter is not None:
                self._counter.publish(self._local.bumped)

    def _bump_generation(self, cur: duckdb.DuckDBPyConnection) -> int:
        row = _first(cur.execute("SELECT value FROM index_meta WHERE key = 'generation'"))
        gen = int(row[0]) + 1 if row else 1
        cur.execute("DELETE FROM index_meta WHERE key = 'generation'")
        cur.execute("INSERT INTO index_meta VALUES ('generation', ?)", [str(gen)])
        self._local.bumped = gen
        return gen

    # ----- index contents --------------------------------------------------------------
    def write_files(self, records: Sequence[FileRecord]) -> int:
        if not records:
            return self.generation()
        with self._transaction() as cur:
            gen = self._bump_generation(cur)
            paths = [r.path for r in records]
            existing = dict(cur.execute(
                "SELECT path, file_id FROM file_state WHERE path IN (SELECT unnest(?))",
                [paths]).fetchall())
            self._delete_rows(cur, list(existing.values()))
            new_paths = [p for p in paths if p not in existing]
            if new_paths:
                ids = cur.execute("SELECT nextval('file_id_seq') FROM range(?)",
                                  [len(new_paths)]).fetchall()
                existing.update(zip(new_paths, (i[0] for i in ids)))
            self._insert_records(cur, records, existing, gen)
        return gen

    def _delete_rows(self, cur: duckdb.DuckDBPyConnection, file_ids: list[int]) -> None:
        if not file_ids:
            return
        for table in ("chunks", "symbols", "links", "file_state"):
            cur.execute(f"DELETE FROM {table} WHERE file_id IN (SELECT unnest(?))", [file_ids])

    def _insert_records(self, cur: duckdb.DuckDBPyConnection, records: Sequence[FileRecord],
                        ids: dict[str, int], gen: int) -> None:
        files: dict[str, list] = {k: [] for k in ("file_id", "path", "size_bytes", "mtime_ns",
                                                  "content_hash", "language", "chunk_count",
                                                  "generation", "secrets_redacted", "warnings")}
        chunks: dict[str, list] = {k: [] for k in _CHUNK_COLUMNS}
        symbols: dict[str, list] = {k: [] for k in ("chunk_id", "file_id", "name", "name_lower",
                                                    "short_lower", "kind", "line")}
        links: dict[str, list] = {k: [] for k in ("src_chunk_id", "file_id", "target",
                                                  "link_type")}
        for rec in records:
            fid = ids[rec.path]
            for key, value in (("file_id", fid), ("path", rec.path),
                               ("size_bytes", rec.size_bytes), ("mtime_ns", rec.mtime_ns),
                               ("content_hash", rec.content_hash), ("language", rec.language),
                               ("chunk_count", len(rec.chunks)), ("generation", gen),
                               ("secrets_redacted", rec.secrets_redacted),
                               ("warnings", list(rec.warnings))):
                files[key].append(value)
            seen: dict[str, int] = {}
            for ordinal, item in enumerate(rec.chunks):
                c = item.chunk
                ehash = text_hash(item.index_text)
                base = f"{rec.path}\0{c.label}\0{ehash}"
                seen[base] = seen.get(base, -1) + 1
                chunk_id = blake3.blake3(f"{base}\0{seen[base]}".encode()).hexdigest()[:24]
                for key, value in zip(_CHUNK_COLUMNS, (
                        chunk_id, fid, ordinal, c.kind.value, c.label, c.language, c.start_line,
                        c.end_line, c.start_byte, c.end_byte, c.tokens, c.text, ehash,
                        item.index_text, c.parent, item.contextualized)):
                    chunks[key].append(value)
                for sym in c.defines:
                    for key, value in zip(symbols, (chunk_id, fid, sym.name, sym.name.lower(),
                                                    sym.name.rsplit(".", 1)[-1].lower(),
                                                    sym.kind, sym.line)):
                        symbols[key].append(value)
                for ref in dict.fromkeys(c.references):
                    for key, value in zip(links, (chunk_id, fid, ref, "references")):
                        links[key].append(value)
        self._insert(cur, "file_state", files)
        self._insert(cur, "chunks", chunks)
        self._insert(cur, "symbols", symbols)
        self._insert(cur, "links", links)

    @staticmethod
    def _insert(cur: duckdb.DuckDBPyConnection, table: str, columns: dict[str, list]) -> None:
        if not next(iter(columns.values())):
            return
        arrow = pa.table(columns)
        name = f"_incoming_{table}"
        cur.register(name, arrow)
        try:
            cols = ", ".join(columns)
            cur.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM {name}")
        finally:
            cur.unregister(name)

    def delete_files(self, paths: Iterable[str]) -> int:
        paths = list(paths)
        if not paths:
            return 0
        with self._transaction() as cur:
            rows = cur.execute("SELECT file_id, path FROM file_state WHERE path IN "
                               "(SELECT unnest(?))", [paths]).fetchall()
            if rows:
                gen = self._bump_generation(cur)
                self._delete_rows(cur, [r[0] for r in rows])
                cur.executemany("INSERT INTO removed_files VALUES (?, ?, ?)",
                                [(fid, path, gen) for fid, path in rows])
        return len(rows)

    def update_file_stats(self, rows: Sequence[tuple[str, int, int]]) -> None:
        if not rows:
            return
        with self._transaction() as cur:
            cur.executemany("UPDATE file_state SET size_bytes = ?, mtime_ns = ? WHERE path = ?",
                            [(size, mtime, path) for path, size, mtime in rows])

    def file_states(self, prefix: str | None = None) -> dict[str, FileState]:
        sql = "SELECT file_id, path, size_bytes, mtime_ns, content_hash FROM file_state"
        params: list[Any] = []
        if prefix:
            sql += " WHERE starts_with(path, ?)"
            params.append(prefix)
        return {r[1]: FileState(*r) for r in self._cursor().execute(sql, params).fetchall()}

    def clear_index(self, path_prefixes: Sequence[str] | None = None) -> int:
        if path_prefixes:
            paths = [p for prefix in path_prefixes for p in self.file_states(prefix)]
        else:
            paths = list(self.file_states())
        return self.delete_files(paths)

    # ----- embeddings ------------------------------------------------------------------
    def missing_embeddings(self, model: str, limit: int) -> list[tuple[str, str]]:
        return self._cursor().execute(
            """SELECT c.embed_hash, any_value(coalesce(c.index_text, c.text))
               FROM chunks c ANTI JOIN (SELECT text_hash FROM embeddings WHERE model = ?) e
               ON c.embed_hash = e.text_hash
               GROUP BY c.embed_hash ORDER BY c.embed_hash LIMIT ?""", [model, limit]).fetchall()

    def count_missing_embeddings(self, model: str) -> int:
        return _first(self._cursor().execute(
            """SELECT count(DISTINCT c.embed_hash) FROM chunks c
               ANTI JOIN (SELECT text_hash FROM embeddings WHERE model = ?) e
               ON c.embed_hash = e.text_hash""", [model]))[0]

    def put_embeddings(self, model: str, hashes: Sequence[str], vectors: np.ndarray) -> int:
        if len(hashes) == 0:
            return self.generation()
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        flat = pa.array(vectors.ravel())
        lists = pa.ListArray.from_arrays(
            pa.array(np.arange(0, vectors.size + 1, vectors.shape[1], dtype=np.int32)), flat)
        arrow = pa.table({"text_hash": pa.array(list(hashes)), "vector": lists})
        with self._transaction() as cur:
            gen = self._bump_generation(cur)
            cur.register("_incoming_vectors", arrow)
            try:
                cur.execute(
                    """INSERT INTO embeddings (model, text_hash, vector)
                       SELECT DISTINCT ON (i.text_hash) ?, i.text_hash, i.vector
                       FROM _incoming_vectors i
                       ANTI JOIN (SELECT text_hash FROM embeddings WHERE model = ?) e
                       ON i.text_hash = e.text_hash""", [model, model])
            finally:
                cur.unregister("_incoming_vectors")
        return gen

    def prune_embeddings(self, keep_model: str) -> int:
        with self._transaction() as cur:
            before = _first(cur.execute("SELECT count(*) FROM embeddings"))[0]
            cur.execute("""DELETE FROM embeddings WHERE model <> ? OR text_hash NOT IN
                           (SELECT embed_hash FROM chunks)""", [keep_model])
            after = _first(cur.execute("SELECT count(*) FROM embeddings"))[0]
        return before - after

    def chunk_vectors(self, model: str, file_ids: Sequence[int] | None = None
                      ) -> tuple[list[str], np.ndarray]:
        """(chunk ids, matrix) of every stored chunk (or those of ``file_ids``) that has a
        vector for ``model``; the semantic provider keeps this in memory."""
        sql = ("SELECT c.chunk_id, e.vector FROM chunks c JOIN embeddings e "
               "ON e.text_hash = c.embed_hash AND e.model = ?")
        params: list[Any] = [model]
        if file_ids is not None:
            sql += " WHERE c.file_id IN (SELECT unnest(?))"
            params.append(list(file_ids))
        # A relation on a cursor of its own: Arrow straight from the query (a DB-API result
        # would copy every vector once more), free of the thread cursor's pending results.
        with self._con.cursor() as cur:
            table = cur.sql(sql, params=params).to_arrow_table()
        ids = table.column("chunk_id").to_pylist()
        if not ids:
            return [], np.zeros((0, 0), dtype=np.float32)
        flat = table.column("vector").combine_chunks().flatten().to_numpy()
        return ids, flat.reshape(len(ids), -1).astype(np.float32, copy=False)

    def vectors_for(self, model: str, embed_hashes: Sequence[str]) -> dict[str, np.ndarray]:
        rows = self._cursor().execute(
            "SELECT text_hash, vector FROM embeddings WHERE model = ? AND text_hash IN "
            "(SELECT unnest(?))", [model, list(embed_hashes)]).fetchall()
        return {h: np.asarray(v, dtype=np.float32) for h, v in rows}

    # ----- reading for providers -------------------------------------------------------
    def generation(self) -> int:
        if self._counter is not None:
            return self._counter.value
        return self._stored_generation()

    def _stored_generation(self) -> int:
        """The generation as committed in index_meta (a database round trip)."""
        row = _first(self._cursor().execute(
            "SELECT value FROM index_meta WHERE key = 'generation'"))
        return int(row[0]) if row else 0

    def changes_since(self, generation: int) -> Changes:
        cur = self._cursor()
        cur.execute("BEGIN TRANSACTION")
        try:
            current = self._stored_generation()
            changed = [r[0] for r in cur.execute(
                "SELECT file_id FROM file_state WHERE generation > ?", [generation]).fetchall()]
            removed = [r[0] for r in cur.execute(
                "SELECT DISTINCT file_id FROM removed_files WHERE generation > ?",
                [generation]).fetchall()]
        finally:
            cur.execute("COMMIT")
        return Changes(current, tuple(changed), tuple(removed))

    def chunks_for_files(self, file_ids: Sequence[int] | None = None) -> list[ChunkRow]:
        sql, params = _CHUNK_ROW_SQL, []
        if file_ids is not None:
            sql += " WHERE c.file_id IN (SELECT unnest(?))"
            params.append(list(file_ids))
        sql += " ORDER BY f.path, c.ordinal"
        return [ChunkRow(*r) for r in self._cursor().execute(sql, params).fetchall()]

    def chunks_by_id(self, chunk_ids: Sequence[str]) -> dict[str, ChunkRow]:
        rows = self._cursor().execute(_CHUNK_ROW_SQL + " WHERE c.chunk_id IN (SELECT unnest(?))",
                                      [list(chunk_ids)]).fetchall()
        return {r[0]: ChunkRow(*r) for r in rows}

    def find_symbols(self, names_lower: Sequence[str], prefixes_lower: Sequence[str] = ()
                     ) -> list[tuple[str, str, str, int]]:
        clauses = ["name_lower IN (SELECT unnest(?))", "short_lower IN (SELECT unnest(?))"]
        params: list[Any] = [list(names_lower), list(names_lower)]
        for prefix in prefixes_lower:
            clauses.append("starts_with(short_lower, ?)")
            params.append(prefix)
        return self._cursor().execute(
            f"SELECT chunk_id, name, kind, line FROM symbols WHERE {' OR '.join(clauses)} "
            "ORDER BY name, chunk_id", params).fetchall()

    def find_references(self, targets_lower: Sequence[str]) -> list[tuple[str, str]]:
        return self._cursor().execute(
            """SELECT DISTINCT src_chunk_id, target FROM links
               WHERE lower(target) IN (SELECT unnest(?))
                  OR lower(split_part(target, '.', -1)) IN (SELECT unnest(?))
               ORDER BY src_chunk_id""",
            [list(targets_lower), list(targets_lower)]).fetchall()

    def symbols_for_files(self, file_ids: Sequence[int] | None = None
                          ) -> list[tuple[int, str, str, str, int]]:
        """Definitions of the given files (None: all): (file_id, chunk_id, name, kind, line);
        the symbol provider keeps them in memory."""
        sql, params = "SELECT file_id, chunk_id, name, kind, line FROM symbols", []
        if file_ids is not None:
            sql += " WHERE file_id IN (SELECT unnest(?))"
            params.append(list(file_ids))
        return self._cursor().execute(sql, params).fetchall()

    def links_for_files(self, file_ids: Sequence[int] | None = None
                        ) -> list[tuple[int, str, str]]:
        """References made by chunks of the given files (None: all):
        (file_id, src_chunk_id, target)."""
        sql, params = "SELECT DISTINCT file_id, src_chunk_id, target FROM links", []
        if file_ids is not None:
            sql += " WHERE file_id IN (SELECT unnest(?))"
            params.append(list(file_ids))
        return self._cursor().execute(sql, params).fetchall()

    # ----- jobs ------------------------------------------------------------------------
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
        allowed = {"status", "files_total", "files_processed", "chunks_processed",
                   "current_file", "error_message", "metrics", "completed_at",
                   "cancel_requested", "scope"}
        unknown = set(fields) - allowed
        if unknown:
            raise ValueError(f"unknown job fields: {sorted(unknown)}")
        sets, params = ["updated_at = now()"], []
        for key, value in fields.items():
            if key == "completed_at":
                sets.append("completed_at = now()")
                continue
            if key == "metrics":
                value = json.dumps(value)
            sets.append(f"{key} = ?")
            params.append(value)
        with self._transaction() as cur:
            cur.execute(f"UPDATE jobs SET {', '.join(sets)} WHERE job_id = ?", [*params, job_id])

    def _jobs(self, where: str, params: list[Any], limit: int) -> list[Job]:
        rows = self._cursor().execute(
            f"SELECT {', '.join(_JOB_FIELDS)} FROM jobs {where} "
            f"ORDER BY started_at DESC, job_id LIMIT ?", [*params, limit]).fetchall()
        jobs = []
        for row in rows:
            data = {k: _iso(v) for k, v in zip(_JOB_FIELDS, row)}
            for key in ("metrics", "params"):
                data[key] = json.loads(data[key]) if data[key] else {}
            jobs.append(Job(**data))
        return jobs

    def get_job(self, job_id: str) -> Job | None:
        found = self._jobs("WHERE job_id = ?", [job_id], 1)
        return found[0] if found else None

    def list_jobs(self, statuses: Sequence[str] = (), limit: int = 20) -> list[Job]:
        if statuses:
            return self._jobs("WHERE status IN (SELECT unnest(?))", [list(statuses)], limit)
        return self._jobs("", [], limit)

    # ----- bootstrap progress and errors ------------------------------------------------
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
            row = _first(cur.execute(
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
        return [{k: _iso(v) for k, v in zip(names, row)} for row in cur.fetchall()]

    # ----- metrics, metadata, prefixes, config -------------------------------------------
    def record_usage(self, task_id: str, query: str, providers: Sequence[str], snippets: int,
                     tokens: int, latency_ms: float, cache_hits: int | None = None) -> None:
        self.record_usage_many([(task_id, query, providers, snippets, tokens, latency_ms,
                                 cache_hits)])

    def record_usage_many(self, rows: Sequence[tuple]) -> None:
        if not rows:
            return
        values = [(task_id, query, list(providers), snippets, tokens, latency_ms,
                   extra[0] if extra else None)
                  for task_id, query, providers, snippets, tokens, latency_ms, *extra in rows]
        with self._transaction() as cur:
            cur.executemany("""INSERT INTO usage_metrics (task_id, query, providers_used,
                               snippets_count, context_tokens, query_latency_ms, cache_hits)
                               VALUES (?, ?, ?, ?, ?, ?, ?)""", values)

    def get_meta(self, key: str) -> str | None:
        row = _first(self._cursor().execute("SELECT value FROM index_meta WHERE key = ?",
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
        keys = ("watch_paths", "ignore_patterns", "allowed_extensions", "blocked_extensions",
                "max_file_size_mb", "follow_symlinks")
        values = [snapshot.get(k) for k in keys]
        with self._transaction() as cur:
            row = _first(cur.execute(f"SELECT {', '.join(keys)} FROM project_config "
                                     "WHERE config_id = 1"))
            if row is not None and list(row) == values:
                return False
            cur.execute("DELETE FROM project_config WHERE config_id = 1")
            cur.execute(f"INSERT INTO project_config (config_id, {', '.join(keys)}) "
                        f"VALUES (1, {', '.join('?' * len(keys))})", values)
            return row is not None

    def stats(self) -> dict[str, Any]:
        cur = self._cursor()
        files, redacted, last = _first(cur.execute(
            "SELECT count(*), coalesce(sum(secrets_redacted), 0), max(indexed_at) "
            "FROM file_state"))
        chunks, contextualized = _first(cur.execute(
            "SELECT count(*), count(*) FILTER (WHERE contextualized) FROM chunks"))
        by_model = dict(cur.execute(
            """SELECT e.model, count(*) FROM chunks c JOIN embeddings e
               ON e.text_hash = c.embed_hash GROUP BY e.model""").fetchall())
        languages = dict(cur.execute(
            "SELECT coalesce(language, 'unknown'), count(*) FROM chunks GROUP BY 1 "
            "ORDER BY 2 DESC").fetchall())
        usage = _first(cur.execute(
            "SELECT count(*), avg(query_latency_ms), avg(context_tokens) FROM usage_metrics"
        ))
        errors = _first(cur.execute("SELECT count(*) FROM bootstrap_errors"))[0]
        size = Path(self.path).stat().st_size if self.path != ":memory:" else 0
        return {
            "total_files": files, "total_chunks": chunks, "embeddings_by_model": by_model,
            "contextualized_chunks": contextualized, "languages": languages,
            "db_size_mb": round(size / 2**20, 2), "last_indexed": _iso(last),
            "secrets_redacted": int(redacted), "errors": errors,
            "queries": usage[0], "avg_query_latency_ms": usage[1],
            "avg_tokens_per_query": usage[2], "generation": self.generation(),
        }

    def snapshot(self, destination: str) -> None:
        # COPY FROM DATABASE reads one MVCC snapshot: consistent without the write lock, so
        # writers are not held while it runs (benchmarks/bench_service.py --backup).
        cur = self._con.cursor()
        alias = f"snapshot_{uuid.uuid4().hex[:12]}"
        try:
            source = _first(cur.execute("SELECT current_database()"))[0]
            cur.execute(f"ATTACH ? AS {alias}", [destination])
            try:
                cur.execute(f'COPY FROM DATABASE "{source}" TO {alias}')
            finally:
                cur.execute(f"DETACH {alias}")
        finally:
            cur.close()

    def vacuum(self) -> None:
        with self._write_lock:
            # FORCE: other threads' cursors may hold a finished read open, which a plain
            # CHECKPOINT refuses to wait for.
            self._cursor().execute("FORCE CHECKPOINT")
            self._cursor().execute("VACUUM")

    def close(self) -> None:
        with self._write_lock:
            if not self.read_only:
                self._con.execute("CHECKPOINT")
            for cur in self._cursors:
                cur.close()
            self._cursors.clear()
            self._local = threading.local()
            self._con.close()
            if self._counter_key is not None:
                _GenerationCounter.release(self._counter_key)
                self._counter_key = self._counter = None
