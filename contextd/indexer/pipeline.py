"""The pipeline of one run: workers produce per-file outcomes, one writer stores them in
batches, each batch one atomic transaction.

Workers are processes: chunking is CPU-bound Python (tree-sitter parses with the GIL released,
but the definition walk and the chunk assembly hold it), so threads do not add throughput while
processes do (figures in benchmarks/bench_indexer.py --workers). A small run (a watcher batch,
a refresh of a few files) is processed inline: starting a pool costs more than it saves.
Processes start by ``forkserver``, never ``fork``: the parent may run ONNX Runtime and DuckDB
threads that a fork would copy mid-flight.
"""

from __future__ import annotations

import collections
import contextlib
import multiprocessing
import os
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Callable, Iterator, Sequence

from contextd.config.sections import ContextConfig
from contextd.errors import ContextdError
from contextd.indexer.plan import FileTask
from contextd.indexer.report import IndexReport
from contextd.indexer.worker import (FAILED, INDEXED, SAME, VANISHED, Outcome,
                                     collector_paused, init_worker, load_outcomes,
                                     process_batch, process_file)
from contextd.indexer.progress import Progress
from contextd.store.base import FileRecord, IndexStore

POOL_MIN_FILES = 64          # below this, inline processing is faster than starting a pool
TASK_BATCH_BYTES = 512 * 1024  # files sent to a worker at once (amortises pickling)
TASK_BATCH_FILES = 64
WRITE_BATCH_FILES = 256      # files per write transaction ...
WRITE_BATCH_CHUNKS = 4000    # ... or chunks ...
WRITE_BATCH_SECONDS = 0.25   # ... or time: early files must become queryable early,
# but never sooner than this many times the last write took: a transaction costs ~40 ms of
# CPU whatever it holds (the generation, the progress rows, the commit), so a writer that
# flushed every 0.25 s on a loaded machine wrote 16 files at a time and spent most of its
# time committing (DuckDB: 8 files a batch 3.3 CPU-s, 512 files 0.8 CPU-s for the same
# 19k chunks). Writes then take at most about a fifth of the writer's time, and a batch
# waits at most WRITE_INTERVAL_MAX_S in the first answer's window (it reads what is written).
WRITE_INTERVAL_FACTOR = 4
WRITE_INTERVAL_MAX_S = 1.0
# The time-based flush serves the first answers, which read what the run's first seconds
# wrote. Past this window batches go by size, or at the latest every WRITE_INTERVAL_LATE_S:
# on prometheus at load 8, one flush a second made 45 transactions where the size limits
# make 13, and each commit waits on the disk (0.01-2.3 s wall, issue 37) while this
# process could be chunking. Files not written yet are still found by an answer's search
# of the unread files.
FIRST_ANSWER_WINDOW_S = 5.0
WRITE_INTERVAL_LATE_S = 4.0
MAX_REPORTED_ERRORS = 20


def _task_batches(tasks: Sequence[FileTask]) -> Iterator[list[FileTask]]:
    batch: list[FileTask] = []
    size = 0
    for task in tasks:
        batch.append(task)
        size += task.size
        if len(batch) >= TASK_BATCH_FILES or size >= TASK_BATCH_BYTES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def outcomes(tasks: Sequence[FileTask], config: ContextConfig, workers: int,
             cancel: threading.Event, store: IndexStore | None = None,
             gives_way: Callable[[], bool] = lambda: False) -> Iterator[Outcome]:
    """Process ``tasks`` (in a pool of ``workers`` processes when there are enough) and
    yield their outcomes; stops when ``cancel`` is set. With ``store`` (a contextualizer
    caching its prefixes there) every file is processed inline.

    The pool works through the tasks front to back (priority order). Whenever its oldest
    batch is not ready, this process takes the next batch not yet sent and processes it
    itself: the writer's core would otherwise idle while the pool chunks (the pool has
    cores - 1 workers, one core being kept for the writer and the embedding stage), unless
    ``gives_way()`` says this process is answering a query (it then waits for the pool).
    Both take from the front, so a run cut short by a deadline has read the files that come
    first (taking from the back read tests and configuration in half the time given). Once
    every batch is sent, this process takes back the last one the pool has not started yet
    (issue 37: it otherwise waited for the pool's queue alone at the end of a run, one core
    idle; on pydantic at load 14, 4.7 s of the run)."""
    if workers < 1 or len(tasks) < POOL_MIN_FILES or store is not None:
        yield from _inline(tasks, config, cancel, store)
        return
    context = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(workers, mp_context=context, initializer=init_worker,
                             initargs=(config, os.getpid())) as pool:
        waiting = collections.deque(_task_batches(tasks))
        pending: collections.deque[tuple[Future, list[FileTask]]] = collections.deque()

        def send() -> None:
            batch = waiting.popleft()
            pending.append((pool.submit(process_batch, batch), batch))

        try:
            while waiting and len(pending) < workers * 3:
                send()
            while pending and not cancel.is_set():
                if not pending[0][0].done() and not gives_way():
                    if waiting:
                        yield from _inline(waiting.popleft(), config, cancel)
                        continue
                    if len(pending) > 1 and pending[-1][0].cancel():
                        yield from _inline(pending.pop()[1], config, cancel)
                        continue
                results = load_outcomes(pending.popleft()[0].result())
                if waiting:
                    send()
                yield from results
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


def _inline(tasks: Sequence[FileTask], config: ContextConfig, cancel: threading.Event,
            store: IndexStore | None = None) -> Iterator[Outcome]:
    """Process ``tasks`` in this process, one by one, until ``cancel`` is set; each file
    with the garbage collector paused, as a pool worker does (:func:`collector_paused`),
    unless a contextualizer caching its prefixes in ``store`` may wait on its endpoint for
    seconds meanwhile."""
    for task in tasks:
        if cancel.is_set():
            return
        with collector_paused() if store is None else contextlib.nullcontext():
            outcome = process_file(task, config, store)
        yield outcome


def _without_chunks(task: FileTask) -> FileRecord:
    """The file_state of a file that failed (no content hash: any change re-reads it)."""
    return FileRecord(path=task.path, size_bytes=task.size, mtime_ns=task.mtime_ns,
                      content_hash="", language=None, chunks=[])


class Writer:
    """Accumulates outcomes and stores them in atomic batches; keeps the report's counts
    and the bootstrap progress rows current."""

    def __init__(self, store: IndexStore, report: IndexReport, progress: Progress,
                 track_progress: bool, fail_fast: bool, on_written: Callable[[], None],
                 by_time: bool = True):
        self.store = store
        # Whether a batch is also written after WRITE_BATCH_SECONDS (and more): early files
        # of a whole-project run become queryable early.
        self.by_time = by_time
        self.report = report
        self.progress = progress
        self.track_progress = track_progress
        self.fail_fast = fail_fast
        self.on_written = on_written
        self.files_done = 0
        self._records: list[FileRecord] = []
        self._same: list[FileTask] = []
        self._vanished: list[str] = []
        self._failed: list[Outcome] = []
        self._unparsed: list[Outcome] = []  # indexed as line windows, reason recorded
        self._chunks = 0
        self._started = self._last_flush = time.monotonic()
        self._interval = WRITE_BATCH_SECONDS
        self._current: str | None = None
        self._texts: set[int] = set()

    @property
    def distinct_texts(self) -> int:
        """Distinct index texts written (the embedding cache's unit of work)."""
        return len(self._texts)

    def add(self, outcome: Outcome) -> None:
        self._current = outcome.task.path
        if outcome.status == INDEXED:
            assert outcome.record is not None
            self._records.append(outcome.record)
            if outcome.error_type:
                self._unparsed.append(outcome)
            self._chunks += len(outcome.record.chunks)
            self._texts.update(hash(c.index_text) for c in outcome.record.chunks)
            self.report.lines_indexed += outcome.lines
            self.report.bytes_indexed += outcome.task.size
            self.report.secrets_redacted += outcome.record.secrets_redacted
        elif outcome.status == SAME:
            self._same.append(outcome.task)
        elif outcome.status == VANISHED:
            self._vanished.append(outcome.task.path)
        elif outcome.status == FAILED:
            self._failed.append(outcome)
        pending = len(self._records) + len(self._same) + len(self._vanished) + len(self._failed)
        if (outcome.status == FAILED and self.fail_fast) or pending >= WRITE_BATCH_FILES \
                or self._chunks >= WRITE_BATCH_CHUNKS \
                or (self.by_time and time.monotonic() - self._last_flush >= self._interval):
            self.flush()

    def flush(self) -> None:
        """Store everything accumulated in one transaction (one commit per batch of files;
        a kill leaves the files of a batch and their progress rows stored together or not)."""
        store, report = self.store, self.report
        began = time.monotonic()
        with store.batch():
            self._store_batch()
        self.files_done += (len(self._records) + len(self._same) + len(self._vanished)
                            + len(self._failed))
        failed, self._failed, self._unparsed = self._failed, [], []
        self._records, self._same, self._vanished, self._chunks = [], [], [], 0
        self._last_flush = time.monotonic()
        if self._last_flush - self._started < FIRST_ANSWER_WINDOW_S:
            self._interval = min(WRITE_INTERVAL_MAX_S, max(
                WRITE_BATCH_SECONDS, WRITE_INTERVAL_FACTOR * (self._last_flush - began)))
        else:
            self._interval = WRITE_INTERVAL_LATE_S
        self.progress.update(self.files_done, report.chunks_written, self._current)
        self.on_written()
        if failed and self.fail_fast:
            first = failed[0]
            raise ContextdError(f"indexing stopped at {first.task.path}: {first.message} "
                                "(bootstrap.fail_fast is on)")

    def _store_batch(self) -> None:
        """The rows of everything accumulated: files, refreshed stats, removals, errors and
        bootstrap progress (called inside one store transaction)."""
        store, report = self.store, self.report
        if self._records:
            store.write_files(self._records)
            store.clear_errors([r.path for r in self._records])
            for outcome in self._unparsed:
                store.record_error(outcome.task.path, outcome.error_type, outcome.message)
            report.files_indexed += len(self._records)
            report.chunks_written += self._chunks
        if self._same:
            store.update_file_stats([(t.path, t.size, t.mtime_ns) for t in self._same])
            report.files_unchanged += len(self._same)
        if self._vanished:
            report.files_removed += store.delete_files(self._vanished)
            report.note_vanished(self._vanished)
        if self._failed:
            # A file that failed is stored without chunks, under its size and mtime: it is
            # not read again until it changes, and its stale chunks (if any) go away.
            store.write_files([_without_chunks(o.task) for o in self._failed])
        for outcome in self._failed:
            self._record_failure(outcome)
        done = [r.path for r in self._records] + [t.path for t in self._same] + self._vanished
        if self.track_progress:
            store.progress_mark(done, "completed")

    def _record_failure(self, outcome: Outcome) -> None:
        path = outcome.task.path
        self.store.record_error(path, outcome.error_type, outcome.message, outcome.trace)
        if self.track_progress:
            self.store.progress_mark([path], "failed", outcome.message)
        self.report.files_failed += 1
        if len(self.report.errors) < MAX_REPORTED_ERRORS:
            self.report.errors.append(f"{path}: {outcome.message}")
