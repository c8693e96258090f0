"""The watcher: keeps the index fresh about a second after every save (``contextd watch``,
and the server).

On Linux an inotify watch set (:mod:`contextd.runtime.watch_set`) watches only the
directories the boundary keeps, so a git-ignored ``.venv`` or ``node_modules`` costs no
watch and no event, and a lost-events overflow becomes one catch-up, never a loop;
elsewhere a watchdog observer reports file-system events under the watch roots. Each path is judged by
the boundary *before* any work: names the rules exclude (ignored patterns, .gitignore,
extensions, the index's own directory) are dropped in the observer thread. The rest gather in
a pending set; after ``watcher.debounce_ms`` without a new event (or ``MAX_DELAY_SECONDS`` of
continuous events) the set becomes one batch for :meth:`Indexer.refresh`, and an editor's
"write a temp file, rename it over the original" is simply a change of the original. A
``git checkout`` of another branch is one batch: while git holds the index lock
(``.git/index.lock``, from before it writes the first file to after the last) no batch is
taken, and once the burst is large its quiet period is :data:`BURST_QUIET_S`, so the refresh
starts the moment git is done (issue 37: fastapi's checkout came as 706 + 36 paths, its
refresh began ~2 s after the checkout), or once an answer searching then is done
(:data:`ANSWER_WAIT_S`). A deleted or moved directory is refreshed
as a prefix: its stored files are removed, and at its destination the boundary walks it.
A change to .gitignore, .contextignore or context.toml reloads the configuration and the
boundary and re-evaluates every file: newly included files are indexed, newly excluded ones
removed.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Callable, Iterator

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from contextd.boundary.walk import INDEX_DIRNAME, RejectReason
from contextd.errors import ContextdError
from contextd.indexer import Indexer, IndexReport
from contextd.indexer.report import BUSY
from contextd.config.project import Project
from contextd.runtime import watch_set

log = logging.getLogger(__name__)

MAX_DELAY_SECONDS = 5.0  # a never-ending burst still gets indexed this often
# The quiet period of a burst of more than FLUSH_MAX_PATHS paths (a checkout, a generator's
# output), if shorter than the debounce: such a burst's writes come back to back, and once
# they pause the batch is read at once (should more come, they are a second, small batch).
BURST_QUIET_S = 0.1
# How long, from the first event, a batch waits for git to let go of its index lock (a lock
# file older than this is a crashed git's, and waited for no more), and how often it looks.
GIT_LOCK_WAIT_S = 30.0
GIT_LOCK_POLL_S = 0.05
# How long past its quiet period a batch waits for the answers of this process searching now
# (the indexer's ``gives_way``): answers first, as for all background work here. Started
# 0.1 s after a checkout, the refresh ran beside the next answer and made its search 4x
# slower at load 8 (issue 37).
ANSWER_WAIT_S = 3.0
# The most changed paths a command's windowed flush reads itself (an editor's saves);
# a larger batch (a ``git checkout``) is left to the watcher's own batch (Watcher.flush).
FLUSH_MAX_PATHS = 64
# Rejections decided by the name alone: such a path can never be in the index.
_NAME_REJECTIONS = frozenset({
    RejectReason.OUTSIDE_BOUNDARY, RejectReason.PATH_TRAVERSAL, RejectReason.INDEX_DIRECTORY,
    RejectReason.IGNORED_PATTERN, RejectReason.GITIGNORE, RejectReason.CONTEXTIGNORE,
    RejectReason.DOCKERIGNORE,
    RejectReason.EXTENSION_NOT_ALLOWED, RejectReason.EXTENSION_BLOCKED})
_SKIPPED_DIRS = (".git", INDEX_DIRNAME)


def git_index_lock(root: os.PathLike | str) -> str | None:
    """The path of the git index lock of the working tree holding ``root`` (the project may
    be a folder of it): ``.git/index.lock``, or in the git directory a ``.git`` file names
    (a linked worktree); None outside git."""
    folder = os.path.abspath(root)
    while not os.path.lexists(os.path.join(folder, ".git")):
        if os.path.dirname(folder) == folder:
            return None
        folder = os.path.dirname(folder)
    dot_git = os.path.join(folder, ".git")
    if os.path.isdir(dot_git):
        return os.path.join(dot_git, "index.lock")
    try:
        with open(dot_git, encoding="utf-8") as file:
            first = file.readline().strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not first.startswith("gitdir:"):
        return None
    return os.path.join(folder, first[len("gitdir:"):].strip(), "index.lock")


def quiet_period(debounce: float, pending: int) -> float:
    """The quiet period after which ``pending`` changed paths are taken as one batch: the
    debounce, shorter for a large burst (BURST_QUIET_S)."""
    return min(debounce, BURST_QUIET_S) if pending > FLUSH_MAX_PATHS else debounce


class _Handler(FileSystemEventHandler):
    def __init__(self, watcher: "Watcher"):
        self.watcher = watcher

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type in ("opened", "closed", "closed_no_write"):
            return
        if event.is_directory and event.event_type == "modified":
            return  # a file event inside says what changed
        for path in (event.src_path, getattr(event, "dest_path", "")):
            if path:
                self.watcher.note(os.fsdecode(path), event.is_directory)


class Watcher:
    """Watches a project and refreshes its index in debounced batches.

    ``on_batch(paths, report)`` is called after each batch (the CLI logs it).
    """

    def __init__(self, project: Project, indexer: Indexer,
                 on_batch: Callable[[list[str], IndexReport], None] | None = None,
                 debounce_ms: int | None = None):
        self.root = project.root
        self.indexer = indexer
        self.on_batch = on_batch
        ms = project.config.watcher.debounce_ms if debounce_ms is None else debounce_ms
        self.debounce = ms / 1000
        self._pending: set[str] = set()
        self._reload = False
        self._first_event = 0.0
        self._last_event = 0.0
        self._cond = threading.Condition()
        self._stopping = False
        self._observer = None
        self._watch_set: watch_set.InotifyWatchSet | None = None
        self._rescan = False
        self._thread: threading.Thread | None = None
        self._git_lock = git_index_lock(self.root)
        self.batches = 0

    def start(self) -> "Watcher":
        """Start watching (the directories the boundary keeps, on Linux) and the batching
        thread."""
        if watch_set.available():
            self._watch_set = watch_set.InotifyWatchSet(
                str(self.root), self._directories, self._keeps_directory, self.note,
                self._overflowed).start()
        else:  # other systems: watchdog's recursive observer; events are judged in note()
            self._observer = Observer()
            handler = _Handler(self)
            roots = {str(r) for r in self.indexer.boundary.watch_roots}
            roots.add(str(self.root))  # context.toml and ignore files at the root
            for root in sorted(roots):
                if not any(root.startswith(other + os.sep) for other in roots):
                    self._observer.schedule(handler, root, recursive=True)
            self._observer.start()
        self._thread = threading.Thread(target=self._loop, name="contextd-watch", daemon=True)
        self._thread.start()
        return self

    @property
    def watched_directories(self) -> list[str] | None:
        """The directories under watch (root-relative), or None under watchdog's recursive
        observer (every directory)."""
        return self._watch_set.watched if self._watch_set is not None else None

    @property
    def overflows(self) -> int:
        """How many times the kernel's event queue overflowed (each cost one catch-up)."""
        return self._watch_set.overflows if self._watch_set is not None else 0

    def _directories(self, under: str) -> Iterator[str]:
        """The directories to watch: the project root (its context.toml and ignore files)
        and those the boundary walks."""
        if not under:
            yield ""
        yield from (rel for rel in self.indexer.boundary.directories(under) if rel)

    def _keeps_directory(self, rel: str) -> bool:
        return rel.split("/", 1)[0] not in _SKIPPED_DIRS and \
            self.indexer.boundary.keeps_directory(rel)

    def _overflowed(self) -> None:
        """Events were lost: one catch-up of the whole index after the debounce (several
        overflows before it runs are still one)."""
        with self._cond:
            now = time.monotonic()
            if not self._pending and not self._reload and not self._rescan:
                self._first_event = now
            self._last_event = now
            self._rescan = True
            self._cond.notify_all()

    def stop(self) -> None:
        """Stop observing; a batch being indexed finishes first."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._observer is not None:
            self._observer.stop()
            self._observer.join()
        if self._watch_set is not None:
            self._watch_set.stop()
        if self._thread is not None:
            self._thread.join()

    def note(self, abs_path: str, is_directory: bool) -> None:
        """Judge one changed path and queue it when it may matter to the index."""
        try:
            rel = os.path.relpath(abs_path, self.root).replace(os.sep, "/")
        except ValueError:
            return
        if rel.startswith("..") or rel.split("/", 1)[0] in _SKIPPED_DIRS:
            return
        boundary = self.indexer.boundary
        reload = boundary.is_ignore_file(rel)
        # A path already pending was judged at its first event (a checkout writes a file
        # in several events): only new rules, which reload the boundary, could change that.
        if not reload and not is_directory and rel not in self._pending:
            decision = boundary.check(rel)
            if not decision.indexable and decision.reason in _NAME_REJECTIONS:
                return
        with self._cond:
            now = time.monotonic()
            if not self._pending and not self._reload and not self._rescan:
                self._first_event = now
            self._last_event = now
            self._reload |= reload
            self._pending.add(rel)
            self._cond.notify_all()

    @property
    def holds_changes(self) -> bool:
        """Whether changes are noted that no batch has taken yet (read without the lock:
        the owner's vector follower asks between pieces of its work)."""
        return bool(self._pending) or self._reload or self._rescan

    @property
    def running(self) -> bool:
        """Whether the watcher is started and not stopping."""
        return self._thread is not None and self._thread.is_alive() and not self._stopping

    def flush(self, wait: bool = True, within_s: float | None = None) -> IndexReport:
        """Index the changes noted so far now, without waiting for the debounce: what a
        command reaching a watching owner needs instead of a catch-up walk of every file
        (the watch set has seen every change; an overflow or new rules still wait for
        their catch-up). ``wait=False``: while a run holds the index (the batch of a
        ``git checkout``: the next query waited 65 s behind it on fastapi), return a
        ``busy`` report at once; the answer's snippets are read from the files as they are
        now (:mod:`contextd.query.on_disk`). ``within_s``: stop reading after this long;
        the paths go back to the watcher's batch. A windowed flush of more than
        FLUSH_MAX_PATHS paths (a checkout's batch) reads none and says ``busy``: the
        window would not hold them, and the boundary checks and planning of 750 paths
        before reading the first cost the next answer seconds (issue 37); the watcher's
        own batch reads them after its debounce."""
        if within_s is not None:
            with self._cond:
                if len(self._pending) > FLUSH_MAX_PATHS:
                    return IndexReport(mode=BUSY)
        with self.indexer.running(wait) as running:
            if not running:
                return IndexReport(mode=BUSY)
            with self._cond:
                paths = sorted(self._pending)
                self._pending.clear()
            if not paths:
                return IndexReport(mode="refresh")
            report = self.indexer.refresh(paths, within_s=within_s)
            if report.cancelled:  # what was read is current; the batch re-reads none of it
                with self._cond:
                    if not self._pending and not self._reload and not self._rescan:
                        self._first_event = self._last_event = time.monotonic()
                    self._pending.update(paths)
                    self._cond.notify_all()
            return report

    def _take_batch(self) -> tuple[list[str], bool, bool] | None:
        """Wait for a quiet period after events; (paths, reload, rescan), None when
        stopping."""
        with self._cond:
            while True:
                if self._stopping:
                    return None
                if self._pending or self._reload or self._rescan:
                    now = time.monotonic()
                    due = min(self._last_event + quiet_period(self.debounce, len(self._pending)),
                              self._first_event + MAX_DELAY_SECONDS)
                    if now >= due and (self._git_writing(now) or (
                            now < due + ANSWER_WAIT_S and self.indexer.gives_way())):
                        self._cond.wait(GIT_LOCK_POLL_S)  # neither wakes us: look again
                        continue
                    if now >= due:
                        taken = sorted(self._pending), self._reload, self._rescan
                        self._pending, self._reload, self._rescan = set(), False, False
                        return taken
                    self._cond.wait(due - now)
                else:
                    self._cond.wait()

    def _git_writing(self, now: float) -> bool:
        """Whether git holds the index lock (a checkout, reset or merge writing the tree), for
        at most GIT_LOCK_WAIT_S from the batch's first event, a lock that old not at all."""
        if self._git_lock is None or now - self._first_event >= GIT_LOCK_WAIT_S:
            return False
        try:
            written = os.stat(self._git_lock).st_mtime
        except OSError:
            return False
        return time.time() - written < GIT_LOCK_WAIT_S

    def _loop(self) -> None:
        while True:
            taken = self._take_batch()
            if taken is None:
                return
            paths, reload, rescan = taken
            try:
                if reload:  # new rules or settings: judge every file, re-chunk if needed
                    self.indexer.reload()
                if reload or rescan:  # (rescan: events were lost) one catch-up of all files
                    if self._watch_set is not None:
                        self._watch_set.resync()
                    report = self.indexer.ensure_indexed()
                else:
                    report = self.indexer.refresh(paths)
            except ContextdError as exc:  # expected, e.g. a file deleted after
                # delete_context took it out of the index: nothing to do, said in one line
                log.info("changed paths left alone: %s", exc)
                continue
            except Exception:  # one bad batch must not stop the watcher
                log.exception("indexing %d changed paths failed", len(paths))
                continue
            self.batches += 1
            log.info("%d changed path(s)%s: %s", len(paths), " and ignore rules" if reload
                     else "", report.summary)
            if self.on_batch is not None:
                self.on_batch(paths, report)
