"""The store interface: everything the rest of contextd may ask of the index database.

Only store modules speak SQL. DuckDB (:mod:`contextd.store.duckdb_store`) is the embedded
default; a PostgreSQL + pgvector backend for teams would be another implementation of
:class:`IndexStore`, not a rewrite of its callers.
"""

from __future__ import annotations

import abc
import contextlib
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np

from contextd.records import Chunk


@dataclass(frozen=True)
class IndexedChunk:
    """A chunk ready to store: ``chunk.text`` is what users see (already scrubbed),
    ``index_text`` what gets embedded and BM25-indexed (contextual prefix + text)."""

    chunk: Chunk
    index_text: str
    contextualized: bool = False


@dataclass(frozen=True)
class FileRecord:
    """Everything the index holds about one file; written atomically by write_files."""

    path: str
    size_bytes: int
    mtime_ns: int
    content_hash: str
    language: str | None
    chunks: Sequence[IndexedChunk]
    warnings: Sequence[str] = ()
    secrets_redacted: int = 0


@dataclass(frozen=True)
class FileState:
    """The change-detection fingerprint of an indexed file."""

    file_id: int
    path: str
    size_bytes: int
    mtime_ns: int
    content_hash: str


@dataclass(frozen=True)
class ChunkRow:
    """A stored chunk as providers read it."""

    chunk_id: str
    file_id: int
    file_path: str
    ordinal: int
    kind: str
    label: str
    language: str
    start_line: int
    end_line: int
    tokens: int
    text: str
    index_text: str
    embed_hash: str
    parent: str


@dataclass(frozen=True)
class Changes:
    """What changed since a generation: files re-written and files removed (by file_id)."""

    generation: int
    changed_file_ids: tuple[int, ...]
    removed_file_ids: tuple[int, ...]


@dataclass
class Job:
    """A tracked long-running operation (rebuild, refresh, bootstrap)."""

    job_id: str
    job_type: str
    status: str
    scope: str | None = None
    files_total: int | None = None
    files_processed: int = 0
    chunks_processed: int = 0
    current_file: str | None = None
    started_at: str | None = None
    updated_at: str | None = None
    completed_at: str | None = None
    error_message: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    created_by: str | None = None
    cancel_requested: bool = False


class IndexStore(abc.ABC):
    """The index database. Methods are thread-safe; writes are serialised."""

    # ----- index contents -------------------------------------------------------------
    @abc.abstractmethod
    def batch(self) -> contextlib.AbstractContextManager:
        """Run the writes made inside (by this thread) as ONE transaction: the indexer stores
        a batch of files together with their progress and error rows, atomically and at the
        cost of one commit. Nested calls join the outer transaction."""

    @abc.abstractmethod
    def write_files(self, records: Sequence[FileRecord]) -> int:
        """Replace the rows of each file (file_state, chunks, symbols, links) in ONE
        transaction: a reader sees the old version of every file or the new one, never a mix.
        Returns the new generation."""

    @abc.abstractmethod
    def delete_files(self, paths: Iterable[str]) -> int:
        """Remove files and all their rows in one transaction; returns how many existed."""

    @abc.abstractmethod
    def update_file_stats(self, rows: Sequence[tuple[str, int, int]]) -> None:
        """Record a new (path, size_bytes, mtime_ns) for files whose content hash did not
        change (a touch, a checkout that restored the same bytes), so the size+mtime fast path
        recognises them next time. Changes no content and bumps no generation."""

    @abc.abstractmethod
    def file_states(self, prefix: str | None = None) -> dict[str, FileState]:
        """Fingerprints of indexed files by path (optionally under a path prefix)."""

    @abc.abstractmethod
    def clear_index(self, path_prefixes: Sequence[str] | None = None) -> int:
        """Drop indexed files (all, or those under the prefixes); vectors stay as a cache."""

    # ----- embeddings (the table is the cache: keyed by model identity + text hash) ------
    @abc.abstractmethod
    def missing_embeddings(self, model: str, limit: int) -> list[tuple[str, str]]:
        """Up to ``limit`` distinct (embed_hash, index_text) of stored chunks without a vector
        for ``model``."""

    @abc.abstractmethod
    def put_embeddings(self, model: str, hashes: Sequence[str], vectors: np.ndarray) -> int:
        """Store vectors (ignoring ones already present); returns the new generation."""

    @abc.abstractmethod
    def count_missing_embeddings(self, model: str) -> int:
        """How many stored chunks still lack a vector for ``model``."""

    @abc.abstractmethod
    def prune_embeddings(self, keep_model: str) -> int:
        """Delete vectors no current chunk uses, and all vectors of other models."""

    # ----- reading for providers ----------------------------------------------------------
    @abc.abstractmethod
    def generation(self) -> int:
        """A counter bumped by every write; in-memory indexes compare it to stay fresh.
        Called once per query, so it should not cost a database round trip."""

    @abc.abstractmethod
    def changes_since(self, generation: int) -> Changes:
        """Files written or removed after ``generation``."""

    @abc.abstractmethod
    def chunks_for_files(self, file_ids: Sequence[int] | None = None) -> list[ChunkRow]:
        """Stored chunks of the given files (None: every chunk), in file and ordinal order."""

    @abc.abstractmethod
    def chunks_by_id(self, chunk_ids: Sequence[str]) -> dict[str, ChunkRow]:
        """Stored chunks by id (missing ids are left out)."""

    @abc.abstractmethod
    def vectors_for(self, model: str, embed_hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """Vectors for the given text hashes under ``model``."""

    @abc.abstractmethod
    def find_symbols(self, names_lower: Sequence[str], prefixes_lower: Sequence[str] = ()
                     ) -> list[tuple[str, str, str, int]]:
        """Definitions whose qualified or short name equals one of ``names_lower`` or starts
        with one of ``prefixes_lower``: (chunk_id, name, kind, line)."""

    @abc.abstractmethod
    def find_references(self, targets_lower: Sequence[str]) -> list[tuple[str, str]]:
        """Chunks referencing one of the names: (src_chunk_id, target)."""

    @abc.abstractmethod
    def symbols_for_files(self, file_ids: Sequence[int] | None = None
                          ) -> list[tuple[int, str, str, str, int]]:
        """Definitions of the given files (None: all): (file_id, chunk_id, name, kind, line)."""

    @abc.abstractmethod
    def links_for_files(self, file_ids: Sequence[int] | None = None
                        ) -> list[tuple[int, str, str]]:
        """Distinct references made by chunks of the given files (None: all):
        (file_id, src_chunk_id, target)."""

    # ----- jobs, progress, errors, metrics, metadata ----------------------------------
    @abc.abstractmethod
    def create_job(self, job_type: str, scope: str, files_total: int | None,
                   created_by: str, params: dict[str, Any] | None = None,
                   status: str = "queued") -> Job:
        """Record a new job."""

    @abc.abstractmethod
    def update_job(self, job_id: str, **fields: Any) -> None:
        """Update job fields (status, files_processed, chunks_processed, current_file,
        files_total, error_message, metrics, completed_at='now', cancel_requested)."""

    @abc.abstractmethod
    def get_job(self, job_id: str) -> Job | None:
        """One job, or None."""

    @abc.abstractmethod
    def list_jobs(self, statuses: Sequence[str] = (), limit: int = 20) -> list[Job]:
        """Recent jobs, newest first, optionally with one of ``statuses``."""

    @abc.abstractmethod
    def progress_begin(self, job_id: str, paths: Sequence[str]) -> None:
        """Replace bootstrap_progress with ``paths`` as pending."""

    @abc.abstractmethod
    def progress_mark(self, paths: Sequence[str], status: str, error: str | None = None
                      ) -> None:
        """Set the status of progress rows."""

    @abc.abstractmethod
    def progress_pending(self) -> tuple[str | None, list[str]]:
        """(job_id, paths not completed) of an interrupted bootstrap; (None, []) if none."""

    @abc.abstractmethod
    def progress_clear(self) -> None:
        """Forget bootstrap progress (the bootstrap finished)."""

    @abc.abstractmethod
    def record_error(self, path: str, error_type: str, message: str,
                     stack_trace: str | None = None) -> None:
        """Log a file that failed to index (retry count grows on repeats)."""

    @abc.abstractmethod
    def clear_errors(self, paths: Sequence[str] | None = None) -> None:
        """Forget failures (all, or of these paths)."""

    @abc.abstractmethod
    def list_errors(self, limit: int = 100) -> list[dict[str, Any]]:
        """Recorded failures, newest first."""

    @abc.abstractmethod
    def record_usage(self, task_id: str, query: str, providers: Sequence[str],
                     snippets: int, tokens: int, latency_ms: float,
                     cache_hits: int | None = None) -> None:
        """Append a usage_metrics row."""

    @abc.abstractmethod
    def record_usage_many(self, rows: Sequence[tuple]) -> None:
        """Append several usage_metrics rows (``record_usage`` arguments) in one transaction."""

    @abc.abstractmethod
    def get_meta(self, key: str) -> str | None:
        """A value of index_meta."""

    @abc.abstractmethod
    def set_meta(self, key: str, value: str) -> None:
        """Set a value of index_meta."""

    @abc.abstractmethod
    def get_prefixes(self, model: str, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], str]:
        """Cached contextual prefixes by (chunk_hash, doc_hash)."""

    @abc.abstractmethod
    def put_prefixes(self, model: str, rows: Sequence[tuple[str, str, str]]) -> None:
        """Cache prefixes: (chunk_hash, doc_hash, prefix)."""

    @abc.abstractmethod
    def save_project_config(self, snapshot: dict[str, Any]) -> bool:
        """Store the boundary settings; True if they differ from the stored ones."""

    @abc.abstractmethod
    def stats(self) -> dict[str, Any]:
        """Totals for get_context_stats: files, chunks, embeddings by model, languages,
        database size, last indexed, secrets redacted, errors, contextualized chunks,
        usage averages."""

    @abc.abstractmethod
    def snapshot(self, destination: str) -> None:
        """Write a consistent copy of the whole index to the new file ``destination`` while
        the store stays open and writable (backups; see :mod:`contextd.backup`)."""

    @abc.abstractmethod
    def vacuum(self) -> None:
        """Reclaim space after large deletions."""

    @abc.abstractmethod
    def close(self) -> None:
        """Checkpoint and close."""
