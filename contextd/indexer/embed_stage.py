"""The embedding stage: vectors follow the lexical index instead of holding it back.

Chunks are written (and queryable by text and symbol) as soon as a file is chunked; this stage
runs in its own thread beside the chunking workers and embeds whatever stored chunks lack a
vector for the current model (``store.missing_embeddings``). Because the embeddings table is
keyed by (model identity, BLAKE3 of the index text), a text embedded once is never embedded
again under the same model: unchanged chunks of an edited file, a rebuild, or duplicated code
cost nothing; a different model or backend has another identity and re-embeds everything.

ONNX Runtime releases the GIL while it computes, so this thread and the chunking pool keep
both cores busy.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Sequence

import numpy as np

from contextd.store.base import IndexStore

log = logging.getLogger(__name__)

# Texts fetched and embedded per round, in batches: enough for sorting by length to leave
# little padding, few enough that a cancel or a kill loses seconds of work.
WINDOW_BATCHES = 8
# Texts a yielding caller (the owner's follower) embeds between two looks at ``yields``: the
# most a run waits beside the model. A window looked only before it started, and at load 10
# its 128 texts took 20-40 s: after a ``git checkout`` the model held a core for half of
# the owner's refresh of 739 files (issue 37: 1,069 of 4,524 samples in ONNX Runtime).
PIECE_TEXTS = 8


def embed_missing(store: IndexStore, embedder: Any, batch_size: int,
                  cancel: threading.Event | None = None, lock: threading.Lock | None = None,
                  on_batch: Callable[[int], None] | None = None,
                  paths: Sequence[str] | None = None,
                  before_window: Callable[[], None] | None = None,
                  window_batches: int = WINDOW_BATCHES,
                  yields: Callable[[], bool] | None = None) -> int:
    """Embed stored chunks lacking a vector until none is left (or ``cancel`` is set);
    returns how many texts were embedded. Each round fetches a window of texts and hands it
    to the embedder whole: it tokenizes the window in one parallel call and sorts it by token
    length into batches of ``batch_size`` (about 10% faster than a call per batch). Each
    window is stored at once, so an interruption loses one window at most. ``lock`` keeps
    two callers from embedding the same texts; ``paths`` limits the work to the chunks of
    those stored files; ``before_window()`` runs before each window, outside the lock (it
    may wait: the owner's follower lets a run reading files go first) and
    ``window_batches`` sets the window (batches of ``batch_size``). ``yields()`` (the
    owner's follower): a window is embedded PIECE_TEXTS at a time, shortest texts first,
    and ends early, storing what it computed, as soon as ``yields()`` says other work must
    go first (``before_window`` then waits for it)."""
    lock = lock or threading.Lock()
    done = 0
    while not (cancel and cancel.is_set()):
        if before_window is not None:
            before_window()
            if cancel and cancel.is_set():
                break
        with lock:
            rows = store.missing_embeddings(embedder.identity, batch_size * window_batches,
                                            paths)
            if not rows:
                return done
            if yields is None:
                vectors = embedder.embed([text for _, text in rows])
            else:
                rows, vectors = _embed_in_pieces(embedder, rows, yields)
            store.put_embeddings(embedder.identity, [h for h, _ in rows], vectors)
            done += len(rows)
            if on_batch:
                on_batch(len(rows))
    return done


def _embed_in_pieces(embedder: Any, rows: Sequence[tuple[str, str]],
                     yields: Callable[[], bool]) -> tuple[list[tuple[str, str]], np.ndarray]:
    """The (hash, text) rows embedded before ``yields()`` said to stop, with their vectors:
    PIECE_TEXTS at a time in order of length (so a piece pads little), at least one piece."""
    ordered = sorted(rows, key=lambda row: len(row[1]))
    parts = []
    end = 0
    while end < len(ordered) and not (end and yields()):
        parts.append(embedder.embed([text for _, text in ordered[end:end + PIECE_TEXTS]]))
        end += PIECE_TEXTS
    return ordered[:end], np.concatenate(parts)


class EmbeddingStage:
    """A thread running :func:`embed_missing` while files are being written.

    ``wake()`` after each write; ``finish()`` when no more chunks will come: the stage then
    drains what is left and stops. A model that cannot load (or fails) stops the stage with
    ``error`` set; the lexical index is unaffected and ``embed_pending`` can retry later.
    """

    def __init__(self, store: IndexStore, embedder_source: Callable[[], Any], batch_size: int,
                 lock: threading.Lock, cancel: threading.Event | None = None,
                 on_progress: Callable[[int, int], None] | None = None):
        self.store = store
        self.on_progress = on_progress
        self.embedder_source = embedder_source
        self.batch_size = batch_size
        self.lock = lock
        self.cancel = cancel or threading.Event()
        self.embedded = 0
        self._identity = ""
        self.error: str | None = None
        self._wake = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="contextd-embed", daemon=True)

    def start(self) -> "EmbeddingStage":
        self._thread.start()
        return self

    def wake(self) -> None:
        """New chunks were written."""
        self._wake.set()

    def finish(self) -> int:
        """No more chunks will come: embed the rest, stop, and return the count."""
        self._done.set()
        self._wake.set()
        self._thread.join()
        return self.embedded

    def _count(self, n: int) -> None:
        self.embedded += n
        if self.on_progress is not None:
            self.on_progress(self.embedded, self._pending())

    def _pending(self) -> int:
        """Texts still lacking a vector (one count query per window of ~500 texts)."""
        try:
            return self.store.count_missing_embeddings(self._identity)
        except Exception:  # a count for a progress line must never stop the stage
            return 0

    def _run(self) -> None:
        try:
            embedder = self.embedder_source()
            self._identity = embedder.identity
            if self.on_progress is not None:
                self.on_progress(0, self._pending())
            while not self.cancel.is_set():
                last_round = self._done.is_set()
                self._wake.clear()
                embed_missing(self.store, embedder, self.batch_size, self.cancel, self.lock,
                              self._count)
                if last_round:
                    return
                self._wake.wait(0.5)
        except Exception as exc:  # the model is optional for the lexical index
            self.error = f"{type(exc).__name__}: {exc}"
            log.warning("embedding stopped: %s", self.error)
