"""Bytes a process must reach at once but reads a little of at a time, kept off its heap.

A query shows a few dozen chunks and rescores a few hundred vectors, but a 60k-chunk project
such as fastapi has ~280 MB of chunk texts (text and index text) and 92 MB of float32
vectors: held as Python strings and a numpy matrix they made most of the background owner's
~0.9 GB. A :class:`Spool` keeps them in an unlinked temporary file beside the index instead
and reads them back with ``pread``: the pages the kernel caches are not the process's
resident memory (and are dropped under pressure), and a read of one text costs a few
microseconds, against the milliseconds of a database round trip (DuckDB reads a whole
column segment to return 50 random rows: 10-60 ms at 60k chunks on this machine kind).

The file is never mapped (a mapping's touched pages would count as the process's own) and
never outlives the process (unlinked at creation). Without a folder (an index sealed at rest,
whose texts must not reach the disk in the clear) the bytes stay in memory.
"""

from __future__ import annotations

import errno
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from contextd.errors import StoreError

log = logging.getLogger(__name__)


class Spool:
    """An append-only run of bytes, read back by (offset, length)."""

    def __init__(self, folder: Path | None):
        self.size = 0
        self._memory: bytearray | None = None
        self._file = None
        if folder is None:
            self._memory = bytearray()
        else:
            self._file = tempfile.TemporaryFile(dir=folder, prefix="contextd-spool-")
            self._fd = self._file.fileno()

    def append(self, data: bytes) -> int:
        """Write ``data`` at the end; returns its offset."""
        offset = self.size
        if self._memory is not None:
            self._memory += data
        else:
            try:
                view = memoryview(data)
                while view:
                    written = os.pwrite(self._fd, view, offset + len(data) - len(view))
                    view = view[written:]
            except OSError as exc:
                if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                    raise
                self._to_memory(exc)
                self._memory += data
        self.size += len(data)
        return offset

    def _to_memory(self, exc: OSError) -> None:
        """The disk beside the index is full: what the spool holds moves to memory, and
        the answer costs the process's memory instead of failing with ``OSError 28``."""
        log.warning("no space left for the spool beside the index (%s); keeping %s bytes in "
                    "memory", exc.strerror, f"{self.size:,}")
        self._memory = bytearray(self.read(0, self.size))
        self.close_file()

    def read(self, offset: int, length: int) -> bytes:
        if self._file is None and self._memory is None:
            raise StoreError("the spool is closed")
        if self._memory is not None:
            return bytes(self._memory[offset:offset + length])
        data = os.pread(self._fd, length, offset)
        while len(data) < length:  # a short read of a large range
            more = os.pread(self._fd, length - len(data), offset + len(data))
            if not more:
                raise OSError(f"spool ended at {offset + len(data)}, short of {offset + length}")
            data += more
        return data

    def close_file(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def close(self) -> None:
        self.close_file()
        self._memory = None


def spool_folder(project: Any) -> Path | None:
    """Where a project's spools go: beside its index (the same disk, never a RAM-backed
    /tmp), the system's temporary folder when the index has no local folder or a read-only
    one, or nowhere (in memory) when the index is sealed at rest."""
    if project is None or project.config.security.encrypt_db:
        return None
    folder = Path(project.db_path).parent
    usable = folder.is_dir() and os.access(folder, os.W_OK)  # not a read-only index folder
    return folder if usable else Path(tempfile.gettempdir())


class RowFile:
    """A float32 matrix of ``dimension`` columns whose rows live in a :class:`Spool`: indexed
    like the numpy matrix it replaces (an int, a slice from the start, or an array of row
    numbers), each access reading only the rows asked for."""

    def __init__(self, folder: Path | None, dimension: int):
        self.folder = folder
        self.dimension = dimension
        self.row_bytes = 4 * dimension
        self.spool = Spool(folder)

    def __len__(self) -> int:
        return self.spool.size // self.row_bytes

    def append(self, rows: np.ndarray) -> None:
        self.spool.append(np.ascontiguousarray(rows, dtype=np.float32).tobytes())

    def __getitem__(self, key: Any) -> np.ndarray:
        if isinstance(key, slice):
            start, stop, step = key.indices(len(self))
            if step != 1:
                return self[np.arange(start, stop, step)]
            data = self.spool.read(start * self.row_bytes, max(0, stop - start) * self.row_bytes)
            return np.frombuffer(data, dtype=np.float32).reshape(-1, self.dimension)
        if isinstance(key, (int, np.integer)):
            return np.frombuffer(self.spool.read(int(key) * self.row_bytes, self.row_bytes),
                                 dtype=np.float32)
        index = np.asarray(key, dtype=np.int64)
        read, size = self.spool.read, self.row_bytes
        data = b"".join([read(int(i) * size, size) for i in index])
        return np.frombuffer(data, dtype=np.float32).reshape(len(index), self.dimension)

    def kept(self, rows: np.ndarray, block: int = 4096) -> "RowFile":
        """A new RowFile holding only ``rows`` (in that order), copied a block at a time."""
        fresh = RowFile(self.folder, self.dimension)
        for start in range(0, len(rows), block):
            fresh.append(self[rows[start:start + block]])
        return fresh

    def close(self) -> None:
        self.spool.close()
