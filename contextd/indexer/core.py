"""The Indexer: bootstrap, resume, incremental catch-up and refresh of one project's index.

One pipeline for every trigger (first start, restart after a crash, ``contextd refresh``, the
watcher, a rebuild job): plan against ``file_state`` (size+mtime, then BLAKE3), process files
in a worker pool, store each batch of files atomically, and let the embedding stage fill in
vectors beside it. Runs are serialised by a lock: a watcher batch waits for a rebuild.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any, Sequence

from contextd.boundary import Boundary, FileEntry
from contextd.chunking import chunking_signature
from contextd.contextualize import (contextualizer_signature, counters_since, needs_store,
                                   stage_stats)
from contextd.embedders.common import cpu_count
from contextd.embedding import embedding_stats, get_embedder, remote_run_counters
from contextd.errors import UsageError
from contextd.indexer.embed_stage import EmbeddingStage, embed_missing
from contextd.indexer.pipeline import Writer, outcomes
from contextd.indexer.plan import FileTask, in_scope, order_by_priority, plan_changes
from contextd.indexer.report import IndexReport
from contextd.progress import NullProgress, Progress
from contextd.project import Project
from contextd.store.base import IndexStore

# index_meta keys: the measured indexing rate (for rebuild estimates) and the signature of
# the chunking and contextualizer the stored chunks and index texts were built with.
THROUGHPUT_META_KEY = "indexing_bytes_per_second"
SIGNATURE_META_KEY = "index_text_signature"
THROUGHPUT_MIN_BYTES = 256 * 1024  # smaller runs measure start-up, not throughput


def index_signature(config) -> str:
    """What the stored chunks and index texts depend on besides the files themselves: a
    change re-indexes every file at the next catch-up."""
    return f"{chunking_signature(config)}|{contextualizer_signature(config)}"


class Indexer:
    """Keeps the index of ``project`` in ``store`` current.

    ``embed=False`` leaves vectors out (lexical and symbol index only): benchmarks use it to
    time chunking alone, and ``embed_pending`` computes the vectors later.
    """

    def __init__(self, project: Project, store: IndexStore, embed: bool = True):
        self.project = project
        self.store = store
        self.embed = embed
        self._boundary: Boundary | None = None
        self._run_lock = threading.RLock()
        self._embed_lock = threading.Lock()
        self._state = "idle"
        self._files_total: int | None = None

    # ----- parts -------------------------------------------------------------------------
    @property
    def config(self):
        return self.project.config

    @property
    def boundary(self) -> Boundary:
        """The project boundary (built on first use; see :meth:`reload`)."""
        if self._boundary is None:
            self._boundary = Boundary(self.project)
        return self._boundary

    def reload(self) -> None:
        """Re-read the configuration and the ignore rules (a changed .gitignore,
        .contextignore or context.toml); the next run judges every file anew."""
        with self._run_lock:
            self.project = Project.open(self.project.root, self.project.config.source)
            self._boundary = None

    @property
    def embedder(self) -> Any:
        """The configured embedder (shared per configuration; the model loads lazily)."""
        return get_embedder(self.config.embedding)

    def workers(self) -> int:
        """Chunking processes: ``bootstrap.parallel_workers``, 0 meaning cores − 1, at least 1."""
        configured = self.config.bootstrap.parallel_workers
        return max(1, configured or cpu_count() - 1)

    # ----- entry points ------------------------------------------------------------------
    def ensure_indexed(self, progress: Progress | None = None,
                       cancel: threading.Event | None = None) -> IndexReport:
        """Make the index current: resume an interrupted bootstrap, bootstrap an empty index,
        or catch up with changes made while nothing was watching."""
        with self._run_lock:
            signature = index_signature(self.config)
            job_id, pending = self.store.progress_pending()
            if pending:
                report = self._resume(job_id, pending, progress, cancel)
            elif not self.store.file_states():
                report = self.bootstrap(progress=progress, cancel=cancel)
            else:
                # Chunks cut by other chunking settings or code, or index texts built by
                # another contextualizer, must all be rebuilt.
                force = self.store.get_meta(SIGNATURE_META_KEY) not in (None, signature)
                report = self._refresh(None, force, progress, cancel, mode="incremental")
            if not report.cancelled:
                self.store.set_meta(SIGNATURE_META_KEY, signature)
            return report

    def bootstrap(self, prefixes: Sequence[str] | None = None, progress: Progress | None = None,
                  cancel: threading.Event | None = None, job_id: str | None = None,
                  mode: str = "bootstrap") -> IndexReport:
        """Index every file in scope (all, or under ``prefixes``) in priority order, tracking
        each in bootstrap_progress so an interruption resumes where it stopped. Files already
        stored with the same content are skipped (the caller clears them to force)."""
        with self._run_lock:
            entries = [e for e in self.boundary.iter_files() if in_scope(e.path, prefixes)]
            entries = order_by_priority(entries, self.config.bootstrap.priority_extensions)
            limit = self.config.bootstrap.max_initial_files
            if limit and prefixes is None:
                entries = entries[:limit]
            if job_id is None:
                job_id = self.store.create_job("bootstrap", "all", len(entries), "indexer",
                                               status="in_progress").job_id
            self.store.progress_begin(job_id, [e.path for e in entries])
            states = self.store.file_states()
            plan = plan_changes(entries, {p: states[p] for p in
                                          (e.path for e in entries) if p in states})
            report = self._run(plan.tasks, mode, progress, cancel, track_progress=True,
                               total=len(entries))
            report.files_seen, report.files_unchanged = plan.seen, \
                report.files_unchanged + plan.unchanged
            self._finish_bootstrap(job_id, report)
            return report

    def refresh(self, paths: Sequence[str] | None = None, force: bool = False,
                progress: Progress | None = None, cancel: threading.Event | None = None
                ) -> IndexReport:
        """Re-index what changed among ``paths`` (files or directories, relative to the root
        or absolute; None: the whole project). A path that no longer exists, or that the
        boundary now excludes, is removed. ``force`` re-chunks even unchanged files (vectors
        still come from the cache)."""
        with self._run_lock:
            return self._refresh(paths, force, progress, cancel, mode="refresh")

    def embed_pending(self, cancel: threading.Event | None = None) -> int:
        """Compute every missing vector now; returns how many texts were embedded."""
        return embed_missing(self.store, self.embedder, self.config.embedding.batch_size,
                             cancel, self._embed_lock)

    def status(self) -> dict[str, Any]:
        """Indexing state for get_context_stats: ``state`` (idle, indexing, embedding),
        ``files_indexed``, ``files_total``, ``embeddings_pending`` and ``text``
        ("N / M files")."""
        indexed = len(self.store.file_states())
        total = self._files_total if self._state == "indexing" and self._files_total else indexed
        try:
            pending = self.store.count_missing_embeddings(self.embedder.identity) \
                if self.embed else None
        except Exception:  # an unavailable model is reported by stats, not here
            pending = None
        return {"state": self._state, "files_indexed": indexed, "files_total": total,
                "embeddings_pending": pending, "text": f"{indexed:,} / {total:,} files"}

    # ----- internals ---------------------------------------------------------------------
    def _resume(self, job_id: str | None, pending: list[str], progress: Progress | None,
                cancel: threading.Event | None) -> IndexReport:
        wanted = set(pending)
        entries = [e for e in self.boundary.iter_files() if e.path in wanted]
        states = {p: s for p, s in self.store.file_states().items() if p in wanted}
        plan = plan_changes(entries, states)
        gone = wanted - {e.path for e in entries}
        report = self._run(plan.tasks, "resume", progress, cancel, track_progress=True,
                           total=len(pending))
        report.files_removed += self.store.delete_files(plan.removed)
        self.store.progress_mark(sorted(gone), "completed")
        report.files_seen = plan.seen
        report.files_unchanged += plan.unchanged
        if job_id:
            self._finish_bootstrap(job_id, report)
        else:
            self.store.progress_clear()
        return report

    def _finish_bootstrap(self, job_id: str, report: IndexReport) -> None:
        if report.cancelled:
            return
        self.store.progress_clear()
        job = self.store.get_job(job_id)
        if job is not None and job.job_type == "bootstrap":
            self.store.update_job(job_id, status="completed", completed_at="now",
                                  files_processed=report.files_indexed,
                                  chunks_processed=report.chunks_written)

    def _refresh(self, paths: Sequence[str] | None, force: bool, progress: Progress | None,
                 cancel: threading.Event | None, mode: str) -> IndexReport:
        rels = None if paths is None else [self.relative(p) for p in paths]
        if rels is not None and any(r in ("", ".") for r in rels):
            rels = None
        entries = self._entries_for(rels)
        if rels is None:
            states = self.store.file_states()
        else:
            states = {}
            for rel in rels:
                states.update(self.store.file_states(rel))
        plan = plan_changes(entries, states, force, rels)
        removed = self.store.delete_files(plan.removed) if plan.removed else 0
        report = self._run(plan.tasks, mode, progress, cancel, track_progress=False,
                           total=len(states) + len(plan.tasks))
        report.files_seen = plan.seen
        report.files_unchanged += plan.unchanged
        report.files_removed += removed
        return report

    def _entries_for(self, rels: list[str] | None) -> list[FileEntry]:
        """Files on disk in scope: a full walk for the project or a directory, one boundary
        check per named file (the watcher's case: no walk at all)."""
        if rels is None:
            return list(self.boundary.iter_files())
        entries, walk = [], []
        for rel in rels:
            path = self.project.root / rel
            if path.is_dir():
                walk.append(rel)
            elif path.exists() and self.boundary.check(rel).indexable:
                st = path.stat()
                entries.append(FileEntry(rel, path, st.st_size, st.st_mtime_ns))
        if walk:
            entries += [e for e in self.boundary.iter_files() if in_scope(e.path, walk)]
        return entries

    def relative(self, path: str) -> str:
        """``path`` (absolute, or relative to the root) as a root-relative POSIX path;
        raises UsageError outside the root."""
        root = self.project.root
        absolute = Path(os.path.normpath(path if os.path.isabs(path) else root / path))
        try:
            return absolute.relative_to(root).as_posix()
        except ValueError:
            raise UsageError(f"{path} is outside the project root {root}") from None

    def _run(self, tasks: list[FileTask], mode: str, progress: Progress | None,
             cancel: threading.Event | None, track_progress: bool, total: int) -> IndexReport:
        """Process ``tasks`` with the embedding stage running beside the writer."""
        report = IndexReport(mode=mode)
        progress = progress or NullProgress()
        cancel = cancel or threading.Event()
        started = time.perf_counter()
        stage = None
        remote_before = embedding_stats(self.config.embedding) if self.embed else {}
        if self.embed:
            stage = EmbeddingStage(self.store, lambda: self.embedder,
                                   self.config.embedding.batch_size, self._embed_lock,
                                   cancel).start()
        writer = Writer(self.store, report, progress, track_progress,
                        self.config.bootstrap.fail_fast, stage.wake if stage else lambda: None)
        self._state, self._files_total = "indexing", total
        progress.start(len(tasks), mode)
        try:
            prefix_store = self.store if needs_store(self.config) else None
            before = stage_stats(self.config, prefix_store) if prefix_store else {}
            for outcome in outcomes(tasks, self.config, self.workers(), cancel, prefix_store):
                writer.add(outcome)
            writer.flush()
            if prefix_store is not None:
                report.contextualizer = counters_since(before, stage_stats(self.config,
                                                                          prefix_store))
        finally:
            self._state = "embedding"
            if stage is not None:
                report.chunks_embedded = stage.finish()
                report.embedding_error = stage.error
                report.embedding = remote_run_counters(remote_before,
                                                       embedding_stats(self.config.embedding))
            self._state = "idle"
        report.cancelled = cancel.is_set()
        report.embeddings_reused = max(0, writer.distinct_texts - report.chunks_embedded)
        report.seconds = time.perf_counter() - started
        if report.bytes_indexed >= THROUGHPUT_MIN_BYTES:
            self.store.set_meta(THROUGHPUT_META_KEY,
                                f"{report.bytes_indexed / report.seconds:.0f}")
        progress.finish(report.summary)
        return report
