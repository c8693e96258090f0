"""Progress sinks: where the indexer and the job runner report how far they are.

The indexer reports absolute figures (files done, chunks written, current file) through one
small interface, and the caller decides where they go: a rich bar on a terminal, a plain line
every ``bootstrap.progress_interval_seconds`` on stderr otherwise (logs, CI), the jobs table
(so ``get_rebuild_status`` and ``get_context_stats`` show the same numbers), or nowhere.
Sinks never write to stdout: stdout carries results only (and is the protocol of an MCP
stdio server).
"""

from __future__ import annotations

import collections
import sys
import threading
import time
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:  # the store (DuckDB, numpy) is not imported by a thin client's progress bar
    from contextd.store.base import IndexStore


class Progress:
    """The interface, doing nothing (the null sink). Methods are called from one thread at a
    time; figures are absolute, not increments, so a missed call loses nothing."""

    def start(self, total_files: int, label: str = "indexing") -> None:
        """A run over ``total_files`` files begins."""

    def update(self, files_done: int, chunks_done: int, current_file: str | None = None
               ) -> None:
        """Figures so far."""

    def embedding(self, done: int, pending: int) -> None:
        """Vectors computed so far in this run, and distinct texts still lacking one: the
        part of a first index that takes time (chunking runs at ~100k lines/s, embedding
        at ~150 chunks/s), so it gets its own count, rate and ETA. Called from the embedding
        thread."""

    def finish(self, message: str = "") -> None:
        """The run ended (completed, failed or cancelled); ``message`` says how."""


NullProgress = Progress


def format_duration(seconds: float) -> str:
    """``45 s``, ``3 min``, ``1 h 05 min``: an ETA a person reads at a glance."""
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60):02d} min"


# The rate behind an ETA is measured over this many recent seconds, and only once the
# figures span a quarter of them: a rate since the start counted the pool's start-up and the
# model's load, and announced "~1 h 26 min" for reading that ended 80 s later (issue 40).
RATE_WINDOW_S = 20.0


class WorkFigures:
    """Units done and still pending (chunks embedded, files indexed), with the recent rate:
    what the progress lines, ``contextd stats``, get_context_stats and the query notes show.
    No rate (and so no ETA) until the figures span ``window_s / 4`` seconds with progress."""

    def __init__(self, unit: str = "chunks embedded", window_s: float = RATE_WINDOW_S
                 ) -> None:
        self.unit = unit
        self.window_s = window_s
        self.done = 0
        self.pending: int | None = None
        self.started: float | None = None
        self._samples: collections.deque[tuple[float, int]] = collections.deque()

    def record(self, done: int, pending: int) -> None:
        now = time.monotonic()
        if self.started is None or done < self.done:  # a new run counts from zero
            self.started = now
            self._samples.clear()
        self.done, self.pending = done, pending
        self._samples.append((now, done))
        # Samples older than the window go, but two always stay: reports that come seldom
        # still give a rate.
        while len(self._samples) > 2 and now - self._samples[0][0] > self.window_s:
            self._samples.popleft()

    def restart_clock(self) -> None:
        """Measure the rate from now (after a model load that the rate must not include)."""
        self.started = time.monotonic()
        self._samples = collections.deque([(self.started, self.done)])

    @property
    def rate(self) -> float:
        """Units per second over the last ``window_s`` seconds; 0 until the figures span a
        quarter of that with some progress (no rate yet is said as none, not guessed)."""
        if not self._samples:
            return 0.0
        since, done_then = self._samples[0]
        span = time.monotonic() - since
        if span < self.window_s / 4 or self.done <= done_then:
            return 0.0
        return (self.done - done_then) / span

    @property
    def eta_seconds(self) -> float | None:
        rate = self.rate
        return self.pending / rate if self.pending and rate > 0 else None

    def text(self) -> str:
        """``1,234 / 5,000 chunks embedded (24%), 140/s, ETA 27 s``."""
        total = self.done + (self.pending or 0)
        text = f"{self.done:,} / {total:,} {self.unit}"
        if total:
            text += f" ({100 * self.done // total}%)"
        if self.rate > 0:
            text += f", {self.rate:,.0f}/s"
        if self.eta_seconds is not None:
            text += f", ETA {format_duration(self.eta_seconds)}"
        return text

    def as_dict(self) -> dict:
        """The figures for JSON (stats)."""
        eta = self.eta_seconds
        return {"done": self.done, "pending": self.pending, "rate_per_s": round(self.rate, 1),
                "eta_seconds": None if eta is None else round(eta)}


class _Figures:
    """Shared arithmetic of the visible sinks: rate and ETA from the figures so far."""

    def __init__(self) -> None:
        self.total = 0
        self.chunks = 0
        self.current: str | None = None
        self.label = "indexing"
        self.file_figures = WorkFigures("files")
        self.embedding = WorkFigures()

    @property
    def files(self) -> int:
        return self.file_figures.done

    def begin(self, total: int, label: str) -> None:
        self.total, self.label, self.chunks = total, label, 0
        self.file_figures = WorkFigures("files")
        self.file_figures.record(0, total)

    def count(self, files: int, chunks: int) -> None:
        self.chunks = chunks
        self.file_figures.record(files, max(0, self.total - files))

    def line(self) -> str:
        rate, eta = self.file_figures.rate, self.file_figures.eta_seconds
        text = f"{self.label}: {self.files:,} / {self.total:,} files, {self.chunks:,} chunks"
        if self.total:
            text += f" ({100 * self.files // self.total}%)"
        if rate > 0:
            text += f", {rate:,.0f} files/s"
        if eta is not None:
            text += f", ETA {format_duration(eta)}"
        if self.embedding.started is not None:
            text += f"; {self.embedding.text()}"
        return text


class LineProgress(Progress):
    """Plain lines on a stream (stderr), at most one per ``interval`` seconds, plus the first
    and the last: for logs and non-interactive runs."""

    def __init__(self, interval: float = 30.0, stream: TextIO | None = None):
        self.interval = interval
        self.stream = stream or sys.stderr
        self._fig = _Figures()
        self._last = 0.0
        self._quiet = False

    def start(self, total_files: int, label: str = "indexing") -> None:
        # A catch-up with nothing to do (every query of an unchanged project) says nothing.
        self._quiet = total_files == 0
        self._fig.begin(total_files, label)
        self._last = time.monotonic()
        self._write(f"{label}: {total_files:,} files to process")

    def update(self, files_done: int, chunks_done: int, current_file: str | None = None
               ) -> None:
        self._fig.count(files_done, chunks_done)
        self._maybe_write()

    def embedding(self, done: int, pending: int) -> None:
        self._fig.embedding.record(done, pending)
        if pending:
            self._quiet = False  # nothing to chunk, but vectors to compute: say so
        self._maybe_write()

    def _maybe_write(self) -> None:
        now = time.monotonic()
        if now - self._last >= self.interval:
            self._last = now
            self._write(self._fig.line())

    def finish(self, message: str = "") -> None:
        self._write(message or self._fig.line())

    def _write(self, text: str) -> None:
        if self._quiet:
            return
        self.stream.write(f"contextd: {text}\n")
        self.stream.flush()


class RichProgress(Progress):
    """Live bars on a terminal: files chunked (fast), then chunks embedded (the slow part),
    each with its rate and ETA."""

    def __init__(self, stream: TextIO | None = None):
        from rich.console import Console
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress as Bar, TextColumn,
                                   TimeElapsedColumn, TimeRemainingColumn)

        self._bar = Bar(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[what]}"),
                        TextColumn("{task.fields[rate]:,.0f}/s"), TimeElapsedColumn(),
                        TimeRemainingColumn(),
                        console=Console(file=stream or sys.stderr), transient=False)
        self._task = None
        self._embed_task = None
        self._started = time.monotonic()
        self._figures = WorkFigures()

    def start(self, total_files: int, label: str = "indexing") -> None:
        self._started = time.monotonic()
        if total_files == 0:  # nothing to show: no bar at all
            return
        self._bar.start()
        self._task = self._bar.add_task(label, total=total_files, what="files, 0 chunks",
                                        rate=0.0)

    def update(self, files_done: int, chunks_done: int, current_file: str | None = None
               ) -> None:
        if self._task is not None:
            rate = files_done / max(time.monotonic() - self._started, 1e-6)
            self._bar.update(self._task, completed=files_done,
                             what=f"files, {chunks_done:,} chunks", rate=rate)

    def embedding(self, done: int, pending: int) -> None:
        self._figures.record(done, pending)
        if self._embed_task is None:
            if not pending:
                return
            if self._task is None:
                self._bar.start()
            self._embed_task = self._bar.add_task("embedding", total=done + pending,
                                                  what="chunks", rate=0.0)
        self._bar.update(self._embed_task, completed=done, total=done + pending,
                         rate=self._figures.rate)

    def finish(self, message: str = "") -> None:
        if self._task is None and self._embed_task is None:
            return
        self._bar.stop()
        if message:
            self._bar.console.print(f"contextd: {message}")


class JobProgress(Progress):
    """Writes the figures to a row of the jobs table, at most every ``interval`` seconds (a
    write per file would make the jobs table the bottleneck).

    The row counts the whole job: ``done_before`` files of its scope were done before this
    run (read by the run a crash or a closed session interrupted, or unchanged), so a
    resumed bootstrap goes on from "53 / 739", not "0 / 686" (issue 40)."""

    def __init__(self, store: IndexStore, job_id: str, interval: float = 0.5,
                 done_before: int = 0):
        self.store = store
        self.job_id = job_id
        self.interval = interval
        self.done_before = done_before
        self._last = 0.0

    def start(self, total_files: int, label: str = "indexing") -> None:
        self.store.update_job(self.job_id, files_total=self.done_before + total_files,
                              files_processed=self.done_before, chunks_processed=0)

    def update(self, files_done: int, chunks_done: int, current_file: str | None = None
               ) -> None:
        now = time.monotonic()
        if now - self._last >= self.interval:
            self._last = now
            self.store.update_job(self.job_id, files_processed=self.done_before + files_done,
                                  chunks_processed=chunks_done, current_file=current_file)

    def finish(self, message: str = "") -> None:
        self._last = 0.0


class TeeProgress(Progress):
    """Sends the same figures to several sinks (e.g. the terminal and the jobs table)."""

    def __init__(self, *sinks: Progress):
        self.sinks = [s for s in sinks if s is not None]
        self._lock = threading.Lock()

    def start(self, total_files: int, label: str = "indexing") -> None:
        with self._lock:
            for sink in self.sinks:
                sink.start(total_files, label)

    def update(self, files_done: int, chunks_done: int, current_file: str | None = None
               ) -> None:
        with self._lock:
            for sink in self.sinks:
                sink.update(files_done, chunks_done, current_file)

    def embedding(self, done: int, pending: int) -> None:
        with self._lock:
            for sink in self.sinks:
                # Duck-typed sinks written before this call existed simply miss it.
                call = getattr(sink, "embedding", None)
                if call is not None:
                    call(done, pending)

    def finish(self, message: str = "") -> None:
        with self._lock:
            for sink in self.sinks:
                sink.finish(message)


def terminal_progress(show: bool = True, interval: float = 30.0,
                      stream: TextIO | None = None) -> Progress:
    """The sink for a command run by a person: a rich bar when ``stream`` (stderr) is a
    terminal, periodic lines when it is not, nothing when ``show`` is off."""
    stream = stream or sys.stderr
    if not show:
        return NullProgress()
    if stream.isatty():
        return RichProgress(stream)
    return LineProgress(interval, stream)
