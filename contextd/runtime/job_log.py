"""The owner's log: one line when an indexing job starts, one per progress interval, one when
it ends.

A background owner (``contextd owner``) reads a large project's files and computes its
vectors for 6-30 minutes with nobody watching; its stderr is ``owner.log`` beside the index.
Before, that file held errors only, so a person could not tell a job under way from one that
had died. :func:`log_to_owner_file` turns the job lines on in that process, and ``contextd
stats`` names the file (:func:`destination`).

    2026-11-28 04:20:01 pid 4242 incremental started: 400 files
    2026-11-28 04:20:11 pid 4242 incremental: 180 / 400 files (45%), 18/s, ETA 12 s, 1,020 chunks
    2026-11-28 04:20:24 pid 4242 incremental ended after 23 s: 400 files indexed, ...
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

from contextd.indexer.progress import Progress, WorkFigures, format_duration

log = logging.getLogger("contextd.jobs")

# The file this process logs to, once log_to_owner_file has run (None: its stderr).
_destination: Path | None = None


def log_to_owner_file(path: Path) -> None:
    """This process's stderr is ``path`` (``start_background_owner`` opened it): write the
    job lines and the owner's own notices there, each with its time and pid."""
    global _destination
    _destination = path
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s pid %(process)d %(message)s",
                                           "%Y-%m-%d %H:%M:%S"))
    # The watcher's batches too: after a ``git checkout`` its one line says what the owner
    # re-read, how long it took, and how much came from chunks cut lately.
    for name in (log.name, "contextd.runtime.background", "contextd.runtime.watcher"):
        logger = logging.getLogger(name)
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False  # not twice, through the CLI's "contextd: " handler too


def destination() -> Path | None:
    """The file this process logs its jobs to (None: it writes to its stderr only)."""
    return _destination


class JobLog(Progress):
    """A progress sink that logs: the start, a line every ``interval`` seconds, the end.
    Runs with nothing to do (a catch-up of an unchanged project) log nothing."""

    def __init__(self, interval: float, label: str = "embedding"):
        self.label = label
        self.interval = interval
        self.files = WorkFigures("files")
        self.vectors = WorkFigures("chunks embedded")
        self.chunks = 0
        self._started: float | None = None
        self._last = 0.0

    def start(self, total_files: int, label: str = "indexing") -> None:
        self.label = label  # what the indexer calls the run: bootstrap, incremental, rebuild
        if total_files:
            self.files.record(0, total_files)
            self._begin(f"{total_files:,} files")

    def update(self, files_done: int, chunks_done: int, current_file: str | None = None
               ) -> None:
        total = self.files.done + (self.files.pending or 0)
        self.files.record(files_done, max(0, total - files_done))
        self.chunks = chunks_done
        self._maybe_log()

    def embedding(self, done: int, pending: int) -> None:
        if self._started is None and pending:
            self._begin(f"{pending:,} chunks to embed")
        self.vectors.record(done, pending)
        self._maybe_log()

    def finish(self, message: str = "") -> None:
        if self._started is None:
            return
        took = format_duration(time.monotonic() - self._started)
        said = message.removeprefix(f"{self.label}: ") or self._figures()
        log.info("%s ended after %s: %s", self.label, took, said)
        self._started = None

    def _begin(self, what: str) -> None:
        self._started = self._last = time.monotonic()
        log.info("%s started: %s", self.label, what)

    def _maybe_log(self) -> None:
        now = time.monotonic()
        if self._started is not None and now - self._last >= self.interval:
            self._last = now
            log.info("%s: %s", self.label, self._figures())

    def _figures(self) -> str:
        parts = []
        if self.files.pending is not None:
            parts.append(self.files.text() + f", {self.chunks:,} chunks")
        if self.vectors.pending is not None:
            parts.append(self.vectors.text())
        return "; ".join(parts)
