"""The store interface: everything the rest of contextd may ask of the index database.

Only store modules speak SQL. DuckDB (:mod:`contextd.store.duckdb`) is the embedded
default; a PostgreSQL + pgvector backend for teams would be another implementation of
:class:`IndexStore`, not a rewrite of its callers.
"""

from __future__ import annotations

import abc
import contextlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from contextd.records import Chunk

if TYPE_CHECKING:  # a CLI client of a running owner never loads numpy (~140 ms)
    import numpy as np

# Knowledge-base documents are stored as files whose path starts with this (then their path
# relative to the project root, or their absolute path): no path the project walk produces
# can start with it (a relative POSIX path never holds "//"), so the project index and the
# knowledge base share tables, providers and the query path without mixing up.
KNOWLEDGE_PREFIX = "kb://"


@dataclass(frozen=True)
class IndexedChunk:
    """A chunk ready to store: ``chunk.text`` is what users see (already scrubbed),
    ``index_text`` what gets embedded and BM25-indexed (contextual prefix + text)."""

    chunk: Chunk
    index_text: str
    contextualized: bool = False
    prefix_quality: float | None = None  # quality score of the prefix (0-1)
    prefix_tokens: int = 0               # estimated tokens of the prefix


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


@dataclass(frozen=True)
class SegmentRow:
    """A stashed context segment as stored (agent memory, :mod:`contextd.stash`).

    Times are naive UTC datetimes; ``references`` are ids of other segments (who references
    a segment is derived from them, not stored); ``text_hash`` keys the segment's vector in
    the embeddings table, under ``embedding_model``.
    """

    segment_id: str
    session_id: str
    text: str
    segment_type: str
    created_at: datetime
    stashed_at: datetime
    tokens: int
    topic: str | None
    source: str | None
    references: tuple[str, ...]
    text_hash: str
    embedding_model: str | None
    expires_at: datetime | None
    protected: bool


@dataclass(frozen=True)
class DocumentRecord:
    """A knowledge document to store: its file rows (``file.path`` in the ``kb://``
    namespace), the file it was read from, its format, the first line of each page (empty
    without pages) and its title."""

    file: FileRecord
    source: str
    format: str
    page_starts: Sequence[int] = ()
    title: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class KnowledgeDocument:
    """A knowledge-base document as the query path needs it: its file path (``kb://...``),
    the file it was read from, its format, the first line of each page (empty without
    pages) and the contexts holding it (lower-cased names, sorted)."""

    path: str
    source: str
    format: str
    page_starts: tuple[int, ...]
    contexts: tuple[str, ...]
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SkippedFile:
    """A file (or folder) left out of the index: ``reason`` is a boundary reason (too_large,
    binary, generated, secret_file, unreadable, not_a_regular_file, symlink_not_followed,
    symlink_escape, symlink_loop, symlink_too_deep) or an indexing failure;
    ``size_bytes``/``mtime_ns`` are the file as it was then (None when unknown)."""

    path: str
    reason: str
    detail: str
    size_bytes: int | None = None
    mtime_ns: int | None = None


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


@dataclass(frozen=True)
class StoredSearchSession:
    """A search session as stored (see :mod:`contextd.sessions`): ``created_at`` is naive
    UTC; ``params`` the search's arguments; ``results`` the kept hits as JSON-ready dicts, best
    first (empty when listed without them)."""

    session_id: str
    query: str
    created_at: datetime
    params: dict[str, Any]
    result_count: int
    results: tuple[dict[str, Any], ...] = ()


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
        """Fingerprints of indexed files by path (optionally under a path prefix). Without a
        prefix, the project's files only: knowledge documents (``KNOWLEDGE_PREFIX``) are
        left out, so the project's catch-up, rebuild and clear never touch them."""

    @abc.abstractmethod
    def clear_index(self, path_prefixes: Sequence[str] | None = None) -> int:
        """Drop indexed files (all, or those under the prefixes); vectors stay as a cache."""

    # ----- embeddings (the table is the cache: keyed by model identity + text hash) ------
    @abc.abstractmethod
    def missing_embeddings(self, model: str, limit: int, paths: Sequence[str] | None = None
                           ) -> list[tuple[str, str]]:
        """Up to ``limit`` distinct (embed_hash, index_text) of stored chunks without a vector
        for ``model``, those of the files written first (lowest file_id: the bootstrap's
        priority order) first, so the most useful chunks get their vectors soonest.
        ``paths``: only chunks of those stored files (a knowledge add embeds its own
        documents, not the backlog of a bootstrap under way)."""

    @abc.abstractmethod
    def put_embeddings(self, model: str, hashes: Sequence[str], vectors: np.ndarray) -> int:
        """Store vectors (ignoring ones already present); returns the new generation."""

    @abc.abstractmethod
    def count_missing_embeddings(self, model: str) -> int:
        """How many stored chunks still lack a vector for ``model``."""

    @abc.abstractmethod
    def prune_embeddings(self, keep_model: str) -> int:
        """Delete vectors no current chunk or stashed segment uses, and all vectors of
        other models."""

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

    def vectors_mark(self, model: str) -> object | None:
        """A value that changes whenever vectors of ``model`` are written (None: unknown, ask
        :meth:`embedded_hashes` every time): a store write that added none (a refresh's
        chunks) then costs an index waiting for vectors no lookup of its hashes."""
        return None

    def embedded_hashes(self, model: str, embed_hashes: Sequence[str]) -> set[str]:
        """Those of ``embed_hashes`` that have a vector under ``model``: what an in-memory
        index waiting for vectors asks after each write. The default reads the vectors; a
        store may answer from the hashes alone."""
        return set(self.vectors_for(model, embed_hashes))

    def vector_rows(self, model: str, embed_hashes: Sequence[str]
                    ) -> tuple[list[str], np.ndarray]:
        """(hashes found, float32 matrix of their vectors, a row each) for the given text
        hashes under ``model``: what an in-memory index loads a batch at a time. The default
        asks :meth:`vectors_for`; a store may build the matrix without a Python object per
        vector."""
        import numpy as np  # here only: a CLI client of an owner never loads numpy

        found = self.vectors_for(model, embed_hashes)
        if not found:
            return [], np.zeros((0, 0), dtype=np.float32)
        return list(found), np.stack(list(found.values())).astype(np.float32, copy=False)

    def vector_batches(self, model: str, embed_hashes: Sequence[str], rows: int
                       ) -> Iterable[tuple[list[str], "np.ndarray"]]:
        """The vectors of ``embed_hashes`` under ``model`` as :meth:`vector_rows` gives them,
        about ``rows`` at a time: what an in-memory index loads when it loads them all. A
        batch may also hold vectors not asked for (a store may scan its table in order,
        cheaper than looking up every hash), which the caller skips."""
        for start in range(0, len(embed_hashes), rows):
            yield self.vector_rows(model, embed_hashes[start:start + rows])

    def nearest(self, model: str, vector: np.ndarray, k: int
                ) -> list[tuple[str, float]] | None:
        """The ``k`` chunks whose ``model`` vectors are closest to ``vector`` by cosine, as
        (chunk_id, cosine similarity), best first; None when this store cannot search vectors
        itself (DuckDB: its ``array_cosine_similarity`` is 10-15x slower than numpy, so the
        semantic provider keeps the vectors in memory instead). A store that answers lets
        every process search without loading every vector (PostgreSQL: pgvector's HNSW)."""
        return None

    def try_exclusive(self, purpose: str, wait: bool = False) -> Callable[[], None] | None:
        """Claim ``purpose`` (e.g. ``"rebuild"``) for this index across every process that
        writes it: a function that gives the claim back, or None when another process holds
        it (``wait``: wait for it instead). A claim dies with its process. The default
        serves stores written by one process only (DuckDB, where the owner election already
        makes one writer): always granted."""
        return lambda: None

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

    # ----- agent memory: stashed segments (contextd.stash) --------------------------------
    @abc.abstractmethod
    def put_segments(self, rows: Sequence[SegmentRow]) -> None:
        """Insert segments (ids must be new) in one transaction, joining an enclosing
        :meth:`batch` so a segment and its vector are written together or not at all."""

    @abc.abstractmethod
    def segments(self, segment_ids: Sequence[str] | None = None) -> list[SegmentRow]:
        """Stored segments (None: all of them), oldest stash first; missing ids are left
        out."""

    @abc.abstractmethod
    def count_segments(self) -> int:
        """How many segments are stored (the stash cap is checked against it)."""

    @abc.abstractmethod
    def delete_segments(self, segment_ids: Sequence[str]) -> int:
        """Delete segments (their vectors stay as cache); returns how many existed."""

    @abc.abstractmethod
    def protect_segments(self, segment_ids: Sequence[str], protected: bool) -> int:
        """Set or clear the protected flag; returns how many segments exist among the ids."""

    @abc.abstractmethod
    def set_segment_model(self, segment_ids: Sequence[str], model: str) -> None:
        """Record the model identity the segments' vectors now come from (re-embedding)."""

    @abc.abstractmethod
    def segment_vectors(self, model: str) -> tuple[list[str], np.ndarray]:
        """(segment ids, float32 matrix) of every segment with a vector under ``model``;
        segments without one are left out (they are re-embedded, never mixed)."""

    # ----- knowledge base: contexts, documents, memberships --------------------------
    # Names are lower-cased by the caller. A document is stored as a file (write_files
    # rows) plus a kb_documents row and its memberships; every method that changes
    # memberships bumps the generation, so in-memory scope caches follow.
    @abc.abstractmethod
    def kb_contexts(self, name: str | None = None) -> list[dict[str, Any]]:
        """Every context (or only ``name``), by name: name, display_name, description,
        created_at, updated_at, documents, chunks, size_bytes (of its documents' files)."""

    @abc.abstractmethod
    def kb_create_context(self, name: str, display_name: str, description: str) -> bool:
        """Create a context; False (and nothing changes) when the name exists."""

    @abc.abstractmethod
    def kb_delete_context(self, name: str) -> list[str]:
        """Delete a context and its memberships, and every document no other context holds
        (its file rows too), in one transaction; returns the deleted document paths."""

    @abc.abstractmethod
    def kb_documents(self, context: str | None = None,
                     paths: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """Documents (of one context, or with these paths, or all), by path: path, source,
        format, pages, title, size_bytes, chunks, content_hash, contexts, added_at,
        updated_at, metadata (a dict)."""

    @abc.abstractmethod
    def kb_write_documents(self, documents: Sequence[DocumentRecord],
                           contexts: Sequence[str]) -> int:
        """Store (new or changed) documents: their file rows as ``write_files`` does, their
        kb_documents rows and their memberships in ``contexts``, in ONE transaction (a kill
        leaves the old version of each or the new, never a document without its rows).
        Returns the new generation."""

    @abc.abstractmethod
    def kb_link(self, paths: Sequence[str], contexts: Sequence[str]) -> int:
        """Add stored documents to contexts (existing memberships are kept); returns how
        many memberships were new."""

    @abc.abstractmethod
    def kb_unlink(self, paths: Sequence[str], contexts: Sequence[str] | None
                  ) -> tuple[int, list[str]]:
        """Take documents out of ``contexts`` (None: out of all), deleting those left in no
        context, in one transaction: (memberships removed, deleted document paths)."""

    @abc.abstractmethod
    def kb_document_map(self) -> dict[str, KnowledgeDocument]:
        """Every document with its contexts and pages, by path (what a query's scope and its
        hits' annotations are built from; cached by generation)."""

    # ----- moving an index between backends (contextd store copy) ----------------------
    @abc.abstractmethod
    def export_rows(self, table: str) -> list[tuple]:
        """Every row of one table of :data:`contextd.store.rows.TRANSFER_COLUMNS`, in its
        column order (vectors as float32 arrays)."""

    @abc.abstractmethod
    def import_rows(self, tables: dict[str, list[tuple]]) -> int:
        """Replace the index contents and caches with exported rows, in ONE transaction
        (file ids renumbered from this database); returns the files imported."""

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
    def replace_skips(self, skips: Sequence[SkippedFile], reasons: Sequence[str],
                      prefixes: Sequence[str] | None = None) -> None:
        """Replace the skipped_files rows with one of ``reasons`` (under ``prefixes``, or
        all) by ``skips``: a walk states everything it refused; other reasons (failures
        recorded by someone else) are left alone."""

    @abc.abstractmethod
    def list_skips(self, path: str | None = None, limit: int = 100) -> list[SkippedFile]:
        """Skipped files (of one path, or all), by path."""

    def record_usage(self, task_id: str, query: str, providers: Sequence[str],
                     snippets: int, tokens: int, latency_ms: float,
                     cache_hits: int | None = None, files: Sequence[str] = (),
                     provider_scores: dict[str, float] | None = None) -> None:
        """Append a usage_metrics row. ``files`` are the distinct files the snippets came
        from: the row keeps their whole-file tokens at the time of the answer (what an agent
        would have read without contextd); ``provider_scores`` is each provider's mean score
        over the hits it found. (One row of :meth:`record_usage_many`, on every backend.)"""
        self.record_usage_many([(task_id, query, providers, snippets, tokens, latency_ms,
                                 cache_hits, files, provider_scores)])

    @abc.abstractmethod
    def record_usage_many(self, rows: Sequence[tuple]) -> None:
        """Append several usage_metrics rows (``record_usage`` arguments) in one transaction."""

    @abc.abstractmethod
    def prefix_details(self, chunk_ids: Sequence[str],
                       min_key_term_share: float | None = None
                       ) -> dict[str, tuple[float | None, int]]:
        """(prefix quality, prefix tokens) of stored chunks by id. A structural prefix is
        stored unrated and rated now (``min_key_term_share``: the configured share, None
        for the default; issue 37 moved the rating off the index path)."""

    @abc.abstractmethod
    def prefix_summary(self, min_key_term_share: float | None = None) -> dict[str, Any]:
        """Chunks, contextualized chunks, mean prefix tokens and quality, and how many
        prefixes score low (< 0.5), fair or good (>= 0.8) (get_contextual_retrieval_stats);
        the structural prefixes, stored unrated, are rated now as in ``prefix_details``."""

    @abc.abstractmethod
    def cache_hit_rate(self) -> float | None:
        """Share of the usage_metrics rows recording ``cache_hits`` whose answer had at
        least one (get_context_stats' cacheHitRate); None when no row records it."""

    @abc.abstractmethod
    def record_task_usage(self, op: str, task_id: str, tokens_input: int, tokens_output: int,
                          agent: str | None = None, context_tokens: int | None = None,
                          notes: str | None = None) -> None:
        """One agent-reported task_usage row."""

    @abc.abstractmethod
    def task_usage(self) -> list[dict[str, Any]]:
        """Every task_usage row, oldest first, as dicts of its columns."""

    @abc.abstractmethod
    def usage_summary(self, days: int = 30) -> dict[str, Any]:
        """What the answers of the last ``days`` days saved (the Index Manager's savings
        page): per day and per task the queries, tokens served and whole-file tokens; per
        provider how often it contributed and its mean score; latency percentiles."""

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

    # ----- search sessions (contextd.sessions) -------------------------------------------
    @abc.abstractmethod
    def put_search_session(self, session: StoredSearchSession) -> None:
        """Store a new search session (its id is new; nothing is replaced)."""

    @abc.abstractmethod
    def get_search_sessions(self, session_ids: Sequence[str]) -> dict[str, StoredSearchSession]:
        """Stored sessions by id, with their results (unknown ids are left out)."""

    @abc.abstractmethod
    def list_search_sessions(self, limit: int = 100) -> list[StoredSearchSession]:
        """Stored sessions newest first, without their results (``results`` empty)."""

    @abc.abstractmethod
    def prune_search_sessions(self, keep: int, created_before: datetime | None = None) -> int:
        """Delete all but the newest ``keep`` sessions, and those created before
        ``created_before`` (naive UTC; None: no age limit), in one transaction; returns how
        many were deleted."""

    @abc.abstractmethod
    def save_project_config(self, snapshot: dict[str, Any]) -> bool:
        """Store the boundary settings; True if they differ from the stored ones."""

    @abc.abstractmethod
    def stats(self) -> dict[str, Any]:
        """Totals for get_context_stats: project files and chunks, knowledge documents and
        their chunks, embeddings by model, languages,
        database size, last indexed, secrets redacted, errors, contextualized chunks,
        usage averages."""

    @abc.abstractmethod
    def snapshot(self, destination: str) -> None:
        """Write a consistent copy of the whole index to the new file ``destination`` while
        the store stays open and writable (backups; see :mod:`contextd.runtime.backup`)."""

    @abc.abstractmethod
    def vacuum(self) -> None:
        """Reclaim space after large deletions."""

    def check_room_to_rewrite(self, share: float, what: str) -> None:
        """Refuse ``what`` (StoreError) when the disk cannot hold ``share`` (0-1) of the
        index written again: a rebuild drops its rows first, and a disk that fills after
        the drop leaves the index empty. A server's index (PostgreSQL) has its disk looked
        after elsewhere: nothing to check here."""
        return None

    @abc.abstractmethod
    def close(self) -> None:
        """Checkpoint and close."""
