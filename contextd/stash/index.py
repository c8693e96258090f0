"""Stashed segments in memory: one float32 matrix plus the columns retrieval filters on.

Retrieval must stay fast at 100k segments (p95 ≤ 20 ms warm), so nothing on its path asks
the database: the vectors (~150 MB at 100k x 384), session, type, topic, times, expiry and
protection live in numpy arrays, and a query is one matrix-vector product plus boolean masks.
Every write goes through :class:`contextd.stash.service.StashService` in the process that
owns the database, which updates this index in the same call, so it is never stale.
Removed rows are only marked dead and the matrix is compacted once they pile up.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Iterable, Sequence

import numpy as np

from contextd.vectors.similarity import similarities
from contextd.stash.model import ALL_SESSIONS, SegmentType
from contextd.store.base import SegmentRow

MIN_CAPACITY = 1024
COMPACT_DEAD_SHARE = 0.25
COMPACT_MIN_DEAD = 256
NEVER = np.inf
_TYPE_CODES = {t.value: code for code, t in enumerate(SegmentType)}


def epoch(value: datetime | None) -> float:
    """Seconds since the epoch of a naive UTC datetime (None: never)."""
    if value is None:
        return NEVER
    return value.replace(tzinfo=timezone.utc).timestamp()


def epochs(values: Sequence[datetime | None]) -> np.ndarray:
    """:func:`epoch` of many datetimes at once (numpy reads naive datetimes as UTC)."""
    stamps = np.array(values, dtype="datetime64[us]")
    seconds = stamps.astype(np.int64) / 1e6
    return np.where(np.isnat(stamps), NEVER, seconds)


@dataclass(frozen=True)
class Filter:
    """Which segments a retrieval may see."""

    session_id: str
    types: tuple[str, ...] = ()
    topic: str | None = None
    since: datetime | None = None
    until: datetime | None = None


class StashIndex:
    """The vectors and filter columns of every live segment of one embedding model."""

    def __init__(self, model: str, dimension: int):
        self.model = model
        self.dimension = dimension
        self.matrix = np.zeros((0, dimension), dtype=np.float32)
        self.size = 0
        self.ids: list[str | None] = []
        self.position: dict[str, int] = {}
        self.rows: dict[str, SegmentRow] = {}
        self.referenced_by: dict[str, set[str]] = {}
        self._codes: dict[str, dict[str, int]] = {"session": {}, "topic": {}}
        self._columns = {name: np.zeros(0, dtype=dtype) for name, dtype in (
            ("alive", bool), ("session", np.int32), ("type", np.int8), ("topic", np.int32),
            ("created", np.float64), ("stashed", np.float64), ("expires", np.float64),
            ("protected", bool))}
        # Further pieces of long segments (contextd.stash.pieces): their vectors and the row
        # each belongs to; a segment scores as its best piece.
        self.piece_matrix = np.zeros((0, dimension), dtype=np.float32)
        self.piece_owner = np.zeros(0, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.position)

    def column(self, name: str) -> np.ndarray:
        """A filter column over the used rows (``alive``, ``created``, ``stashed``...)."""
        return self._columns[name][:self.size]

    def _code(self, kind: str, value: str | None) -> int:
        if value is None:
            return -1
        codes = self._codes[kind]
        return codes.setdefault(value, len(codes))

    def add(self, rows: Sequence[SegmentRow], vectors: np.ndarray) -> None:
        """Append segments with their vectors (row i of ``vectors`` belongs to rows[i])."""
        if not rows:
            return
        end = self.size + len(rows)
        if end > len(self.matrix):
            self._grow(max(MIN_CAPACITY, end, 2 * len(self.matrix)))
        self.matrix[self.size:end] = vectors
        values = {
            "alive": True,
            "session": [self._code("session", r.session_id) for r in rows],
            "type": [_TYPE_CODES[r.segment_type] for r in rows],
            "topic": [self._code("topic", r.topic) for r in rows],
            "created": epochs([r.created_at for r in rows]),
            "stashed": epochs([r.stashed_at for r in rows]),
            "expires": epochs([r.expires_at for r in rows]),
            "protected": [r.protected for r in rows]}
        for name, column in values.items():
            self._columns[name][self.size:end] = column
        for offset, row in enumerate(rows, start=self.size):
            self.ids.append(row.segment_id)
            self.position[row.segment_id] = offset
            self.rows[row.segment_id] = row
            for ref in row.references:
                self.referenced_by.setdefault(ref, set()).add(row.segment_id)
        self.size = end

    def add_pieces(self, segment_id: str, vectors: np.ndarray) -> None:
        """Vectors of a live segment's further pieces (beyond its own vector)."""
        if not len(vectors):
            return
        row = self.position[segment_id]
        self.piece_matrix = np.concatenate([self.piece_matrix,
                                            np.asarray(vectors, dtype=np.float32)])
        self.piece_owner = np.concatenate([self.piece_owner,
                                           np.full(len(vectors), row, dtype=np.int64)])

    def _grow(self, capacity: int) -> None:
        grown = np.zeros((capacity, self.dimension), dtype=np.float32)
        grown[:self.size] = self.matrix[:self.size]
        self.matrix = grown
        for name, column in self._columns.items():
            bigger = np.zeros(capacity, dtype=column.dtype)
            bigger[:self.size] = column[:self.size]
            self._columns[name] = bigger

    def remove(self, segment_ids: Iterable[str]) -> None:
        """Forget segments (their rows are marked dead)."""
        for sid in segment_ids:
            offset = self.position.pop(sid, None)
            if offset is None:
                continue
            self._columns["alive"][offset] = False
            self.ids[offset] = None
            row = self.rows.pop(sid)
            for ref in row.references:
                self.referenced_by.get(ref, set()).discard(sid)
        dead = self.size - len(self.position)
        if dead > max(COMPACT_MIN_DEAD, COMPACT_DEAD_SHARE * self.size):
            self._compact()

    def _compact(self) -> None:
        keep = np.flatnonzero(self.column("alive"))
        self.matrix = np.ascontiguousarray(self.matrix[keep])
        for name in self._columns:
            self._columns[name] = np.ascontiguousarray(self._columns[name][keep])
        self.ids = [self.ids[i] for i in keep]
        self.position = {sid: i for i, sid in enumerate(self.ids)}
        moved = np.full(self.size, -1, dtype=np.int64)
        moved[keep] = np.arange(len(keep))
        owners = moved[self.piece_owner]
        self.piece_matrix = np.ascontiguousarray(self.piece_matrix[owners >= 0])
        self.piece_owner = owners[owners >= 0]
        self.size = len(keep)

    def set_protected(self, segment_ids: Iterable[str], protected: bool) -> None:
        """Follow a protect/unprotect in memory."""
        for sid in segment_ids:
            offset = self.position.get(sid)
            if offset is not None:
                self._columns["protected"][offset] = protected
                self.rows[sid] = replace(self.rows[sid], protected=protected)

    def visible(self, where: Filter, now_s: float) -> np.ndarray:
        """Row numbers of the live, unexpired segments ``where`` lets through."""
        return np.flatnonzero(self.mask(where, now_s))

    def mask(self, where: Filter, now_s: float) -> np.ndarray:
        """Per row: live, unexpired and let through by ``where``."""
        mask = self.column("alive") & ((self.column("expires") > now_s)
                                       | self.column("protected"))
        if where.session_id != ALL_SESSIONS:
            code = self._codes["session"].get(where.session_id, -2)
            mask &= self.column("session") == code
        if where.types:
            mask &= np.isin(self.column("type"), [_TYPE_CODES[t] for t in where.types])
        if where.topic is not None:
            mask &= self.column("topic") == self._codes["topic"].get(where.topic, -2)
        if where.since is not None:
            mask &= self.column("created") >= epoch(where.since)
        if where.until is not None:
            mask &= self.column("created") <= epoch(where.until)
        return mask

    def similarities(self, vector: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Cosine similarity of ``vector`` to the given rows (vectors are L2-normalised).
        All rows at once when most are wanted: one contiguous product beats a gather. Small
        products stay on this thread (see contextd.vectors.similarity.SINGLE_THREAD_ROWS)."""
        if len(rows) > self.size // 2:
            sims = similarities(self.matrix[:self.size], vector)[rows]
        else:
            sims = similarities(self.matrix[rows], vector)
        if len(self.piece_owner) and len(rows):
            # A long segment scores as its best piece.
            at = np.full(self.size, -1, dtype=np.int64)
            at[rows] = np.arange(len(rows))
            where = at[self.piece_owner]
            hit = where >= 0
            if hit.any():
                piece_sims = similarities(self.piece_matrix[hit], vector)
                np.maximum.at(sims, where[hit], piece_sims.astype(sims.dtype))
        return sims

    def vector(self, segment_id: str) -> np.ndarray:
        """The stored vector of a live segment."""
        return self.matrix[self.position[segment_id]]
