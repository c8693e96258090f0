"""Agent memory on PostgreSQL: stashed context segments (:mod:`contextd.stash`). Their
vectors are rows of embeddings, keyed by (model, text hash) like chunks' (vectors.py)."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from contextd.store.base import SegmentRow
from contextd.store.postgres.session import PostgresSession
from contextd.store.postgres.vectors import as_array
from contextd.store.rows import SEGMENT_COLUMNS

# The rows of one workspace's segments named by id (parameters: workspace, list of ids).
_GIVEN_SEGMENTS = "WHERE workspace_id = %s AND segment_id = ANY(%s)"


class StashMixin(PostgresSession):
    """IndexStore's segment methods."""

    def put_segments(self, rows: Sequence[SegmentRow]) -> None:
        if not rows:
            return
        values = [(row.segment_id, row.session_id, row.text, row.segment_type, row.created_at,
                   row.stashed_at, row.tokens, row.topic, row.source, list(row.references),
                   row.text_hash, row.embedding_model, row.expires_at, row.protected)
                  for row in rows]
        with self._transaction() as tx:
            self._copy(tx.conn, "stash_segments", self.workspace,
                       {name: list(column) for name, column in zip(SEGMENT_COLUMNS,
                                                                    zip(*values))})

    def segments(self, segment_ids: Sequence[str] | None = None) -> list[SegmentRow]:
        sql = f"SELECT {', '.join(SEGMENT_COLUMNS)} FROM stash_segments WHERE workspace_id = %s"
        params: list = [self.workspace]
        if segment_ids is not None:
            sql += " AND segment_id = ANY(%s)"
            params.append(list(segment_ids))
        rows = self._rows(sql + ' ORDER BY stashed_at, segment_id COLLATE "C"', params)
        return [SegmentRow(*row[:9], tuple(row[9] or ()), *row[10:]) for row in rows]

    def count_segments(self) -> int:
        return self._row("SELECT count(*) FROM stash_segments WHERE workspace_id = %s",
                         [self.workspace])[0]

    def delete_segments(self, segment_ids: Sequence[str]) -> int:
        with self._transaction() as tx:
            return tx.conn.execute(f"DELETE FROM stash_segments {_GIVEN_SEGMENTS}",
                                   [self.workspace, list(segment_ids)]).rowcount

    def protect_segments(self, segment_ids: Sequence[str], protected: bool) -> int:
        with self._transaction() as tx:
            return tx.conn.execute(
                f"UPDATE stash_segments SET protected = %s {_GIVEN_SEGMENTS}",
                [protected, self.workspace, list(segment_ids)]).rowcount

    def set_segment_model(self, segment_ids: Sequence[str], model: str) -> None:
        with self._transaction() as tx:
            tx.conn.execute(f"UPDATE stash_segments SET embedding_model = %s {_GIVEN_SEGMENTS}",
                            [model, self.workspace, list(segment_ids)])

    def segment_vectors(self, model: str) -> tuple[list[str], np.ndarray]:
        with self._connection() as conn:  # binary: numpy from the wire, no text parsing
            rows = conn.execute(
                """SELECT s.segment_id, e.vector FROM stash_segments s JOIN embeddings e
                   ON e.workspace_id = s.workspace_id AND e.text_hash = s.text_hash
                   AND e.model = %s WHERE s.workspace_id = %s
                   ORDER BY s.stashed_at, s.segment_id COLLATE "C" """,
                [model, self.workspace], binary=True).fetchall()
        if not rows:
            return [], np.zeros((0, 0), dtype=np.float32)
        return [r[0] for r in rows], np.stack([as_array(r[1]) for r in rows])
