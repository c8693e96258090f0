"""Taking a large write into the in-memory indexes without holding up the answers.

Each answer first brings the catalog and the indexes built from it (BM25, the vectors) up to
the store, at ~80 µs a chunk written since the last answer. While the background owner reads
a large project (wagtail: 58k chunks in a few minutes) that made some answers wait 3-4 s, and
after a ``git checkout`` (fastapi: 739 re-written files, 30k chunks) 10-14 s.

So an answer loads written files only when few wait (:data:`ANSWER_LOADS_FILES`) and nothing
is being indexed (``writing()``: more is coming, the answer is partial anyway and says so).
Otherwise it only drops what the store no longer holds as it was, removed files and the old
chunks of re-written ones, so nothing it shows is stale; it searches the text of the files
left waiting as it does the files not indexed yet (:mod:`contextd.query.unread_scan`) and
says how many there were. Taking in even one read of new files (200 files, then BM25
tokenising their chunks) was 0.7-1 s of a fastapi first answer. A background thread follows
the store meanwhile, a step of :data:`BACKGROUND_SLICE_S` at a time while files are being
indexed and of :data:`TAIL_SLICE_S` (the rest, in practice) once the writing has stopped,
starting no step while an answer of the process searches, and the indexes built from the
catalog follow each step, so an answer arriving between steps takes in one step at most.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any, Callable, Iterable, Iterator

from contextd.embedders.scratch_memory import release_scratch_memory
from contextd.query.left_out import CATCHING_UP_NOTE

log = logging.getLogger(__name__)

# How long one step of the background thread loads written files into the catalog while
# files are being indexed (the indexes built from it then take the same files in, about
# twice as long again); it stops between reads (contextd.providers.catalog.FILES_PER_STEP)
# when an answer comes.
BACKGROUND_SLICE_S = 0.1
# The same once the writing has stopped: the rest of a ``git checkout``'s files in a step or
# two. Each step has its indexes follow (the vector index's store read, BM25's tokenising
# and index update), and 0.1 s steps after fastapi's checkout (739 files, 30k chunks) were
# 20-40 of them and 4-12 s of the wait for a current answer (issue 37). Nothing else waits
# for the CPU then; an answer that comes stops the catalog's loading between reads.
TAIL_SLICE_S = 2.0
# ... and loads no further read past this many chunks: BM25 tokenises a step's chunks before
# taking its lock up to its PREPARE_MAX_CHUNKS (contextd.providers.fulltext, 16,384) and the
# rest under it, where an answer would wait (fastapi's checkout: 28-30k chunks).
TAIL_STEP_CHUNKS = 12_000
# The background thread's pause between steps while files are being indexed: the indexer's
# own threads get the GIL (none once the writing has stopped: the answers still come first).
PAUSE_S = 0.2
# An answer loads the written files itself when at most this many wait and nothing is being
# indexed (an edit or two: the answer is then complete); more are left to the background.
ANSWER_LOADS_FILES = 32
# Files the background thread loaded after which it hands the freed heap back (glibc keeps
# it), as the catalog does after one large load.
RELEASE_AFTER_FILES = 200
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
        (drops at once; the written files themselves only when few wait and nothing is being
        indexed: the block gets the ms it took); the background thread starts no step
        meanwhile (on 2 cores a step beside an answer doubled its time)."""
        global _answers
        with _idle:
            _answers += 1
        try:
            begin = time.perf_counter()
            writing = self.writing()
            self.catalog.catch_up(generation,
                                  load_at_most=0 if writing else ANSWER_LOADS_FILES)
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
        paid the catalog and BM25 catch-up of every re-written file (issue 37). Nothing
        while the catalog was never loaded: the first answer loads it whole (a command
        reading its first files would otherwise load it beside its own reading)."""
        if self.catalog.generation >= 0:
            self._start()

    @property
    def busy(self) -> bool:
        """Whether the background thread is taking in written files: until the indexes
        built from the catalog have followed its last step too (the owner's vector follower
        waits meanwhile; once the catalog had loaded a checkout's files, the model took a
        core while BM25 and the vector index still took them in, issue 37)."""
        thread = self._thread
        return thread is not None and thread.is_alive()

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
        """Follow the store a step at a time, the indexes built from the catalog following
        each step, until nothing is being indexed or waiting."""
        try:
            taken = 0
            while not self._stopped.wait(PAUSE_S if self.writing() else 0):
                wait_until_no_answer(self._stopped)
                writing = self.writing()
                before = len(self.catalog.waiting)
                self.catalog.catch_up(None, BACKGROUND_SLICE_S if writing else TAIL_SLICE_S,
                                      give_way=answering_now, chunks_at_most=TAIL_STEP_CHUNKS)
                taken += before - len(self.catalog.waiting)
                for provider in self._providers():
                    wait_until_no_answer(self._stopped)
                    if self._stopped.is_set():
                        return
                    catch_up = getattr(provider, "catch_up", None)
                    if catch_up is not None:
                        # The catalog as this step left it: the store may have moved since,
                        # and a follower syncing to it would load that all at once.
                        catch_up(self.catalog.generation)
                if not writing and not self.catalog.waiting:
                    break
            if taken > RELEASE_AFTER_FILES:  # their rows went to the spool: hand the heap back
                release_scratch_memory()
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
