"""Usage metrics written off the query's latency: one background thread, batched transactions.

Each answered query queues one ``usage_metrics`` row; the write is a database
transaction, so it happens here, on a thread of its own, never on the query's path.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Any

log = logging.getLogger(__name__)

# Usage rows arriving within this long of each other are written in one transaction.
USAGE_BATCH_DELAY_S = 0.2

# Queued after the last row to end the usage thread.
_STOP = object()


class UsageRecorder:
    """Writes usage_metrics rows on a background thread, in order; ``flush`` waits for them.

    Rows are written in batches, one transaction per USAGE_BATCH_DELAY_S at most: a write per
    query would compete with the next query for the CPU on a loaded 2-core machine.
    """

    def __init__(self, store: Any):
        self.store = store
        self._queue: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(self, *row: Any) -> None:
        """Queue one ``store.record_usage(*row)``."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="contextd-usage",
                                                daemon=True)
                self._thread.start()
        self._queue.put(row)

    def _run(self) -> None:
        stopping = False
        while not stopping:
            rows = [self._queue.get()]
            # Gather what arrives within the delay; a stop request ends the wait at once.
            deadline = time.monotonic() + USAGE_BATCH_DELAY_S
            while rows[-1] is not _STOP and (left := deadline - time.monotonic()) > 0:
                try:
                    rows.append(self._queue.get(timeout=left))
                except queue.Empty:
                    break
            stopping = _STOP in rows
            batch = [row for row in rows if row is not _STOP]
            try:
                if batch:
                    self.store.record_usage_many(batch)
            except Exception as exc:  # metrics must never cost anyone an answer
                log.warning("could not record usage metrics: %s", exc)
            finally:
                for _ in rows:
                    self._queue.task_done()

    def flush(self) -> None:
        """Wait until every queued row is written."""
        self._queue.join()

    def stop(self) -> None:
        """Write what is queued and end the thread. A thread left waiting would keep the
        store (and its DuckDB connection) alive until the interpreter exits, where DuckDB's
        bindings report it as leaked."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(_STOP)
            thread.join()
