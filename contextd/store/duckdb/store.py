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
import os
import threading
import time
import uuid
from importlib import resources
from pathlib import Path
from typing import Any, Iterator

import duckdb

from contextd.errors import StoreError
from contextd.store.base import KNOWLEDGE_PREFIX, IndexStore
from contextd.store.disk_faults import check_room, disk_fault
from contextd.store.duckdb.contents import ContentsMixin
from contextd.store.duckdb.knowledge import KnowledgeMixin
from contextd.store.duckdb.operations import OperationsMixin
from contextd.store.duckdb.reports import ReportsMixin
from contextd.store.duckdb.sessions import SearchSessionsMixin
from contextd.store.duckdb.skips import SkipsMixin
from contextd.store.duckdb.sql import first_row, iso
from contextd.store.duckdb.stash import StashMixin
from contextd.store.duckdb.usage import UsageMixin
from contextd.store.duckdb.vectors import VectorsMixin


SCHEMA_VERSION = 13


def _sql_resource(name: str) -> str:
    return resources.files("contextd").joinpath(name).read_text(encoding="utf-8")


def _migrations() -> list[tuple[int, str]]:
    folder = resources.files("contextd").joinpath("migrations")
    found = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            found.append((int(entry.name.split("_", 1)[0]), entry.read_text(encoding="utf-8")))
    return sorted(found)


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


# How long close() waits for long reads in flight (loading 100k vectors takes ~0.5 s, a
# backup of a large index longer) before closing anyway.
CLOSE_WAIT_S = 60.0


class DuckDBStore(ContentsMixin, VectorsMixin, StashMixin, KnowledgeMixin, ReportsMixin,
                  OperationsMixin, SearchSessionsMixin, SkipsMixin, UsageMixin, IndexStore):
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
        row = first_row(self._con.execute("SELECT max(version) FROM schema_version"))
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
        row = first_row(cur.execute("SELECT value FROM index_meta WHERE key = 'generation'"))
        gen = int(row[0]) + 1 if row else 1
        cur.execute("DELETE FROM index_meta WHERE key = 'generation'")
        cur.execute("INSERT INTO index_meta VALUES ('generation', ?)", [str(gen)])
        self._local.bumped = gen
        return gen

    # ----- reading for providers -------------------------------------------------------
    def generation(self) -> int:
        if self._counter is not None:
            return self._counter.value
        return self._stored_generation()

    def _stored_generation(self) -> int:
        """The generation as committed in index_meta (a database round trip)."""
        row = first_row(self._cursor().execute(
            "SELECT value FROM index_meta WHERE key = 'generation'"))
        return int(row[0]) if row else 0

    # ----- metrics, metadata, prefixes, config -------------------------------------------

    def stats(self) -> dict[str, Any]:
        cur = self._cursor()
        files, redacted, last = first_row(cur.execute(
            "SELECT count(*), coalesce(sum(secrets_redacted), 0), max(indexed_at) "
            "FROM file_state WHERE NOT starts_with(path, ?)", [KNOWLEDGE_PREFIX]))
        documents, document_chunks = first_row(cur.execute(
            "SELECT count(*), coalesce(sum(chunk_count), 0) FROM file_state "
            "WHERE starts_with(path, ?)", [KNOWLEDGE_PREFIX]))
        chunks, contextualized = first_row(cur.execute(
            "SELECT count(*), count(*) FILTER (WHERE contextualized) FROM chunks"))
        by_model = dict(cur.execute(
            """SELECT e.model, count(*) FROM chunks c JOIN embeddings e
               ON e.text_hash = c.embed_hash GROUP BY e.model""").fetchall())
        languages = dict(cur.execute(
            "SELECT coalesce(language, 'unknown'), count(*) FROM chunks GROUP BY 1 "
            "ORDER BY 2 DESC").fetchall())
        usage = first_row(cur.execute(
            "SELECT count(*), avg(query_latency_ms), avg(context_tokens) FROM usage_metrics"
        ))
        errors = first_row(cur.execute("SELECT count(*) FROM bootstrap_errors"))[0]
        skipped = dict(cur.execute("SELECT reason, count(*) FROM skipped_files GROUP BY 1 "
                                   "ORDER BY 2 DESC, 1").fetchall())
        size = Path(self.path).stat().st_size if self.path != ":memory:" else 0
        return {
            "total_files": files, "total_chunks": chunks - document_chunks,
            "knowledge_documents": documents, "knowledge_chunks": int(document_chunks),
            "embeddings_by_model": by_model,
            "contextualized_chunks": contextualized, "languages": languages,
            "db_size_mb": round(size / 2**20, 2), "last_indexed": iso(last),
            "secrets_redacted": int(redacted), "errors": errors, "skipped": skipped,
            "queries": usage[0], "avg_query_latency_ms": usage[1],
            "avg_tokens_per_query": usage[2], "generation": self.generation(),
        }

    def snapshot(self, destination: str) -> None:
        # COPY FROM DATABASE reads one MVCC snapshot: consistent without the write lock, so
        # writers are not held while it runs (benchmarks/bench_service.py --backup).
        alias = f"snapshot_{uuid.uuid4().hex[:12]}"
        with self._own_cursor() as cur:
            source = first_row(cur.execute("SELECT current_database()"))[0]
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

    def check_room_to_rewrite(self, share: float, what: str) -> None:
        if self.path == ":memory:":
            return
        # Rows written again go through the write-ahead log first, then into the file:
        # about as many bytes as they take now (the file and a log not checkpointed yet).
        files = [Path(self.path), Path(self.path + ".wal")]
        written = sum(f.stat().st_size for f in files if f.exists())
        check_room(self.path, int(written * min(1.0, share)), what)

    def limit_memory(self, megabytes: int) -> None:
        """Cap DuckDB's buffer pool (by default 80% of the machine's memory, which a scan of
        the embeddings table fills and keeps): beyond it DuckDB evicts, or spills to its
        temporary directory, instead of growing the process."""
        self._con.execute(f"SET memory_limit = '{int(megabytes)}MB'")

    def close(self) -> None:
        with self._reads_done:
            self._closing = True
            self._reads_done.wait_for(lambda: self._reads == 0, timeout=CLOSE_WAIT_S)
        failed: Exception | None = None
        with self._write_lock:
            if not self.read_only:
                try:
                    self._con.execute("CHECKPOINT")
                except duckdb.Error as exc:
                    # A full disk: what was committed stays in the write-ahead log, which
                    # the next open replays. The connection is closed all the same, and the
                    # fault named once everything is let go.
                    failed = exc
            # After a failed checkpoint DuckDB may refuse everything ("invalidated").
            let_go = contextlib.suppress(duckdb.Error) if failed else contextlib.nullcontext()
            for cur in self._cursors:
                with let_go:
                    _close_when_idle(cur)
            self._cursors.clear()
            self._local = threading.local()
            with let_go:
                self._con.close()
            if self._counter_key is not None:
                _GenerationCounter.release(self._counter_key)
                self._counter_key = self._counter = None
        if failed is not None:
            raise disk_fault(failed, self.path) or StoreError(
                f"could not close the index {self.path}: {failed}") from failed


def _close_when_idle(cur: duckdb.DuckDBPyConnection) -> None:
    """Close a thread's cursor, waiting (up to CLOSE_WAIT_S) for a call another thread still
    runs on it: DuckDB refuses to close a busy cursor, and a module shut down while its
    warm-up reads the texts of a BM25 build a batch at a time finds one busy for a few ms."""
    deadline = time.monotonic() + CLOSE_WAIT_S
    while True:
        try:
            cur.close()
            return
        except duckdb.ResourceInUseException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.005)
