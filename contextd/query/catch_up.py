"""Taking a large write into the in-memory indexes without holding up the answers.

Each answer first brings the catalog and the indexes built from it (BM25, the vectors) up to
the store, at ~80 µs a chunk written since the last answer. While the background owner reads
a large project (wagtail: 58k chunks in a few minutes) that made some answers wait 3-4 s.

So while files are being indexed (``writing()``: more is coming, the answer is partial
anyway and says so), an answer takes in re-written and removed files only, so nothing it
shows is stale; it searches the text of the new files as it does the files not indexed yet
(:mod:`contextd.query.unread_scan`) and says how many there were. Taking in even one read of
new files (200 files, then BM25 tokenising their chunks) was 0.7-1 s of a fastapi first
answer. A background thread follows the store meanwhile, a slice at a time, starting no step
while an answer of the process searches, and takes in the rest once the writing stops. When
nothing is being indexed, an answer takes in everything first: it is complete.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any, Callable, Iterable, Iterator

from contextd.query.left_out import CATCHING_UP_NOTE

log = logging.getLogger(__name__)

# How long one step of the background thread takes in new files while files are being
# indexed (the catalog; the indexes built from it then take the same files in, about twice as
# long again); it stops between reads when an answer comes (an answer waits for the indexes
# built from the catalog to take in one such step at most).
BACKGROUND_SLICE_S = 0.1
# The background thread's pause between steps: an answer waiting for the lock gets in.
PAUSE_S = 0.2
# How long stop() waits for a step under way (one slice and its followers' share).
STOP_WAIT_S = 10.0

# Answers searching now in this process, whichever pipeline: on 2 cores any other work beside
# an answer (a catch-up step, the indexer's own chunking) doubled its time, so that work
# waits for none to be left (answering_now).
_answers = 0
_idle = threading.Condition()


def answering_now() -> bool:
    """Whether an answer of this process is searching now (background work gives way)."""
    return _answers > 0


def _new_files_wait() -> bool:
    """The catalog's ``give_way`` for an answer while files are being indexed: new files
    wait (the background thread takes them in; the answer searches their text)."""
    return True


def wait_until_no_answer(stopped: threading.Event | None = None) -> None:
    """Return once no answer of this process is searching (or ``stopped`` is set: whoever
    sets it calls :func:`wake_waiters`). Woken by the last answer's end rather than
    polling, so background work (a catch-up step, the BM25 save) starts the moment the
    answers are done and costs nothing while one runs."""
    with _idle:
        _idle.wait_for(lambda: not _answers or (stopped is not None and stopped.is_set()))


def wake_waiters() -> None:
    """Wake every :func:`wait_until_no_answer` to look at its ``stopped`` event again."""
    with _idle:
        _idle.notify_all()


class CatchUp:
    """The catch-up of one pipeline: :meth:`answering` around each answer's search, and the
    background thread that follows the store while files are being indexed.
    ``providers()`` gives the providers whose ``catch_up(generation)`` follows each
    background step; ``writing()`` says whether files are being indexed (set by whoever
    runs the indexer: contextd.runtime.engine)."""

    def __init__(self, catalog: Any, providers: Callable[[], Iterable[Any]]):
        self.catalog = catalog
        self._providers = providers
        self.writing: Callable[[], bool] = lambda: False
        self._stopped = threading.Event()
        self._guard = threading.Lock()
        self._thread: threading.Thread | None = None

    @contextlib.contextmanager
    def answering(self, generation: int) -> Iterator[float]:
        """Around an answer's search: first take in what was written up to ``generation``
        (while files are being indexed, re-written and removed files only; the block gets
        the ms it took); the background thread starts no step meanwhile (on 2 cores a step
        beside an answer doubled its time)."""
        global _answers
        with _idle:
            _answers += 1
        try:
            begin = time.perf_counter()
            writing = self.writing()
            self.catalog.catch_up(generation, give_way=_new_files_wait) if writing \
                else self.catalog.catch_up(generation)
            if writing or self.catalog.waiting:
                self._start()
            yield (time.perf_counter() - begin) * 1000
        finally:
            with _idle:
                _answers -= 1
                _idle.notify_all()

    def follow(self) -> None:
        """Take in what was written in the background now (giving way to answers), rather
        than in the next answer: after a watcher's batch of a ``git checkout`` that answer
        paid the catalog and BM25 catch-up of every re-written file (issue 37)."""
        self._start()

    def note(self) -> str | None:
        """What an answer must say while files are left waiting (None: nothing)."""
        waiting = len(self.catalog.waiting)
        return CATCHING_UP_NOTE.format(waiting) if waiting else None

    def _start(self) -> None:
        with self._guard:
            if self._stopped.is_set() or (self._thread is not None and self._thread.is_alive()):
                return
            self._thread = threading.Thread(target=self._run, name="contextd-catch-up",
                                            daemon=True)
            self._thread.start()

    def _run(self) -> None:
        """Follow the store a slice at a time while files are being indexed, then take in
        the rest at once (what a new answer would otherwise pay)."""
        try:
            while not self._stopped.wait(PAUSE_S):
                wait_until_no_answer(self._stopped)
                writing = self.writing()
                self.catalog.catch_up(None, BACKGROUND_SLICE_S if writing else None,
                                      give_way=answering_now)
                for provider in self._providers():
                    wait_until_no_answer(self._stopped)
                    if self._stopped.is_set():
                        return
                    catch_up = getattr(provider, "catch_up", None)
                    if catch_up is not None:
                        catch_up(None)
                if not writing and not self.catalog.waiting:
                    return
        except Exception:  # the next answer takes in the rest itself, a slice at a time
            if not self._stopped.is_set():
                log.exception("catching up with the index in the background failed")

    def stop(self) -> None:
        """Stop the background thread after its current step (before the store closes)."""
        self._stopped.set()
        wake_waiters()
        with self._guard:
            thread = self._thread
        if thread is not None:
            thread.join(STOP_WAIT_S)
