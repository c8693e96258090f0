"""One poller of the engine's progress for every open browser, and the JSON-lines log.

Each browser's Server-Sent Events stream reads the poller's latest snapshot, so ten open
tabs cost the engine what one does: a read of the jobs table twice a second (and of the
pending-embedding count every few seconds). The poller also appends what happens (a job
started, advanced, ended) to ``.contextd/progress.jsonl``, one JSON line per event,
for people who would rather ``tail -f`` a file; ``GET /progress`` serves its entries.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from contextd.records import to_dict

log = logging.getLogger("contextd.web")

# Browsers get an update at most this often: twice a second reads as live progress.
POLL_S = 0.5
# The pending-embedding count costs a join over the chunks: read it less often.
PENDING_EVERY_S = 5.0
# How often the progress log records a background embedding under way.
EMBEDDING_LOG_S = 10.0
# Final job states and the progress-log event each ends with.
ENDED = {"completed": "complete", "failed": "error", "cancelled": "cancelled",
         "interrupted": "interrupted"}


def job_view(job: dict[str, Any], now: datetime | None = None) -> dict[str, Any]:
    """A job row with the figures people read: percent, files/s and chunks/s since it
    started, and the seconds left at that rate."""
    total = job.get("files_total") or 0
    done = job.get("files_processed") or 0
    started = _parse(job.get("started_at"))
    latest = _parse(job.get("updated_at")) or now
    elapsed = (latest - started).total_seconds() if started and latest else 0.0
    rate = done / elapsed if elapsed > 0 else 0.0
    eta = (total - done) / rate if rate > 0 and total > done else None
    return {**{k: job.get(k) for k in ("job_id", "job_type", "status", "scope", "current_file",
                                        "started_at", "completed_at", "cancel_requested")},
            "files_total": total, "files_processed": done,
            "chunks_processed": job.get("chunks_processed") or 0,
            "percent": 100 if job.get("status") == "completed" else
            (int(100 * done / total) if total else 0),
            "files_per_s": round(rate, 1),
            "chunks_per_s": round((job.get("chunks_processed") or 0) / elapsed, 1)
            if elapsed > 0 else 0.0,
            "eta_s": round(eta) if eta is not None else None}


def _parse(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        return None


class ProgressFeed:
    """Polls ``engine.progress()`` every :data:`POLL_S` in a daemon thread while the app runs;
    :meth:`snapshot` returns the latest figures and a version that changes with them."""

    def __init__(self, handle: Any, log_path: Path, keep_lines: int):
        self.handle = handle
        self.log_path = log_path
        self.keep_lines = keep_lines
        self._lock = threading.Lock()
        self._version = 0
        self._snapshot: dict[str, Any] = {"ready": False, "jobs": []}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._running: dict[str, dict[str, Any]] = {}
        self._ended: set[str] = set()
        self._generation: int | None = None
        self._pending: int | None = None
        self._pending_generation: int | None = None
        self._pending_at = 0.0
        self._embedding: dict[str, Any] | None = None  # the background embedding last seen
        self._embedding_logged = 0.0

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="contextd-ui-feed", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def snapshot(self) -> tuple[int, dict[str, Any]]:
        with self._lock:
            return self._version, self._snapshot

    def entries(self, limit: int = 200) -> list[dict[str, Any]]:
        """The last ``limit`` entries of the progress log, oldest first."""
        try:
            lines = self.log_path.read_text(encoding="utf-8").splitlines()[-limit:]
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in lines if line.strip()]

    def note_failure(self, message: str) -> None:
        """Log a failure of work started from a page (the log is what its author reads)."""
        self._append([{"event": "error", "message": message}])

    # ----- the poller --------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._publish(self._read())
            except Exception as exc:  # the owner may be changing hands: say so, go on
                self._publish({"ready": False, "error": str(exc), "jobs": []})
            self._stop.wait(POLL_S)

    def _read(self) -> dict[str, Any]:
        engine = self.handle.get(timeout=0.0)
        with_pending = time.monotonic() - self._pending_at >= PENDING_EVERY_S
        data = engine.progress(with_pending=with_pending)
        if not with_pending and data.state == "idle" \
                and data.generation != self._pending_generation:
            # The index changed and settled since the count was read: read it now, so an
            # idle index never shows a stale number of chunks waiting for vectors.
            data, with_pending = engine.progress(with_pending=True), True
        if with_pending:
            self._pending, self._pending_at = data.embeddings_pending, time.monotonic()
            self._pending_generation = data.generation
        now = datetime.now()
        jobs = [job_view(job, now) for job in data.jobs]
        embedding = data.embedding
        if embedding:  # the live figure, fresher than the count read every few seconds
            self._pending = embedding["pending"]
        self._log_changes(engine, jobs, data.generation)
        self._log_embedding(embedding)
        return {"ready": True, "state": data.state, "generation": data.generation,
                "embeddings_pending": self._pending, "jobs": jobs, "embedding": embedding}

    def _log_embedding(self, embedding: dict[str, Any] | None) -> None:
        """Log the background embedding (no job of its own) as the jobs are logged: when it
        starts, every EMBEDDING_LOG_S while it runs, and when it ends."""
        now = time.monotonic()
        event = None
        if embedding and self._embedding is None:
            event = "start"
        elif embedding and now - self._embedding_logged >= EMBEDDING_LOG_S:
            event = "progress"
        elif not embedding and self._embedding is not None:
            event, embedding = "completed", {**self._embedding, "pending": 0, "eta_seconds": 0}
        if event:
            self._embedding_logged = now
            self._append([{"event": event, "job_type": "embedding",
                           "chunks_processed": embedding["done"],
                           "chunks_pending": embedding["pending"],
                           "chunks_per_s": embedding["rate_per_s"],
                           "eta_s": embedding["eta_seconds"]}])
        self._embedding = embedding

    def _publish(self, snapshot: dict[str, Any]) -> None:
        with self._lock:
            if snapshot != self._snapshot:
                self._snapshot = snapshot
                self._version += 1

    def _log_changes(self, engine: Any, jobs: list[dict[str, Any]], generation: int) -> None:
        """Log jobs that started, advanced or ended since the last poll. A job can run
        between two polls (a small bootstrap, a quick refresh): the history, read when the
        index changed, logs the end of every job not logged yet."""
        current = {job["job_id"]: job for job in jobs}
        events = []
        for job_id, job in current.items():
            before = self._running.get(job_id)
            if before is None:
                events.append({"event": "start", **job})
            elif (before["files_processed"], before["chunks_processed"]) != \
                    (job["files_processed"], job["chunks_processed"]):
                events.append({"event": "progress", **job})
        if generation != self._generation or set(self._running) - set(current):
            history = [to_dict(job) for job in engine.job_history(limit=20)
                       if job.job_id not in current and job.status in ENDED]
            if self._generation is None:  # first look: the past is not news
                self._ended.update(job["job_id"] for job in history)
            for job in reversed(history):
                if job["job_id"] not in self._ended:
                    self._ended.add(job["job_id"])
                    events.append({"event": ENDED[job["status"]], **job_view(job),
                                   "error": job.get("error_message")})
            self._generation = generation
        self._running = current
        if events:
            self._append(events)

    def _append(self, events: list[dict[str, Any]]) -> None:
        stamp = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
        lines = [json.dumps({"time": stamp, **event}, default=str) for event in events]
        try:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            with self.log_path.open("a", encoding="utf-8") as handle:
                handle.write("\n".join(lines) + "\n")
            self._trim()
        except OSError as exc:
            log.warning("cannot write the progress log %s: %s", self.log_path, exc)

    def _trim(self) -> None:
        """Keep the log at most twice ``keep_lines`` long (cut back to ``keep_lines``)."""
        if self.log_path.stat().st_size < 200 * self.keep_lines:
            return
        lines = self.log_path.read_text(encoding="utf-8").splitlines()
        if len(lines) > 2 * self.keep_lines:
            temp = self.log_path.with_suffix(".tmp")
            temp.write_text("\n".join(lines[-self.keep_lines:]) + "\n", encoding="utf-8")
            temp.replace(self.log_path)
