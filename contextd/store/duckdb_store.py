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

import duckdb
import numpy as np
import pyarrow as pa

from contextd.errors import StoreError
from contextd.store.base import (
    KNOWLEDGE_PREFIX, Changes, ChunkRow, DocumentRecord, FileRecord, FileState, IndexStore,
    Job, KnowledgeDocument, SegmentRow, SkippedFile, StoredSearchSession,
)
from contextd.store.rows import (
    JOB_FIELDS, PROJECT_CONFIG_KEYS, SEGMENT_COLUMNS, TRANSFER_COLUMNS, complete_usage_rows,
    job_assignments, job_from_row, record_columns, renumber_files, summarise_usage,
)
from contextd.store.rows import text_hash  # noqa: F401  (re-exported: callers import it here)

SCHEMA_VERSION = 10

_CHUNK_ROW_SQL = """
    SELECT c.chunk_id, c.file_id, f.path, c.ordinal, c.kind, coalesce(c.label, ''),
           coalesce(c.language, ''), c.start_line, c.end_line, c.tokens_est, c.text,
           coalesce(c.index_text, c.text), c.embed_hash, coalesce(c.parent, '')
    FROM chunks c JOIN file_state f USING (file_id)
"""


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


def _list_array(vectors: np.ndarray) -> pa.ListArray:
    """Rows of a matrix as an Arrow list column, without a Python list per row."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    flat = pa.array(vectors.ravel())
    return pa.ListArray.from_arrays(
        pa.array(np.arange(0, vectors.size + 1, vectors.shape[1], dtype=np.int32)), flat)


def _first(result: duckdb.DuckDBPyConnection) -> tuple | None:
    """The first row of a result, read to its end. DuckDB keeps a half-read result (and its
    transaction) open on the cursor: it makes CHECKPOINT wait for ever and the cursor refuse
    other work."""
    rows = result.fetchall()
    return rows[0] if rows else None


# How long close() waits for long reads in flight (loading 100k vectors takes ~0.5 s, a
# backup of a large index longer) before closing anyway.
CLOSE_WAIT_S = 60.0


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
        # Long reads on cursors of their own (Arrow results, snapshots) in flight: close()
        # waits for them, since DuckDB refuses to close a connection while one runs and
        # leaves it half closed ("connection is busy with another call").
        self._reads = 0
        self._reads_done = threading.Condition()
        self._closing = False
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

    @contextlib.contextmanager
    def _own_cursor(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A cursor of its own for one long read, counted so that close() waits for it."""
        with self._reads_done:
            if self._closing:
                raise StoreError(f"the index {self.path} is closing")
            self._reads += 1
        try:
            with self._con.cursor() as cur:
                yield cur
        finally:
            with self._reads_done:
                self._reads -= 1
                self._reads_done.notify_all()

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
        for table, columns in record_columns(records, ids, gen).items():
            self._insert(cur, table, columns)

    @staticmethod
    def _insert(cur: duckdb.DuckDBPyConnection, table: str, columns: dict[str, list]) -> None:
        if not next(iter(columns.values())):
            return
        DuckDBStore._insert_arrow(cur, table, pa.table(columns))

    @staticmethod
    def _insert_arrow(cur: duckdb.DuckDBPyConnection, table: str, arrow: pa.Table) -> None:
        """Insert an Arrow table (~24k rows/s, where executemany manages ~580)."""
        name = f"_incoming_{table}"
        cur.register(name, arrow)
        try:
            cols = ", ".join(arrow.column_names)
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
        else:
            sql += " WHERE NOT starts_with(path, ?)"
            params.append(KNOWLEDGE_PREFIX)
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
               GROUP BY c.embed_hash ORDER BY min(c.file_id), c.embed_hash LIMIT ?""",
            [model, limit]).fetchall()

    def count_missing_embeddings(self, model: str) -> int:
        return _first(self._cursor().execute(
            """SELECT count(DISTINCT c.embed_hash) FROM chunks c
               ANTI JOIN (SELECT text_hash FROM embeddings WHERE model = ?) e
               ON c.embed_hash = e.text_hash""", [model]))[0]

    def put_embeddings(self, model: str, hashes: Sequence[str], vectors: np.ndarray) -> int:
        if len(hashes) == 0:
            return self.generation()
        arrow = pa.table({"text_hash": pa.array(list(hashes)), "vector": _list_array(vectors)})
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
            cur.execute("""DELETE FROM embeddings WHERE model <> ? OR (
                           text_hash NOT IN (SELECT embed_hash FROM chunks)
                           AND text_hash NOT IN (SELECT text_hash FROM stash_segments))""",
                        [keep_model])
            after = _first(cur.execute("SELECT count(*) FROM embeddings"))[0]
        return before - after

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
                                                 "vector": _list_array(matrix)})
        return len(files)

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
        with self._own_cursor() as cur:
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

    # ----- agent memory ----------------------------------------------------------------
    def put_segments(self, rows: Sequence[SegmentRow]) -> None:
        if not rows:
            return
        columns = {name: [] for name in SEGMENT_COLUMNS}
        for row in rows:
            for name, value in zip(SEGMENT_COLUMNS, (
                    row.segment_id, row.session_id, row.text, row.segment_type, row.created_at,
                    row.stashed_at, row.tokens, row.topic, row.source, list(row.references),
                    row.text_hash, row.embedding_model, row.expires_at, row.protected)):
                columns[name].append(value)
        arrow = pa.table({**columns,
                          "refs": pa.array(columns["refs"], type=pa.list_(pa.string())),
                          "expires_at": pa.array(columns["expires_at"],
                                                 type=pa.timestamp("us"))})
        with self._transaction() as cur:
            self._insert_arrow(cur, "stash_segments", arrow)

    def segments(self, segment_ids: Sequence[str] | None = None) -> list[SegmentRow]:
        sql, params = f"SELECT {', '.join(SEGMENT_COLUMNS)} FROM stash_segments", []
        if segment_ids is not None:
            sql += " WHERE segment_id IN (SELECT unnest(?))"
            params.append(list(segment_ids))
        sql += " ORDER BY stashed_at, segment_id"
        # Through Arrow, column by column: ~3x faster than fetchall at 100k segments.
        with self._own_cursor() as cur:
            table = cur.sql(sql, params=params).to_arrow_table()
        columns = [table.column(name).to_pylist() for name in SEGMENT_COLUMNS]
        return [SegmentRow(*row[:9], tuple(row[9] or ()), *row[10:]) for row in zip(*columns)]

    def count_segments(self) -> int:
        return _first(self._cursor().execute("SELECT count(*) FROM stash_segments"))[0]

    def delete_segments(self, segment_ids: Sequence[str]) -> int:
        with self._transaction() as cur:
            found = _first(cur.execute(
                "SELECT count(*) FROM stash_segments WHERE segment_id IN (SELECT unnest(?))",
                [list(segment_ids)]))[0]
            cur.execute("DELETE FROM stash_segments WHERE segment_id IN (SELECT unnest(?))",
                        [list(segment_ids)])
        return found

    def protect_segments(self, segment_ids: Sequence[str], protected: bool) -> int:
        with self._transaction() as cur:
            found = _first(cur.execute(
                "SELECT count(*) FROM stash_segments WHERE segment_id IN (SELECT unnest(?))",
                [list(segment_ids)]))[0]
            cur.execute("UPDATE stash_segments SET protected = ? "
                        "WHERE segment_id IN (SELECT unnest(?))", [protected, list(segment_ids)])
        return found

    def set_segment_model(self, segment_ids: Sequence[str], model: str) -> None:
        with self._transaction() as cur:
            cur.execute("UPDATE stash_segments SET embedding_model = ? "
                        "WHERE segment_id IN (SELECT unnest(?))", [model, list(segment_ids)])

    def segment_vectors(self, model: str) -> tuple[list[str], np.ndarray]:
        with self._own_cursor() as cur:
            table = cur.sql("SELECT s.segment_id, e.vector FROM stash_segments s "
                            "JOIN embeddings e ON e.text_hash = s.text_hash AND e.model = ?",
                            params=[model]).to_arrow_table()
        ids = table.column("segment_id").to_pylist()
        if not ids:
            return [], np.zeros((0, 0), dtype=np.float32)
        flat = table.column("vector").combine_chunks().flatten().to_numpy()
        return ids, flat.reshape(len(ids), -1).astype(np.float32, copy=False)
    # ----- knowledge base ----------------------------------------------------------------
    def kb_contexts(self, name: str | None = None) -> list[dict[str, Any]]:
        cur = self._cursor().execute(
            f"""SELECT c.name, c.display_name, c.description, c.created_at, c.updated_at,
                       count(f.file_id) AS documents,
                       coalesce(sum(f.chunk_count), 0) AS chunks,
                       coalesce(sum(f.size_bytes), 0) AS size_bytes
                FROM kb_contexts c
                LEFT JOIN kb_memberships m ON m.context = c.name
                LEFT JOIN file_state f ON f.path = m.path
                {"WHERE c.name = ?" if name is not None else ""}
                GROUP BY ALL ORDER BY c.name""", [name] if name is not None else [])
        names = [d[0] for d in cur.description]
        return [{k: _iso(v) for k, v in zip(names, row)} for row in cur.fetchall()]

    def kb_create_context(self, name: str, display_name: str, description: str) -> bool:
        with self._transaction() as cur:
            if _first(cur.execute("SELECT 1 FROM kb_contexts WHERE name = ?", [name])):
                return False
            cur.execute("INSERT INTO kb_contexts (name, display_name, description) "
                        "VALUES (?, ?, ?)", [name, display_name, description])
            self._bump_generation(cur)  # cached scopes learn the name
            return True

    def kb_delete_context(self, name: str) -> list[str]:
        with self._transaction() as cur:
            paths = [r[0] for r in cur.execute(
                "SELECT path FROM kb_memberships WHERE context = ?", [name]).fetchall()]
            cur.execute("DELETE FROM kb_contexts WHERE name = ?", [name])
            self._bump_generation(cur)
            return self._kb_unlink(cur, paths, [name])[1]

    def kb_documents(self, context: str | None = None,
                     paths: Sequence[str] | None = None) -> list[dict[str, Any]]:
        where, params = [], []
        if context is not None:
            where.append("d.path IN (SELECT path FROM kb_memberships WHERE context = ?)")
            params.append(context)
        if paths is not None:
            where.append("d.path IN (SELECT unnest(?))")
            params.append(list(paths))
        cur = self._cursor().execute(
            f"""SELECT d.path, d.source, d.format, len(d.page_starts) AS pages, d.title,
                       f.size_bytes, f.chunk_count AS chunks, f.content_hash,
                       f.secrets_redacted,
                       list(m.context ORDER BY m.context) FILTER (m.context IS NOT NULL)
                           AS contexts,
                       d.added_at, d.updated_at
                FROM kb_documents d JOIN file_state f ON f.path = d.path
                LEFT JOIN kb_memberships m ON m.path = d.path
                {"WHERE " + " AND ".join(where) if where else ""}
                GROUP BY ALL ORDER BY d.path""", params)
        names = [d[0] for d in cur.description]
        return [{k: _iso(v) for k, v in zip(names, row)} for row in cur.fetchall()]

    def kb_write_documents(self, documents: Sequence[DocumentRecord],
                           contexts: Sequence[str]) -> int:
        if not documents:
            return self.generation()
        paths = [d.file.path for d in documents]
        with self._transaction() as cur:
            gen = self.write_files([d.file for d in documents])
            added = dict(cur.execute("SELECT path, added_at FROM kb_documents "
                                     "WHERE path IN (SELECT unnest(?))", [paths]).fetchall())
            cur.execute("DELETE FROM kb_documents WHERE path IN (SELECT unnest(?))", [paths])
            now = datetime.now()
            self._insert(cur, "kb_documents", {
                "path": paths, "source": [d.source for d in documents],
                "format": [d.format for d in documents],
                "page_starts": [list(d.page_starts) or None for d in documents],
                "title": [d.title for d in documents],
                "added_at": [added.get(p, now) for p in paths],
                "updated_at": [now] * len(paths)})
            self._kb_link(cur, paths, contexts)
        return gen

    def kb_link(self, paths: Sequence[str], contexts: Sequence[str]) -> int:
        with self._transaction() as cur:
            return self._kb_link(cur, paths, contexts)

    def _kb_link(self, cur: duckdb.DuckDBPyConnection, paths: Sequence[str],
                 contexts: Sequence[str]) -> int:
        pairs = [(c, p) for c in dict.fromkeys(contexts) for p in dict.fromkeys(paths)]
        existing = set(cur.execute(
            "SELECT context, path FROM kb_memberships WHERE path IN (SELECT unnest(?))",
            [list(paths)]).fetchall())
        new = [pair for pair in pairs if pair not in existing]
        if new:
            self._bump_generation(cur)
            self._insert(cur, "kb_memberships", {"context": [c for c, _ in new],
                                                 "path": [p for _, p in new]})
        self._kb_touch(cur, contexts)
        return len(new)

    def kb_unlink(self, paths: Sequence[str], contexts: Sequence[str] | None
                  ) -> tuple[int, list[str]]:
        with self._transaction() as cur:
            return self._kb_unlink(cur, paths, contexts)

    def _kb_unlink(self, cur: duckdb.DuckDBPyConnection, paths: Sequence[str],
                   contexts: Sequence[str] | None) -> tuple[int, list[str]]:
        if not paths:
            return 0, []
        where = "path IN (SELECT unnest(?))"
        params: list[Any] = [list(paths)]
        if contexts is not None:
            where += " AND context IN (SELECT unnest(?))"
            params.append(list(contexts))
        removed = _first(cur.execute(f"SELECT count(*) FROM kb_memberships WHERE {where}",
                                     params))[0]
        cur.execute(f"DELETE FROM kb_memberships WHERE {where}", params)
        orphans = [r[0] for r in cur.execute(
            """SELECT path FROM kb_documents WHERE path IN (SELECT unnest(?))
               AND path NOT IN (SELECT path FROM kb_memberships) ORDER BY path""",
            [list(paths)]).fetchall()]
        if orphans:
            cur.execute("DELETE FROM kb_documents WHERE path IN (SELECT unnest(?))", [orphans])
            self.delete_files(orphans)
        if removed and not orphans:
            self._bump_generation(cur)
        self._kb_touch(cur, contexts)
        return removed, orphans

    @staticmethod
    def _kb_touch(cur: duckdb.DuckDBPyConnection, contexts: Sequence[str] | None) -> None:
        if contexts:
            cur.execute("UPDATE kb_contexts SET updated_at = now() "
                        "WHERE name IN (SELECT unnest(?))", [list(contexts)])

    def kb_document_map(self) -> dict[str, KnowledgeDocument]:
        rows = self._cursor().execute(
            """SELECT d.path, d.source, d.format, d.page_starts,
                      list(m.context ORDER BY m.context) FILTER (m.context IS NOT NULL)
               FROM kb_documents d LEFT JOIN kb_memberships m ON m.path = d.path
               GROUP BY ALL""").fetchall()
        return {path: KnowledgeDocument(path, source, fmt, tuple(pages or ()),
                                        tuple(contexts or ()))
                for path, source, fmt, pages, contexts in rows}

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

    # ----- search sessions -------------------------------------------------------------
    def put_search_session(self, session: StoredSearchSession) -> None:
        with self._transaction() as cur:
            cur.execute("""INSERT INTO search_sessions (session_id, query, created_at, params,
                           result_count, results) VALUES (?, ?, ?, ?, ?, ?)""",
                        [session.session_id, session.query, session.created_at,
                         json.dumps(session.params), session.result_count,
                         json.dumps(list(session.results), ensure_ascii=False)])

    def get_search_sessions(self, session_ids: Sequence[str]) -> dict[str, StoredSearchSession]:
        rows = self._cursor().execute(
            """SELECT session_id, query, created_at, params, result_count, results
               FROM search_sessions WHERE session_id IN (SELECT unnest(?))""",
            [list(session_ids)]).fetchall()
        return {r[0]: StoredSearchSession(r[0], r[1], r[2], json.loads(r[3] or "{}"), r[4],
                                          tuple(json.loads(r[5])))
                for r in rows}

    def list_search_sessions(self, limit: int = 100) -> list[StoredSearchSession]:
        rows = self._cursor().execute(
            """SELECT session_id, query, created_at, params, result_count
               FROM search_sessions ORDER BY created_at DESC, session_id LIMIT ?""",
            [limit]).fetchall()
        return [StoredSearchSession(r[0], r[1], r[2], json.loads(r[3] or "{}"), r[4])
                for r in rows]

    def prune_search_sessions(self, keep: int, created_before: datetime | None = None) -> int:
        with self._transaction() as cur:
            before = _first(cur.execute("SELECT count(*) FROM search_sessions"))[0]
            cur.execute("""DELETE FROM search_sessions WHERE session_id NOT IN (
                               SELECT session_id FROM search_sessions
                               ORDER BY created_at DESC, session_id LIMIT ?)""", [keep])
            if created_before is not None:
                cur.execute("DELETE FROM search_sessions WHERE created_at < ?",
                            [created_before])
            after = _first(cur.execute("SELECT count(*) FROM search_sessions"))[0]
        return before - after

    def replace_skips(self, skips: Sequence[SkippedFile], reasons: Sequence[str],
                      prefixes: Sequence[str] | None = None) -> None:
        with self._transaction() as cur:
            where, params = "reason IN (SELECT unnest(?))", [list(reasons)]
            if prefixes is not None:
                where += " AND (" + " OR ".join(
                    "path = ? OR starts_with(path, ?)" for _ in prefixes) + ")"
                for prefix in prefixes:
                    params += [prefix, prefix.rstrip("/") + "/"]
            cur.execute(f"DELETE FROM skipped_files WHERE {where}", params)
            if skips:
                cur.executemany("INSERT INTO skipped_files (path, reason, detail, size_bytes, "
                                "mtime_ns) VALUES (?, ?, ?, ?, ?)",
                                [(s.path, s.reason, s.detail, s.size_bytes, s.mtime_ns)
                                 for s in skips])

    def list_skips(self, path: str | None = None, limit: int = 100) -> list[SkippedFile]:
        sql = "SELECT path, reason, detail, size_bytes, mtime_ns FROM skipped_files"
        params: list[Any] = []
        if path is not None:
            sql += " WHERE path = ?"
            params.append(path)
        rows = self._cursor().execute(sql + " ORDER BY path, reason LIMIT ?",
                                      params + [limit]).fetchall()
        return [SkippedFile(*row) for row in rows]

    # ----- metrics, metadata, prefixes, config -------------------------------------------
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
        totals = _first(cur.execute(
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
        keys = PROJECT_CONFIG_KEYS
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
            "FROM file_state WHERE NOT starts_with(path, ?)", [KNOWLEDGE_PREFIX]))
        documents, document_chunks = _first(cur.execute(
            "SELECT count(*), coalesce(sum(chunk_count), 0) FROM file_state "
            "WHERE starts_with(path, ?)", [KNOWLEDGE_PREFIX]))
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
        skipped = dict(cur.execute("SELECT reason, count(*) FROM skipped_files GROUP BY 1 "
                                   "ORDER BY 2 DESC, 1").fetchall())
        size = Path(self.path).stat().st_size if self.path != ":memory:" else 0
        return {
            "total_files": files, "total_chunks": chunks - document_chunks,
            "knowledge_documents": documents, "knowledge_chunks": int(document_chunks),
            "embeddings_by_model": by_model,
            "contextualized_chunks": contextualized, "languages": languages,
            "db_size_mb": round(size / 2**20, 2), "last_indexed": _iso(last),
            "secrets_redacted": int(redacted), "errors": errors, "skipped": skipped,
            "queries": usage[0], "avg_query_latency_ms": usage[1],
            "avg_tokens_per_query": usage[2], "generation": self.generation(),
        }

    def snapshot(self, destination: str) -> None:
        # COPY FROM DATABASE reads one MVCC snapshot: consistent without the write lock, so
        # writers are not held while it runs (benchmarks/bench_service.py --backup).
        alias = f"snapshot_{uuid.uuid4().hex[:12]}"
        with self._own_cursor() as cur:
            source = _first(cur.execute("SELECT current_database()"))[0]
            cur.execute(f"ATTACH ? AS {alias}", [destination])
            try:
                cur.execute(f'COPY FROM DATABASE "{source}" TO {alias}')
            finally:
                cur.execute(f"DETACH {alias}")

    def vacuum(self) -> None:
        with self._write_lock:
            # FORCE: other threads' cursors may hold a finished read open, which a plain
            # CHECKPOINT refuses to wait for.
            self._cursor().execute("FORCE CHECKPOINT")
            self._cursor().execute("VACUUM")

    def close(self) -> None:
        with self._reads_done:
            self._closing = True
            self._reads_done.wait_for(lambda: self._reads == 0, timeout=CLOSE_WAIT_S)
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
