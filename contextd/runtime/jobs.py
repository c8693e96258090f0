"""Rebuild jobs (the MCP tools rebuild_context / get_rebuild_status, docs/MCP_TOOLS.md), one
at a time.

A rebuild is the first-start bootstrap run again on a scope: the scope's files are dropped
from the index (vectors stay, as the embedding cache, so an unchanged model re-embeds nothing),
then re-read in priority order with bootstrap_progress tracking, so a crash mid-rebuild is
resumed by the next ``ensure_indexed``. Every rebuild is a row of the jobs table whose figures
(files, chunks, current file) are kept current while it runs. Cancelling stops after the
current batch: every file is then either rebuilt or absent, never half-written, and the next
refresh catches up the absent ones.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence

from contextd.errors import JobConflictError, UsageError
from contextd.boundary.path_args import refusal_text
from contextd.indexer.progress import Progress, TeeProgress, format_duration
from contextd.runtime.job_log import JobLog
from contextd.store.base import IndexStore, Job

if TYPE_CHECKING:
    from contextd.indexer import Indexer

# Used for the estimate until a run on this index has measured the real rates.
DEFAULT_BYTES_PER_SECOND = 1_000_000
DEFAULT_TEXTS_PER_SECOND = 40.0  # the torch model on two cores, measured on real chunks
REBUILD_TYPES = ("rebuild_full", "rebuild_partial")
INTERRUPTED = "interrupted"
# Statuses of a job that was running; the process that ran it is the only one that moves
# it on, so when another process opens the index these rows belong to a dead one.
RUNNING_STATUSES = ("queued", "in_progress")


def recover_interrupted_jobs(store: IndexStore) -> int:
    """Mark every job left queued or in progress as ``interrupted``; returns how many.

    Called when a process becomes the index's owner (:class:`contextd.runtime.engine.Engine`): one
    process owns the database at a time, so a job still "running" then was run by a process
    that died (SIGKILL, a crash, power loss) and would otherwise show in_progress for ever.
    A bootstrap or rebuild it left half done is resumed by the next ``ensure_indexed`` from
    its bootstrap_progress rows; the job row keeps the figures it reached."""
    stale = store.list_jobs(RUNNING_STATUSES, limit=10_000)
    for job in stale:
        store.update_job(job.job_id, status=INTERRUPTED, completed_at="now",
                         error_message="interrupted: the process running it ended "
                                       "(killed or crashed); remaining files are resumed by "
                                       "the next indexing run")
    return len(stale)


@dataclass
class RebuildResult:
    """The answer of rebuild_context."""

    status: str
    job_id: str | None
    scope: str
    estimated_files: int = 0
    estimated_seconds: float = 0.0
    message: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    progress: dict[str, Any] | None = None


@dataclass
class JobStatus:
    """The answer of get_rebuild_status."""

    job_id: str
    status: str
    job_type: str
    scope: str | None
    progress: dict[str, Any]
    result: dict[str, Any] | None = None
    error: str | None = None
    logs: list[str] | None = None


def progress_of(job: Job) -> dict[str, Any]:
    """The progress object of a job (files, percentage, current file, times)."""
    total = job.files_total or 0
    percent = 100 if job.status == "completed" else \
        (int(100 * job.files_processed / total) if total else 0)
    return {"filesProcessed": job.files_processed, "filesTotal": total,
            "chunksProcessed": job.chunks_processed, "percentComplete": percent,
            "currentFile": job.current_file, "startedAt": job.started_at,
            "updatedAt": job.updated_at, "completedAt": job.completed_at}


def left_out_text(paths: Sequence[str], shown: int = 5) -> str:
    """What a cancelled rebuild left out of the index, naming the first few files."""
    if not paths:
        return "no file is left out"
    first = ", ".join(sorted(paths)[:shown]) + (", ..." if len(paths) > shown else "")
    return (f"{len(paths):,} files are left out of the index until the next catch-up (any "
            f"query, refresh or the watcher) indexes them: {first}")


class JobRunner:
    """Runs rebuilds of one index, refusing a second one while one runs."""

    def __init__(self, indexer: "Indexer", store: IndexStore):
        self.indexer = indexer
        self.store = store
        self._lock = threading.Lock()
        self._active: str | None = None
        self._cancel: dict[str, threading.Event] = {}
        self._logs: dict[str, list[str]] = {}
        self._threads: list[threading.Thread] = []
        self._release_claim: Callable[[], None] | None = None

    # ----- public ------------------------------------------------------------------------
    def rebuild(self, paths: Sequence[str] | None = None, *, dry_run: bool = False,
                vacuum: bool = True, keep_errors: bool = False, wait: bool = True,
                created_by: str = "cli", progress: Progress | None = None) -> RebuildResult:
        """Rebuild the index (all of it, or the files under ``paths``) as a tracked job.

        ``dry_run`` only estimates (files, seconds, files by language, sizes) and changes
        nothing. ``wait=False`` starts the job in a background thread and returns at once
        with status ``queued``. Raises JobConflictError while another rebuild runs."""
        prefixes = None
        if paths:
            prefixes, refused = self.indexer.checked_paths(paths)
            if refused:  # a destructive job runs on exactly what was asked, or not at all
                raise UsageError(f"rebuild refused: {refusal_text(refused)}")
        scope = "partial" if prefixes else "full"
        estimate = self.estimate(prefixes)
        files, seconds = estimate.pop("files"), estimate.pop("seconds")
        params = {"paths": prefixes, "vacuum": vacuum, "keep_errors": keep_errors,
                  "dry_run": dry_run}
        if dry_run:
            job = self.store.create_job(f"rebuild_{scope}", self._scope_text(prefixes), files,
                                        created_by, params, status="completed")
            self.store.update_job(job.job_id, metrics={"dry_run": True, **estimate},
                                  completed_at="now")
            where = f" under {', '.join(prefixes)}" if prefixes else ""
            return RebuildResult("completed", job.job_id, scope, files, seconds,
                                 f"Dry-run: would re-index {files:,} files{where} in about "
                                 f"{format_duration(seconds)} ({self._parts(estimate)}). "
                                 "No changes made.", estimate)
        indexed = len(self.store.file_states()) if prefixes else files
        self.store.check_room_to_rewrite(files / max(1, indexed), f"{scope} rebuild")
        job = self._claim(scope, prefixes, files, created_by, params)
        args = (job.job_id, prefixes, vacuum, keep_errors, progress)
        if wait:
            final = self._execute(*args)
            return RebuildResult(final.status, job.job_id, scope, files, seconds,
                                 self._final_message(final, scope), estimate,
                                 progress_of(final))
        thread = threading.Thread(target=self._execute, args=args, daemon=True,
                                  name=f"contextd-{job.job_id}")
        self._threads.append(thread)
        thread.start()
        return RebuildResult("queued", job.job_id, scope, files, seconds,
                             f"{scope.capitalize()} rebuild queued: {files:,} files, about "
                             f"{format_duration(seconds)} ({self._parts(estimate)}).",
                             estimate)

    @staticmethod
    def _parts(estimate: dict[str, Any]) -> str:
        """``3 s reading and chunking, 1,200 chunks to embed in ~30 s; computed vectors are
        reused``."""
        embed = estimate["embedding"]
        text = f"{format_duration(estimate['chunkingSeconds'])} reading and chunking"
        if embed["texts"]:
            text += (f", {embed['texts']:,} chunks to embed in ~"
                     f"{format_duration(embed['seconds'])}")
        return text + "; vectors already computed are reused"

    def estimate(self, prefixes: Sequence[str] | None = None) -> dict[str, Any]:
        """What a rebuild of the scope would process: files, bytes, files by language,
        seconds at the rate measured on this index, and the current database size."""
        from contextd.chunkers.chunking import language_for
        from contextd.indexer.core import THROUGHPUT_META_KEY
        from contextd.indexer.plan import in_scope

        entries = [e for e in self.indexer.boundary.iter_files() if in_scope(e.path, prefixes)]
        languages = Counter(language_for(e.path) or "other" for e in entries)
        size = sum(e.size for e in entries)
        rate = float(self.store.get_meta(THROUGHPUT_META_KEY) or DEFAULT_BYTES_PER_SECOND)
        # Vectors already computed are reused (the embedding cache survives a rebuild); the
        # texts still without one are embedded by it, which takes far longer than chunking.
        embed = self._embedding_estimate()
        chunking = size / rate
        return {"files": len(entries), "seconds": round(chunking + embed["seconds"], 1),
                "chunkingSeconds": round(chunking, 1), "embedding": embed,
                "byLanguage": dict(languages.most_common()),
                "totalSizeMB": round(size / 2**20, 2),
                "currentIndexSize": f"{self.store.stats()['db_size_mb']} MB"}

    def _embedding_estimate(self) -> dict[str, Any]:
        """Texts a rebuild would embed (those without a vector for the configured model)
        and the seconds that takes at the rate measured on this index."""
        from contextd.indexer.core import EMBEDDING_RATE_META_KEY

        if not self.indexer.embed:
            return {"texts": 0, "seconds": 0.0, "textsPerSecond": None}
        texts = self.store.count_missing_embeddings(self.indexer.embedder.identity)
        rate = float(self.store.get_meta(EMBEDDING_RATE_META_KEY) or DEFAULT_TEXTS_PER_SECOND)
        return {"texts": texts, "seconds": round(texts / rate, 1), "textsPerSecond": rate}

    def status(self, job_id: str, include_logs: bool = False) -> JobStatus | None:
        """A job's state and progress; its final figures once completed."""
        job = self.store.get_job(job_id)
        if job is None:
            return None
        logs = None
        if include_logs:
            logs = list(self._logs.get(job_id) or job.metrics.get("log", []))
        result = job.metrics if job.status in ("completed", "cancelled") else None
        return JobStatus(job.job_id, job.status, job.job_type, job.scope, progress_of(job),
                         result, job.error_message, logs)

    def cancel(self, job_id: str) -> JobStatus | None:
        """Ask a running job to stop after its current batch."""
        event = self._cancel.get(job_id)
        if event is not None:
            event.set()
            self.store.update_job(job_id, cancel_requested=True)
        return self.status(job_id)

    def shutdown(self) -> None:
        """Cancel running jobs and wait for them to stop."""
        for event in list(self._cancel.values()):
            event.set()
        for thread in self._threads:
            thread.join()

    # ----- internals ---------------------------------------------------------------------
    @staticmethod
    def _scope_text(prefixes: Sequence[str] | None) -> str:
        return json.dumps(list(prefixes)) if prefixes else "all"

    def _claim(self, scope: str, prefixes: Sequence[str] | None, files: int, created_by: str,
               params: dict[str, Any]) -> Job:
        """Create the job, or refuse when one runs here or in another process (a shared
        PostgreSQL index). Rebuild rows left running by a process that died are marked
        interrupted: holding the claim means no other process is rebuilding."""
        with self._lock:
            if self._active is not None:
                running = f"rebuild {self._active} is already running"
                raise JobConflictError(
                    f"{running}; follow it with get_rebuild_status or cancel it before "
                    "starting another", cli=f"{running}; wait for it to finish "
                                            "('contextd stats' shows it)")
            # Other processes write a shared (PostgreSQL) index too: the claim is the store's.
            release = self.store.try_exclusive("rebuild")
            if release is None:
                running = [j.job_id for j in self.store.list_jobs(("queued", "in_progress"))
                           if j.job_type in REBUILD_TYPES]
                which = f"rebuild {running[0]}" if running else "a rebuild"
                running = f"{which} is already running in another process on this index"
                raise JobConflictError(
                    f"{running}; follow it with get_rebuild_status or wait for it to finish",
                    cli=f"{running}; wait for it to finish ('contextd stats' shows it)")
            self._release_claim = release
            for stale in self.store.list_jobs(("queued", "in_progress"), limit=100):
                if stale.job_type in REBUILD_TYPES:
                    self.store.update_job(stale.job_id, status=INTERRUPTED, completed_at="now",
                                          error_message="interrupted: its process ended")
            job = self.store.create_job(f"rebuild_{scope}", self._scope_text(prefixes), files,
                                        created_by, params)
            self._active = job.job_id
            self._cancel[job.job_id] = threading.Event()
            self._logs[job.job_id] = []
            return job

    def _log(self, job_id: str, message: str) -> None:
        self._logs.setdefault(job_id, []).append(f"{time.strftime('%H:%M:%S')} {message}")

    def _execute(self, job_id: str, prefixes: Sequence[str] | None, vacuum: bool,
                 keep_errors: bool, progress: Progress | None) -> Job:
        cancel = self._cancel[job_id]
        try:
            # Under the indexer's run lock from the drop on: a rebuild asked for while a
            # bootstrap runs (a server just started) waits for it, then rebuilds every file.
            # Dropped before that bootstrap ended, its files came back before this run read
            # them, and the rebuild answered "0 files" (issue 40).
            with self.indexer.running():
                self.store.update_job(job_id, status="in_progress")
                self._log(job_id, f"rebuild of {self._scope_text(prefixes)} started")
                dropped = self.store.clear_index(prefixes)
                self._log(job_id, f"dropped {dropped:,} files from the index")
                if not keep_errors:
                    self._clear_errors(prefixes)
                # The bootstrap keeps the job row's figures (files, chunks, current file); the
                # job log gets its start, progress and end lines.
                sink = TeeProgress(progress, JobLog(
                    self.indexer.config.bootstrap.progress_interval_seconds))
                report = self.indexer.bootstrap(prefixes, progress=sink, cancel=cancel,
                                                job_id=job_id, mode="rebuild")
            self._log(job_id, report.summary)
            left_out: list[str] = []
            if report.cancelled:
                # The files not rebuilt keep their progress rows: the next catch-up (any
                # query, refresh or watcher start) resumes them, and status names them.
                _, left_out = self.store.progress_pending()
                self._log(job_id, left_out_text(left_out))
            elif vacuum:
                self.store.vacuum()
                self._log(job_id, "database vacuumed")
            metrics = {**dataclasses.asdict(report), "log": self._logs[job_id]}
            if report.cancelled:
                metrics["left_out"] = {"files": len(left_out),
                                       "text": left_out_text(left_out)}
            self.store.update_job(job_id, status="cancelled" if report.cancelled else
                                  "completed", completed_at="now", metrics=metrics,
                                  files_processed=report.files_indexed + report.files_failed,
                                  chunks_processed=report.chunks_written)
        except Exception as exc:
            self._log(job_id, f"failed: {exc}")
            self.store.update_job(job_id, status="failed", completed_at="now",
                                  error_message=f"{type(exc).__name__}: {exc}",
                                  metrics={"log": self._logs[job_id]})
            raise
        finally:
            with self._lock:
                self._active = None
                self._cancel.pop(job_id, None)
                release, self._release_claim = self._release_claim, None
            if release is not None:
                release()
        job = self.store.get_job(job_id)
        assert job is not None
        return job

    def _clear_errors(self, prefixes: Sequence[str] | None) -> None:
        if prefixes is None:
            self.store.clear_errors()
            return
        from contextd.indexer.plan import in_scope

        paths = [e["file_path"] for e in self.store.list_errors(limit=1_000_000)
                 if in_scope(e["file_path"], prefixes)]
        self.store.clear_errors(paths)

    def _final_message(self, job: Job, scope: str) -> str:
        if job.status == "cancelled":
            _, left_out = self.store.progress_pending()
            return (f"{scope.capitalize()} rebuild cancelled after {job.files_processed:,} "
                    f"files; {left_out_text(left_out)}.")
        return (f"{scope.capitalize()} rebuild completed: {job.files_processed:,} files, "
                f"{job.chunks_processed:,} chunks.")
