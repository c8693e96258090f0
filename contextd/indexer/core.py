"""The Indexer: bootstrap, resume, incremental catch-up and refresh of one project's index.

One pipeline for every trigger (first start, restart after a crash, ``contextd refresh``, the
watcher, a rebuild job): plan against ``file_state`` (size+mtime, then BLAKE3), process files
in a worker pool, store each batch of files atomically, and let the embedding stage fill in
vectors beside it. Runs are serialised by a lock: a watcher batch waits for a rebuild.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import functools
import os
import stat as stat_mod
import threading
import time
from typing import Any, Callable, Iterable, Iterator, Sequence

from contextd.boundary.walk import (SKIP_DIR_REASONS, SKIP_REASONS, Boundary, FileEntry,
                                    RejectReason)
from contextd.chunkers.chunking import chunking_signature
from contextd.contextualizers.stage import (contextualizer_signature, counters_since, needs_store,
                                   stage_stats)
from contextd.embedders import scratch_memory
from contextd.embedders.common import cpu_count
from contextd.embedders.registry import embedding_stats, get_embedder, remote_run_counters
from contextd.errors import UsageError
from contextd.indexer.embed_follow import VectorFollower
from contextd.indexer.embed_stage import WINDOW_BATCHES, EmbeddingStage, embed_missing
from contextd.indexer.pipeline import Writer, outcomes
from contextd.indexer.plan import (PUSHED_MTIME_NS, FileTask, order_by_priority,
                                   plan_changes, scope)
from contextd.indexer.recency import recently_touched
from contextd.indexer.reuse import RecentChunks
from contextd.indexer.worker import process_data
from contextd.indexer.report import BUSY, IndexReport
from contextd.indexer.interrupts import is_interrupt
from contextd.boundary.path_args import (RefusedPath, check_path, check_paths, refusal_text,
                                         shown)
from contextd.indexer.progress import (JobProgress, NullProgress, Progress, TeeProgress, WorkFigures,
                               format_duration)
from contextd.config.project import Project
from contextd.scrub.scrubber import scrubbing_signature
from contextd.store.base import FileState, IndexStore, SkippedFile

# index_meta keys: the measured indexing rate (for rebuild estimates) and the signature of
# the chunking and contextualizer the stored chunks and index texts were built with.
THROUGHPUT_META_KEY = "indexing_bytes_per_second"
# What pathlib's exists() and is_dir() read as "no such file" (pathlib._ignore_error).
_GONE_ERRNOS = frozenset((errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP))
# The embedding rate measured by the last long embedding of pending vectors (texts/s).
EMBEDDING_RATE_META_KEY = "embedding_texts_per_second"
EMBEDDING_RATE_MIN_TEXTS = 200  # fewer measure the start, not the rate
SIGNATURE_META_KEY = "index_text_signature"
THROUGHPUT_MIN_BYTES = 256 * 1024  # smaller runs measure start-up, not throughput
# embed_pending counts the chunks still pending after every this many windows (between
# them it subtracts what it embedded; chunks written meanwhile show at the next count).
RECOUNT_WINDOWS = 10


# ensure_indexed's report when the index is empty and bootstrap.enabled is false.
BOOTSTRAP_OFF = "bootstrap disabled"
# Runs given less time than this (seconds) read in this process, without a worker pool.
POOL_WORTH_S = 5.0
# The files a catch-up given a reading window (a command's first answer) reads however
# long the walk before them took: on a machine at load 7-24 the 1.5 s window was spent
# before the first file of a tiny project was read, and the answer came from the unread
# scan alone (tests/test_doc_examples.py's README example failed). About a second at the
# owner's slowest pace seen (56 files/s at load 10); a project this small is always whole.
WINDOW_FLOOR_FILES = 50
# ... and no more of them than fit in this many bytes (at least one file): fastapi's first
# 50 files in priority order are its largest modules, 616 KB, read in-line after the window
# had ended (0.74 s of a 3.7 s first answer at load 0.3, issue 37); the unread scan finds
# what the floor leaves. 128 KB is ~0.15 s of chunking, and more than a small project holds.
WINDOW_FLOOR_BYTES = 128 * 1024
# The follower's window (batches): a run that starts while one is being embedded waits for
# it beside ONNX Runtime on every core. Eight batches (512 texts) kept the refresh of a
# ``git checkout`` on fastapi sharing the machine with the model for a minute at load 10
# (issue 37: 1,447 of the owner's samples in ONNX while it read 751 changed files).
FOLLOW_WINDOW_BATCHES = 2
# A refresh of at most this many paths asks the store for each one's states; more read
# every state once (Indexer._states_under).
FEW_PATHS = 16
# How often the vector follower, waiting for a run to let the index go, checks for a stop.
NO_RUN_POLL_S = 0.25
# The store claim every run holds (Indexer.running): one run per index across processes.
INDEX_CLAIM = "index"
# Runs that read a whole scope: their embedding batches follow bootstrap.batch_size.
WHOLE_RUNS = frozenset({"bootstrap", "resume", "rebuild"})
# Runs that read the whole project, a catch-up of its changes included.
PROJECT_RUNS = WHOLE_RUNS | {"incremental"}


def floor_count(tasks: Sequence[FileTask], files: int, max_bytes: int) -> int:
    """How many of the first ``tasks`` a reading window's floor reads: at most ``files``,
    those whose sizes add up to ``max_bytes`` or less, and at least one (none when ``files``
    is 0: the run has no floor)."""
    total = 0
    for count, task in enumerate(tasks[:files]):
        total += task.size
        if total > max_bytes:
            return max(1, count)
    return min(files, len(tasks))


def index_signature(config) -> str:
    """What the stored chunks and index texts depend on besides the files themselves (the
    redaction, the chunking, the contextualizer): a change re-indexes every file at the next
    catch-up."""
    return (f"{scrubbing_signature(config.security)}|{chunking_signature(config)}|"
            f"{contextualizer_signature(config)}")


class _FileFigures(Progress):
    """Keeps the indexer's live file figures (files done / left, rate) for status()."""

    def __init__(self, figures: WorkFigures, offset: int):
        self.figures = figures
        self.offset = offset
        self.total = 0

    def start(self, total_files: int, label: str = "indexing") -> None:
        self.total = total_files

    def update(self, files_done: int, chunks_done: int, current_file: str | None = None
               ) -> None:
        self.figures.record(self.offset + files_done, max(0, self.total - files_done))


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
        self._run_depth = 0  # runs nested in this thread's (see running)
        self._embed_lock = threading.Lock()
        self._state = "idle"
        self._files_total: int | None = None
        self._run_mode = ""
        self._embed_now = True
        self._pool_allowed = True
        self._window_floor = 0  # files read whatever the reading window (_reading_window)
        self._embedding_busy = False
        # Clear while a run holds the index (its boundary checks, reading, writing): the
        # vector follower waits for it between windows.
        self._no_run = threading.Event()
        self._no_run.set()
        # Whether this process is answering a query now: the run's own chunking waits for
        # the pool meanwhile (the engine sets it; contextd.query.catch_up.answering_now).
        self.gives_way: Callable[[], bool] = lambda: False
        # Called after each batch a run writes: the owner's in-memory indexes follow the
        # writes in the background as they come (the engine sets it; contextd.query.catch_up).
        # Followed from answers only, an owner's first full read of fastapi ended with 2,655
        # files not taken in yet, and the answers of a checkout right after it searched them
        # as text (issue 37).
        self.after_write: Callable[[], None] = lambda: None
        # Whether the answers' in-memory indexes are taking in written files, or the
        # watcher holds changes for its next batch (the engine sets it): the vector
        # follower waits for that too between windows, as for a run.
        # After a checkout the model took a core beside that catch-up, and the answers
        # are current only once it is done; the vectors can wait seconds.
        self.taking_in: Callable[[], bool] = lambda: False
        # Live figures for stats and query notes: files of the current run, vectors.
        self.file_figures = WorkFigures("files indexed")
        self.embedding_figures = WorkFigures("chunks embedded")
        # Set by follow_vectors() in a process that stays up: see _run.
        self.follower: VectorFollower | None = None
        # The chunks its refreshes cut lately, in a process that stays up (follow_vectors):
        # a branch switched back takes them back instead of chunking its files again.
        self.recent: RecentChunks | None = None

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

    @contextlib.contextmanager
    def running(self, wait: bool = True) -> Iterator[bool]:
        """Held by every run (bootstrap, catch-up, refresh, push), and by a caller that must
        not interleave with one (a rebuild dropping its scope); yields False when ``wait`` is
        off and a run holds it. Beside this process's run lock, the outermost holder claims
        the index in the store (``try_exclusive("index")``): on a PostgreSQL workspace
        written by several processes, a second refresh waits for the first, then finds the
        files current, instead of doing the whole job again (issue 40: the per-file locks
        only kept the two from writing one file at once)."""
        if not self._run_lock.acquire(blocking=wait):
            yield False
            return
        try:
            release = None
            if self._run_depth == 0:
                release = self.store.try_exclusive(INDEX_CLAIM, wait=wait)
                if release is None:
                    yield False
                    return
            self._run_depth += 1
            self._no_run.clear()
            try:
                yield True
            finally:
                self._run_depth -= 1
                if self._run_depth == 0:
                    self._no_run.set()
                if release is not None:
                    release()
        finally:
            self._run_lock.release()

    def reload(self) -> None:
        """Re-read the configuration and the ignore rules (a changed .gitignore,
        .contextignore or context.toml); the next run judges every file anew."""
        with self._run_lock:
            self.project = Project.open(self.project.root, self.project.config.source)
            self._boundary = None
            if self.recent is not None:  # cut by the old settings
                self.recent.clear()

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
                       cancel: threading.Event | None = None, embed: bool = True,
                       wait: bool = True, within_s: float | None = None) -> IndexReport:
        """Make the index current: resume an interrupted bootstrap, bootstrap an empty index,
        or catch up with changes made while nothing was watching. ``embed=False`` leaves the
        vectors to a later run (the CLI hands a large first embedding to a background owner,
        answering from the lexical and symbol indexes at once). ``wait=False``: when another
        thread's run is under way (an owner's catch-up of a large project), return at once
        with a ``busy`` report instead of waiting for it; the caller answers from what is
        indexed, and the answer's notes say what is not. ``within_s``: stop reading files
        after this many seconds, by setting ``cancel`` (a new event when none is given; the
        run is then ``cancelled`` with ``files_left``: a bootstrap's stay pending and the
        next run resumes them)."""
        with self.running(wait) as running:
            if not running:
                return IndexReport(mode=BUSY)
            with self._reading_window(within_s, cancel, WINDOW_FLOOR_FILES) as cancel:
                self._embed_now = embed
                try:
                    return self._ensure_indexed(progress, cancel)
                finally:
                    self._embed_now = True

    @contextlib.contextmanager
    def _reading_window(self, within_s: float | None, cancel: threading.Event | None,
                        floor: int = 0) -> Iterator[threading.Event | None]:
        """The run's cancel event, set after ``within_s`` seconds (None: never); its first
        ``floor`` files are read all the same (:meth:`_outcomes`). A pool of chunking
        processes takes about a second to start, and a cancel waits for the batches it
        holds: a run given less than POOL_WORTH_S reads in this process."""
        if within_s is None:
            yield cancel
            return
        cancel = cancel or threading.Event()
        timer = threading.Timer(max(0.0, within_s), cancel.set)
        timer.daemon = True
        timer.start()
        self._pool_allowed = within_s >= POOL_WORTH_S
        self._window_floor = floor
        try:
            yield cancel
        finally:
            timer.cancel()
            self._pool_allowed = True
            self._window_floor = 0

    def _ensure_indexed(self, progress: Progress | None, cancel: threading.Event | None
                        ) -> IndexReport:
        with self.running():
            signature = index_signature(self.config)
            job_id, pending = self.store.progress_pending()
            if pending:
                report = self._resume(job_id, pending, progress, cancel)
            elif not self.store.file_states():
                if not self.config.bootstrap.enabled:  # only what it is given gets indexed
                    return IndexReport(mode=BOOTSTRAP_OFF)
                report = self.bootstrap(progress=progress, cancel=cancel)
            else:
                # Chunks cut by other chunking settings or code, or index texts built by
                # another contextualizer, must all be rebuilt.
                force = self.store.get_meta(SIGNATURE_META_KEY) not in (None, signature)
                # An index the settings keep partial (bootstrap off: what it was given; a
                # max_initial_files cap) catches up on its own files only: adding every new
                # file here would undo the setting at the next command.
                bootstrap = self.config.bootstrap
                report = self._refresh(None, force, progress, cancel, mode="incremental",
                                       known_only=not bootstrap.enabled
                                       or bootstrap.max_initial_files > 0)
            if not report.cancelled:
                self.store.set_meta(SIGNATURE_META_KEY, signature)
            return report

    def bootstrap(self, prefixes: Sequence[str] | None = None, progress: Progress | None = None,
                  cancel: threading.Event | None = None, job_id: str | None = None,
                  mode: str = "bootstrap") -> IndexReport:
        """Index every file in scope (all, or under ``prefixes``) in priority order, tracking
        each in bootstrap_progress so an interruption resumes where it stopped. Files already
        stored with the same content are skipped (the caller clears them to force)."""
        with self.running():
            entries = self._in_priority_order(self._walk(prefixes))
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
            # The job row carries live figures over the whole scope (Index Manager,
            # get_context_stats, get_rebuild_status), whoever else watches the run.
            done_before = len(entries) - len(plan.tasks)
            progress = TeeProgress(progress, JobProgress(self.store, job_id,
                                                         done_before=done_before))
            with self._interruptible(job_id):
                report = self._run(plan.tasks, mode, progress, cancel, track_progress=True,
                                   total=len(entries))
            report.files_seen, report.files_unchanged = plan.seen, \
                report.files_unchanged + plan.unchanged
            if not report.cancelled:
                gone = self._drop_vanished(entries)
                report.files_removed += len(gone)
                # Stored by this run, then deleted before it ended: not in the index.
                written = {t.path for t in plan.tasks}
                report.files_indexed -= sum(1 for path in gone if path in written)
                report.note_vanished(gone)
            self._finish_bootstrap(job_id, report, done_before)
            return report

    def refresh(self, paths: Sequence[str] | None = None, force: bool = False,
                progress: Progress | None = None, cancel: threading.Event | None = None,
                within_s: float | None = None) -> IndexReport:
        """Re-index what changed among ``paths`` (files or directories, relative to the root
        or absolute; None: the whole project). A path that no longer exists, or that the
        boundary now excludes, is removed. ``force`` re-chunks even unchanged files (vectors
        still come from the cache). ``within_s``: stop reading after this long (the report
        is then ``cancelled``), as :meth:`ensure_indexed`."""
        with self.running(), self._reading_window(within_s, cancel) as cancel:
            return self._refresh(paths, force, progress, cancel, mode="refresh")

    def checked_paths(self, paths: Sequence[str]) -> tuple[list[str], list[RefusedPath]]:
        """The usable ``paths`` of a refresh or rebuild (root-relative) and the refused ones
        with their reasons (:func:`contextd.boundary.path_args.check_paths`); a missing path
        is usable only while the index holds files under it (the refresh removes them).
        One check for every caller, so a queued refresh is refused exactly as a run one."""
        return check_paths(self.project.root, paths,
                           known=lambda rel: bool(self.store.file_states(rel)))

    def relative(self, path: str) -> str:
        """``path`` (absolute, or relative to the root) as a root-relative POSIX path, checked
        as every path argument is (:mod:`contextd.boundary.path_args`); UsageError with the reason."""
        rel, reason = check_path(self.project.root, path)
        if rel is None or rel == ".":
            raise UsageError(f"{shown(path)} {reason or 'is the project root, not a file'}")
        return rel

    def indexable(self, path: str, on_disk: bool = True) -> str:
        """``path`` as a root-relative path the boundary lets in; UsageError with the reason
        otherwise. ``on_disk``: the file must also exist (it is to be read from disk)."""
        rel = self.relative(path)
        decision = self.boundary.check(rel)
        if decision.reason == RejectReason.NOT_FOUND:
            if on_disk:
                raise UsageError(f"{rel} does not exist on disk: send its text as content, "
                                 "or create the file first")
        elif not decision.indexable:
            raise UsageError(f"{rel} is outside what this project indexes: {decision.detail}")
        return rel

    def push(self, path: str, data: bytes, progress: Progress | None = None) -> IndexReport:
        """Index ``data`` as the content of project file ``path`` (the service's
        ``add_context``): same scrubbing, chunking and embedding as a file read from disk.
        Recorded with :data:`PUSHED_MTIME_NS`, so a file that exists on disk is re-indexed from
        disk at its next change or catch-up (the disk stays the truth), and a document with
        no file behind it stays until ``delete_context`` or a rebuild."""
        rel = self.indexable(path, on_disk=False)
        limit = self.config.indexing.max_file_size_mb * 1024 * 1024
        if len(data) > limit:
            raise UsageError(f"{rel}: {len(data)} bytes is over indexing.max_file_size_mb")
        with self.running():
            state = self.store.file_states(rel).get(rel)
            task = FileTask(rel, str(self.project.root / rel), len(data), PUSHED_MTIME_NS,
                            state.content_hash if state is not None else None)
            return self._run([task], "push", progress, None, track_progress=False, total=1,
                             produce=lambda store: [process_data(task, data, self.config,
                                                                 store)])

    def remove(self, path: str) -> bool:
        """Drop one file from the index (the service's ``delete_context``); True when it was
        indexed."""
        rel = self.relative(path)
        with self._run_lock:
            return self.store.delete_files([rel]) > 0

    def reset(self) -> int:
        """Drop every indexed project file with its errors and bootstrap progress
        (reinitialize_schema); the next :meth:`ensure_indexed` bootstraps afresh. Returns the
        files dropped."""
        with self._run_lock:
            dropped = self.store.clear_index()
            self.store.clear_errors()
            self.store.progress_clear()
            return dropped

    def follow_vectors(self, progress: Callable[[], Progress] | None = None
                       ) -> VectorFollower:
        """From now on, a run that is not a whole-project one (a refresh, a catch-up, a
        watcher batch; a push still embeds its one file) returns once its chunks are
        written, and their vectors follow in the background
        (:mod:`contextd.indexer.embed_follow`), each round reported to a ``progress()``
        sink. For a process that stays up to compute them: the owner, whose embedding
        batches shrink near its ``[owner] memory_limit_mb`` (issue 37), and whose
        refreshes from now on keep the chunks they cut for a branch switched back
        (:mod:`contextd.indexer.reuse`)."""
        if self.follower is None:
            scratch_memory.limit_to(self.config.owner.memory_limit_mb)
            self.recent = RecentChunks(limit_mb=self.config.owner.memory_limit_mb)
            self.follower = VectorFollower(
                lambda cancel, sink: self.embed_pending(cancel=cancel, progress=sink,
                                                        runs_first=True),
                progress)
        return self.follower

    def embed_pending(self, cancel: threading.Event | None = None,
                      progress: Progress | None = None, runs_first: bool = False) -> int:
        """Compute every missing vector now; returns how many texts were embedded.

        Runs outside the run lock, so refreshes, watcher batches and catch-ups go on
        meanwhile (an owner answers "at once" from the lexical and symbol indexes while
        this fills in the vectors, in the order files were written). ``runs_first`` (the
        owner's follower): before each window, wait while a run holds the index (a
        refresh checks its paths against the boundary, reads and writes) or the answers'
        in-memory indexes take in what it wrote (``taking_in``), and embed in
        windows of FOLLOW_WINDOW_BATCHES batches, a piece of a few texts at a time; such
        work starting meanwhile ends the window after the piece under way
        (:func:`embed_missing`'s ``yields``), the most it waits beside the model. On 2
        cores the model took one beside a watcher's refresh after a ``git checkout`` (issue 37: 1,127
        of 2,893 samples of the owner in ONNX during the next answer), slowing the lexical
        answer's catch-up; the vectors can wait seconds. The figures (done, pending, rate,
        ETA) feed :meth:`status` and ``progress``."""
        embedder = self.embedder
        progress = progress or NullProgress()
        figures = self.embedding_figures = WorkFigures("chunks embedded")
        done = windows = 0

        def on_batch(count: int) -> None:
            nonlocal done, pending, windows
            done += count
            windows += 1
            # Counted again now and then only: the count scans every chunk (~0.1 s at 60k),
            # a few percent of the embedding's own time if done after every window.
            if windows % RECOUNT_WINDOWS == 0:
                pending = self.store.count_missing_embeddings(embedder.identity)
            else:
                pending = max(0, pending - count)
            figures.record(done, pending)
            progress.embedding(done, pending)

        pending = self.store.count_missing_embeddings(embedder.identity)
        figures.record(0, pending)
        progress.embedding(0, pending)
        self._embedding_busy = True
        try:
            if pending:
                embedder.embed_query("warm up")  # load (or export) the model off the clock
                figures.restart_clock()
            embedded = embed_missing(self.store, embedder, self.config.embedding.batch_size,
                                     cancel, self._embed_lock, on_batch,
                                     before_window=(lambda: self._wait_for_no_run(cancel))
                                     if runs_first else None,
                                     window_batches=FOLLOW_WINDOW_BATCHES if runs_first
                                     else WINDOW_BATCHES,
                                     yields=self._others_first if runs_first else None)
            figures.record(done, self.store.count_missing_embeddings(embedder.identity))
            if embedded >= EMBEDDING_RATE_MIN_TEXTS and figures.rate > 0:
                self.store.set_meta(EMBEDDING_RATE_META_KEY, f"{figures.rate:.1f}")
            return embedded
        finally:
            self._embedding_busy = False

    def _written(self, stage: EmbeddingStage | None) -> None:
        """A run wrote a batch: its embedding stage and the in-memory indexes follow."""
        if stage is not None:
            stage.wake()
        self.after_write()

    def _others_first(self) -> bool:
        """Whether the follower must let other work go first: a run holds the index, or
        the answers' in-memory indexes are taking in what one wrote (``taking_in``)."""
        return not self._no_run.is_set() or self.taking_in()

    def _wait_for_no_run(self, cancel: threading.Event | None) -> None:
        """Return once no run holds the index and the answers' in-memory indexes are not
        taking in written files (``taking_in``), or ``cancel`` is set."""
        pause = cancel if cancel is not None else threading.Event()
        while not self._no_run.wait(NO_RUN_POLL_S) or self.taking_in():
            if pause.is_set():
                return
            if self._no_run.is_set():  # taking in only: nothing to be woken by
                pause.wait(NO_RUN_POLL_S)

    @property
    def indexing(self) -> bool:
        """Whether files are being read and chunked right now."""
        return self._state == "indexing"

    @property
    def reading_project(self) -> bool:
        """Whether a run over the whole project (a bootstrap, its resume, a catch-up, a
        rebuild) is reading files now: an answer meanwhile may miss files not read yet (a
        watcher's batch of a few files is not worth saying so)."""
        return self._state == "indexing" and self._run_mode in PROJECT_RUNS

    @property
    def never_indexed(self) -> bool:
        """Whether no catch-up or bootstrap has ever finished and no file is indexed: a new
        project whose first indexing has not started or not got far (an empty folder, once
        indexed, is not)."""
        return not self.store.file_states() and self.store.get_meta(SIGNATURE_META_KEY) is None

    @property
    def embedding_under_way(self) -> bool:
        """Whether vectors are being computed now, or about to be, with some still pending.
        A woken follower counts from that moment (a run wakes it before it reads idle):
        before its round counts the vectors missing, an answer without semantic hits would
        otherwise say nothing."""
        if self._embedding_busy:
            return bool(self.embedding_figures.pending)
        if self.follower is not None and self.follower.running and self.embed:
            try:
                return bool(self.store.count_missing_embeddings(self.embedder.identity))
            except Exception:  # an unavailable model is reported by stats, not here
                return False
        return self._state != "idle" and bool(self.embedding_figures.pending)

    @property
    def busy(self) -> bool:
        """Whether a run or a background embedding is under way."""
        return self._state != "idle" or self._embedding_busy

    @property
    def state(self) -> str:
        """``idle``, ``indexing`` or ``embedding``, without touching the store."""
        return self._state

    def status(self) -> dict[str, Any]:
        """Indexing state for get_context_stats and ``contextd stats``: ``state`` (idle,
        indexing, embedding), ``files_indexed``, ``files_total``, ``embeddings_pending``,
        ``embedding`` (vectors computed by the running stage, rate, ETA), ``eta_seconds`` of
        the files, ``left_out`` (files of a cancelled or interrupted run, indexed by the
        next one) and ``text`` ("N / M files; ...")."""
        indexed = len(self.store.file_states())
        state = "embedding" if self._state == "idle" and self._embedding_busy else self._state
        running = self._state == "indexing" and self._files_total
        total = self._files_total if running else indexed
        try:
            pending = self.store.count_missing_embeddings(self.embedder.identity) \
                if self.embed else None
        except Exception:  # an unavailable model is reported by stats, not here
            pending = None
        text = f"{indexed:,} / {total:,} files"
        eta = self.file_figures.eta_seconds if running else None
        if eta is not None:
            text += f", ETA {format_duration(eta)}"
        embedding = self.embedding_figures
        if pending:
            if embedding.pending is not None and state != "idle":
                text += f"; {embedding.text()}"
            else:
                text += f"; {pending:,} chunks waiting for their vectors"
        _, left_out = self.store.progress_pending() if not running else (None, [])
        if left_out:
            text += f"; {len(left_out):,} files left out by an interrupted run (the next " \
                    "run indexes them)"
        return {"state": state, "files_indexed": indexed, "files_total": total,
                "eta_seconds": None if eta is None else round(eta),
                "embeddings_pending": pending,
                "embedding": embedding.as_dict() if embedding.started is not None else None,
                "left_out": len(left_out), "text": text}

    # ----- internals ---------------------------------------------------------------------
    def _in_priority_order(self, entries: Iterable[FileEntry]) -> list[FileEntry]:
        """``entries`` in the bootstrap's priority order (:func:`order_by_priority`), by this
        project's priority extensions and recent git history."""
        return order_by_priority(entries, self.config.bootstrap.priority_extensions,
                                 recently_touched(self.project.root))

    def _resume(self, job_id: str | None, pending: list[str], progress: Progress | None,
                cancel: threading.Event | None) -> IndexReport:
        wanted = set(pending)
        # In priority order again: a resumed first answer's files are read source first.
        entries = self._in_priority_order(e for e in self.boundary.iter_files()
                                          if e.path in wanted)
        states = {p: s for p, s in self.store.file_states().items() if p in wanted}
        plan = plan_changes(entries, states)
        gone = wanted - {e.path for e in entries}
        # The figures go on from where the interrupted run stopped: of the job's files, all
        # but the ones to read now are done (issue 40: "0 / 611" after a session closed).
        job = self.store.get_job(job_id) if job_id else None
        total = max(job.files_total or 0, len(pending)) if job is not None else len(pending)
        done_before = total - len(plan.tasks)
        if job is not None:
            progress = TeeProgress(progress, JobProgress(self.store, job.job_id,
                                                         done_before=done_before))
            if job.job_type == "bootstrap":  # running again: no longer "interrupted"
                self.store.update_job(job.job_id, status="in_progress", error_message=None)
        with self._interruptible(job_id):
            report = self._run(plan.tasks, "resume", progress, cancel, track_progress=True,
                               total=total)
        report.files_removed += self.store.delete_files(plan.removed)
        self.store.progress_mark(sorted(gone), "completed")
        report.files_seen = plan.seen
        report.files_unchanged += plan.unchanged
        if job_id:
            self._finish_bootstrap(job_id, report, done_before)
        else:
            self.store.progress_clear()
        return report

    @contextlib.contextmanager
    def _interruptible(self, job_id: str | None):
        """Ctrl-C (:mod:`contextd.indexer.interrupts`) during a tracked run marks its job ``interrupted``
        before it propagates; the bootstrap progress rows stay, so the next run resumes
        where this one stopped."""
        try:
            yield
        except BaseException as exc:
            if job_id and is_interrupt(exc):
                self.store.update_job(job_id, status="interrupted", completed_at="now",
                                      error_message="interrupted (Ctrl-C); the next run "
                                                    "resumes it")
            raise

    def _finish_bootstrap(self, job_id: str, report: IndexReport, done_before: int = 0
                          ) -> None:
        """A completed bootstrap (or its resume): progress forgotten, the job row's final
        figures, counting the files of the job done before this run (``done_before``)."""
        if report.cancelled:
            return
        self.store.progress_clear()
        job = self.store.get_job(job_id)
        if job is not None and job.job_type == "bootstrap":
            # error_message cleared: a resumed job's "interrupted" note is no longer true.
            self.store.update_job(job_id, status="completed", completed_at="now",
                                  error_message=None,
                                  files_processed=done_before + report.files_indexed,
                                  chunks_processed=report.chunks_written,
                                  metrics=dataclasses.asdict(report))

    def _refresh(self, paths: Sequence[str] | None, force: bool, progress: Progress | None,
                 cancel: threading.Event | None, mode: str, known_only: bool = False
                 ) -> IndexReport:
        """Bring the files under ``paths`` (None: the project) up to date; ``known_only``:
        only those the index holds (changed or gone), no new file added."""
        rels, refused = None, []
        if paths is not None:
            rels, refused = self.checked_paths(paths)
            if not rels:
                raise UsageError(f"nothing to refresh: {refusal_text(refused)}")
            if "." in rels:
                rels = None
        entries = self._entries_for(rels)
        states = self._states_under(rels)
        if known_only:
            entries = [e for e in entries if e.path in states]
        plan = plan_changes(entries, states, force, rels)
        removed = self.store.delete_files(plan.removed) if plan.removed else 0
        report = self._run(plan.tasks, mode, progress, cancel, track_progress=False,
                           total=len(states) + len(plan.tasks), reuse=not force)
        report.files_seen = plan.seen
        report.files_unchanged += plan.unchanged
        report.files_removed += removed
        report.refused = [dataclasses.asdict(r) for r in refused]
        if not report.cancelled:
            self._settle_left_out(rels)
        return report

    def _states_under(self, rels: list[str] | None) -> dict[str, FileState]:
        """The stored states of the files under ``rels`` (None: the project). A batch of
        more than a few paths (a ``git checkout``'s: ~750) takes them from one read of
        every state, not one query each (a seventh of the owner's refresh, issue 37)."""
        if rels is None:
            return self.store.file_states()
        if len(rels) <= FEW_PATHS:
            states: dict[str, FileState] = {}
            for rel in rels:
                states.update(self.store.file_states(rel))
            return states
        inside = scope(rels)
        return {p: s for p, s in self.store.file_states().items() if inside(p)}

    def _settle_left_out(self, rels: list[str] | None) -> None:
        """A finished refresh has looked at every file under ``rels`` (None: the project),
        so whatever an interrupted run left pending there is now indexed or gone: its
        bootstrap rows must not go on saying "files left out"."""
        _, pending = self.store.progress_pending()
        if rels is None:
            if pending:
                self.store.progress_clear()
            return
        inside = scope(rels)
        settled = [p for p in pending if inside(p)]
        if settled:
            self.store.progress_mark(settled, "completed")

    def _entries_for(self, rels: list[str] | None) -> list[FileEntry]:
        """Files on disk in scope: a full walk for the project or a directory, one boundary
        check per named file (the watcher's case: no walk at all)."""
        if rels is None:
            return self._walk(None)
        entries, walk = [], []
        for rel in rels:
            path = self.project.root / rel
            # One stat per path, where is_dir, exists and stat took three (issue 37); the
            # errors that pathlib's is_dir and exists read as "not there" are read so here.
            try:
                st = path.stat()
            except OSError as exc:
                if exc.errno not in _GONE_ERRNOS:
                    raise
                continue
            if stat_mod.S_ISDIR(st.st_mode):
                walk.append(rel)
            elif self.boundary.check(rel).indexable:
                entries.append(FileEntry(rel, path, st.st_size, st.st_mtime_ns))
        if walk:
            entries += self._walk(walk)
        return entries

    def _drop_vanished(self, entries: Sequence[FileEntry]) -> list[str]:
        """Remove the files of a finished run that were deleted while it ran (after being
        read, so they were stored): the index then matches the disk when the run ends, not
        at the next refresh."""
        gone = [e.path for e in entries if not os.path.lexists(e.abs_path)]
        if gone:
            self.store.delete_files(gone)
        return gone

    def _walk(self, prefixes: Sequence[str] | None) -> list[FileEntry]:
        """The files in scope on disk (all, or under ``prefixes``). What the boundary refused
        although the project would index it (too large, binary, generated, a secret file) is
        recorded in skipped_files, so stats and check-file users see what is left out."""
        if prefixes is not None and any(p in ("", ".") for p in prefixes):
            prefixes = None
        scan = self.boundary.scan(collect_rejections=True)
        inside = scope(prefixes)
        skips = [SkippedFile(r.path, r.reason.value, r.detail) for r in scan.rejected
                 if r.reason in (SKIP_DIR_REASONS if r.is_dir else SKIP_REASONS)
                 and inside(r.path)]
        self.store.replace_skips(skips, sorted(r.value for r in SKIP_REASONS | SKIP_DIR_REASONS),
                                 prefixes)
        return [e for e in scan.accepted if inside(e.path)]

    def _outcomes(self, tasks: list[FileTask], workers: int, cancel: threading.Event,
                  prefix_store: IndexStore | None) -> Iterator[Any]:
        """The outcomes of ``tasks`` (:func:`outcomes`); the first ``_window_floor`` of a
        run with a reading window are read even once its time is up (:func:`floor_count`)."""
        floor = floor_count(tasks, self._window_floor, WINDOW_FLOOR_BYTES)
        if floor:
            yield from outcomes(tasks[:floor], self.config, workers, threading.Event(),
                                prefix_store, self.gives_way)
        yield from outcomes(tasks[floor:], self.config, workers, cancel, prefix_store,
                            self.gives_way)

    def _reusing(self, recent: RecentChunks, tasks: list[FileTask], workers: int,
                 cancel: threading.Event, prefix_store: IndexStore | None,
                 report: IndexReport) -> Iterator[Any]:
        """The outcomes of ``tasks``: first those whose file's content ``recent`` holds,
        taken back (counted in ``report.files_reused``), then the others read and chunked
        (:meth:`_outcomes`), each kept in ``recent`` for a later switch back."""
        rest = []
        for task in tasks:
            if cancel.is_set():
                return
            outcome = recent.take(task)
            if outcome is None:
                rest.append(task)
            else:
                report.files_reused += 1
                yield outcome
        with contextlib.closing(self._outcomes(rest, workers, cancel, prefix_store)) as read:
            for outcome in read:
                recent.keep(outcome)
                yield outcome

    def _run(self, tasks: list[FileTask], mode: str, progress: Progress | None,
             cancel: threading.Event | None, track_progress: bool, total: int,
             produce: Any = None, reuse: bool = False) -> IndexReport:
        """Process ``tasks`` with the embedding stage running beside the writer; ``produce``
        (given the contextualizer's store) yields the outcomes instead of reading the
        files; ``reuse`` (a refresh): files whose content a recent refresh of this process
        chunked take those chunks back (:meth:`_reusing`)."""
        report = IndexReport(mode=mode)
        progress = progress or NullProgress()
        cancel = cancel or threading.Event()
        started = time.perf_counter()
        stage = None
        remote_before = embedding_stats(self.config.embedding) if self.embed else {}

        def on_embedding(done: int, pending: int) -> None:
            self.embedding_figures.record(done, pending)
            progress.embedding(done, pending)

        # While embed_pending works through the backlog in the background, it also picks up
        # the chunks this run writes: a stage here would only make the run wait for the
        # whole backlog (a client's catch-up, a watcher batch). With a follower, such a run
        # hands its vectors to it and never waits for them (embed=False included: in the
        # owner they follow all the same), and so does a whole run told to leave them out
        # (embed=False: the owner's catch-up).
        follow = (self.follower is not None and mode != "push" and self.embed
                  and (mode not in WHOLE_RUNS or not self._embed_now))
        if self.embed and self._embed_now and not self._embedding_busy and not follow:
            batch = (self.config.bootstrap.batch_size if mode in WHOLE_RUNS
                     else self.config.embedding.batch_size)
            stage = EmbeddingStage(self.store, lambda: self.embedder, batch, self._embed_lock,
                                   cancel, on_embedding).start()
        self._state, self._files_total, self._run_mode = "indexing", total, mode
        self.file_figures = WorkFigures("files indexed")
        self.file_figures.record(total - len(tasks), len(tasks))
        progress = TeeProgress(progress, _FileFigures(self.file_figures, total - len(tasks)))
        # After the tee: the writer's updates are what keeps the live file figures current.
        # Only a whole-project run writes by time as well (its early files answer the first
        # questions); a refresh (a ``git checkout``'s 751 paths on fastapi) writes in full
        # batches: 34 transactions of ~22 files took a fifth of its CPU time, and each woke
        # the in-memory indexes' catch-up beside it (issue 37).
        writer = Writer(self.store, report, progress, track_progress,
                        self.config.bootstrap.fail_fast, functools.partial(self._written, stage),
                        by_time=mode in PROJECT_RUNS)
        progress.start(len(tasks), mode)
        try:
            prefix_store = self.store if needs_store(self.config) else None
            before = stage_stats(self.config, prefix_store) if prefix_store else {}
            # ``produce`` (the service's pushed content) gives the outcomes instead of reading
            # the files. The reading generator is closed explicitly: when the writer fails
            # (Ctrl-C inside a DuckDB statement) it would otherwise shut its worker pool down
            # only when collected, and a process leaving with os._exit would orphan workers.
            workers = self.workers() if self._pool_allowed else 0
            recent = self.recent if reuse else None
            with contextlib.ExitStack() as stack:
                produced = produce(prefix_store) if produce is not None else stack.enter_context(
                    contextlib.closing(
                        self._outcomes(tasks, workers, cancel, prefix_store) if recent is None
                        else self._reusing(recent, tasks, workers, cancel, prefix_store,
                                           report)))
                for outcome in produced:
                    writer.add(outcome)
            writer.flush()
            if prefix_store is not None:
                report.contextualizer = counters_since(before, stage_stats(self.config,
                                                                          prefix_store))
        except BaseException:
            cancel.set()  # Ctrl-C or a failure: the embedding stage stops after its window
            raise
        finally:
            self._state = "embedding"
            if stage is not None:
                report.chunks_embedded = stage.finish()
                report.embedding_error = stage.error
                report.embedding = remote_run_counters(remote_before,
                                                       embedding_stats(self.config.embedding))
            if follow and report.chunks_written and self.follower is not None:
                # Woken before the run reads idle: an answer in between would find neither
                # a run nor a follower, and claim complete semantic results.
                self.follower.wake()
            self._state = "idle"
        # A cancel that came after the last file cancelled nothing of this run's reading.
        report.files_left = len(tasks) - writer.files_done if cancel.is_set() else 0
        report.cancelled = report.files_left > 0
        report.embeddings_reused = max(0, writer.distinct_texts - report.chunks_embedded)
        report.seconds = time.perf_counter() - started
        if report.bytes_indexed >= THROUGHPUT_MIN_BYTES:
            self.store.set_meta(THROUGHPUT_META_KEY,
                                f"{report.bytes_indexed / report.seconds:.0f}")
        progress.finish(report.summary)
        return report
