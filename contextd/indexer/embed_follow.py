"""Vectors after the run: a refresh returns once its chunks are written.

A run's embedding stage (:mod:`contextd.indexer.embed_stage`) is joined before the run ends,
under the run lock, so a refresh after a ``git checkout`` waited for every chunk of the
backlog to get its vector: on prometheus the next command waited 462 s behind 26,177
chunks, while the lexical and symbol answers it needed were written in seconds. In a process
that stays up (the owner), a run that is not a whole-project one (a refresh, a catch-up, a
watcher batch) writes its chunks and returns; this follower then computes the missing
vectors in its own thread, outside the run lock (unchanged chunks keep theirs: the vectors
are keyed by the index text's hash), and is woken again by every later run.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable

from contextd.indexer.progress import Progress

log = logging.getLogger(__name__)


class VectorFollower:
    """One thread at a time running ``embed(cancel, progress)`` (the indexer's
    ``embed_pending``) until no run has asked for vectors since it last started. Each round
    reports to a fresh ``progress()`` sink (the owner's job log), which it finishes."""

    def __init__(self, embed: Callable[[threading.Event, Progress | None], int],
                 progress: Callable[[], Progress] | None = None):
        self._embed = embed
        self._progress = progress
        self._guard = threading.Lock()
        self._wanted = False
        self._thread: threading.Thread | None = None
        self.stopped = threading.Event()

    @property
    def running(self) -> bool:
        """Whether vectors are being computed (or about to be) now."""
        with self._guard:
            return self._thread is not None

    def wake(self) -> None:
        """Chunks were written: compute their vectors (now, or after the round under way)."""
        with self._guard:
            if self.stopped.is_set():
                return
            self._wanted = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="contextd-embed-follow",
                                                daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            with self._guard:
                if not self._wanted or self.stopped.is_set():
                    self._thread = None
                    return
                self._wanted = False
            try:
                progress = self._progress() if self._progress is not None else None
                embedded = self._embed(self.stopped, progress)
                if progress is not None:
                    progress.finish(f"{embedded:,} chunks embedded"
                                    + (" (stopped)" if self.stopped.is_set() else ""))
            except Exception as exc:  # the lexical index stands; the next run asks again
                log.warning("vectors after a refresh stopped: %s", exc)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until no vector is being computed; False when ``timeout`` passed first."""
        with self._guard:
            thread = self._thread
        if thread is not None:
            thread.join(timeout)
            return not thread.is_alive()
        return True

    def stop(self, timeout: float = 10.0) -> None:
        """Stop after the window being embedded (the process is closing)."""
        self.stopped.set()
        self.wait(timeout)
