"""A branch switched back re-reads nothing it indexed lately: the chunks of the files a
long-running process's refreshes indexed, kept by (path, content hash).

A ``git checkout`` and back rewrites the same contents: on fastapi each switch 50 commits
away re-chunked 739 files (28k chunks, ~6.7 CPU s of the owner's ~7.5 for the refresh,
issue 37), although the owner had indexed exactly those contents one switch before. The
outcome of each file a refresh chunks is kept here, pickled and compressed (~4.7 MB for
those 28k chunks, 0.55 CPU s to keep, 0.6 to take back), the least recently used dropped
past REUSE_BUDGET_BYTES, none kept while the process nears its memory budget; a later refresh finds a file whose bytes hash to a kept content and
takes its chunks back instead of chunking it again. Only the chunking is saved: the store
and the in-memory indexes take the file in as any other, and its vectors come from the
embedding cache (keyed by the index text's hash).

The kept chunks depend on the settings that cut them (:func:`contextd.indexer.core.index_signature`);
the indexer drops them when it reloads its settings.
"""

from __future__ import annotations

import collections
import dataclasses
import pickle
import zlib

import blake3

from contextd.embedders.scratch_memory import resident_mb
from contextd.indexer.plan import FileTask
from contextd.indexer.worker import INDEXED, Outcome, load_outcomes

# Compressed bytes kept at most: two switches of fastapi's 739 files, or one of wagtail's
# ~2,300; counted in the owner's memory (``[owner] memory_limit_mb``, 600 MB by default).
REUSE_BUDGET_BYTES = 16 << 20
# zlib's fastest level: 5x smaller than the pickle at a third of level 6's CPU time.
COMPRESSION_LEVEL = 1
# Nothing more is kept while the process is within this many MB of its memory budget: the
# owner's transients come on top (a BM25 fold ~+31 MB, an embedding batch), and wagtail's
# owner peaked 6-26 MB under its 600 MB.
HEADROOM_MB = 64
# The resident size is read again after this many files kept, not for each: reading
# /proc per file was ~6% of the refresh thread's samples after fastapi's checkout (739 files,
# owner profile at load 10, issue 37); a few dozen files more are a few hundred KB.
ROOM_CHECK_FILES = 32


class RecentChunks:
    """The outcomes of files indexed lately, by (path, BLAKE3 of the file's bytes)."""

    def __init__(self, budget_bytes: int = REUSE_BUDGET_BYTES, limit_mb: int | None = None):
        self.budget_bytes = budget_bytes
        # The process's memory budget (``[owner] memory_limit_mb``; None: none).
        self.limit_mb = limit_mb
        self._kept: collections.OrderedDict[tuple[str, str], bytes] = \
            collections.OrderedDict()
        self.bytes = 0
        self._has_room = True
        self._unchecked = 0  # files still kept before the resident size is read again

    def __len__(self) -> int:
        return len(self._kept)

    def keep(self, outcome: Outcome) -> None:
        """Keep the chunks of a file just indexed (other outcomes are not kept, nor any
        while the process is within HEADROOM_MB of its memory budget)."""
        if outcome.status != INDEXED or outcome.record is None or not self._room():
            return
        key = (outcome.task.path, outcome.record.content_hash)
        blob = zlib.compress(pickle.dumps([outcome], protocol=pickle.HIGHEST_PROTOCOL),
                             COMPRESSION_LEVEL)
        if len(blob) > self.budget_bytes:
            return
        self._drop(key)
        self._kept[key] = blob
        self.bytes += len(blob)
        while self.bytes > self.budget_bytes:
            self._drop(next(iter(self._kept)))

    def take(self, task: FileTask) -> Outcome | None:
        """The outcome of ``task`` from kept chunks when its file's bytes now hash to a kept
        content of that path (None otherwise, or when unreadable or unchanged: the normal
        read says so)."""
        if not self._kept:
            return None
        try:
            with open(task.abs_path, "rb") as fh:
                digest = blake3.blake3(fh.read()).hexdigest()
        except OSError:
            return None
        key = (task.path, digest)
        blob = self._kept.get(key)
        if blob is None or digest == task.known_hash:
            return None
        self._kept.move_to_end(key)
        kept = load_outcomes(zlib.decompress(blob))[0]
        assert kept.record is not None
        # The file as it is now: its size and modification time are this task's.
        return dataclasses.replace(kept, task=task, record=dataclasses.replace(
            kept.record, size_bytes=task.size, mtime_ns=task.mtime_ns))

    def clear(self) -> None:
        """Drop everything kept (the settings that cut the chunks changed)."""
        self._kept.clear()
        self.bytes = 0

    def _room(self) -> bool:
        """Whether the process's resident size leaves room to keep more (read once per
        ROOM_CHECK_FILES calls)."""
        if self.limit_mb is None:
            return True
        if self._unchecked <= 0:
            resident = resident_mb()
            self._has_room = resident is None or resident < self.limit_mb - HEADROOM_MB
            self._unchecked = ROOM_CHECK_FILES
        self._unchecked -= 1
        return self._has_room

    def _drop(self, key: tuple[str, str]) -> None:
        blob = self._kept.pop(key, None)
        if blob is not None:
            self.bytes -= len(blob)
