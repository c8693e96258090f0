"""Embeddings: the vectors of chunk texts per model, written in bulk and read as one matrix."""

from __future__ import annotations

from typing import Any, Iterator, Sequence

import numpy as np

from contextd.store.duckdb.arrow_io import ids_and_vectors, vector_table
from contextd.store.duckdb.sql import first_row

# Above this share of the table, :meth:`VectorsMixin.vector_batches` scans the table by rowid
# ranges instead of looking up the hashes: at 60k vectors 0.19 s instead of 0.56-0.66 s.
SCAN_SHARE = 0.25


class VectorsMixin:
    """Embeddings of :class:`contextd.store.duckdb.store.DuckDBStore`."""

    def missing_embeddings(self, model: str, limit: int, paths: Sequence[str] | None = None
                           ) -> list[tuple[str, str]]:
        # The window is chosen on hashes alone, then only its texts are read: aggregating
        # the text of every missing chunk cost each window ~100 MB and a pass over all the
        # texts at 60k chunks.
        scope, params = "", [model]
        if paths is not None:
            scope = "SEMI JOIN (SELECT file_id FROM file_state WHERE list_contains(?, path)) f " \
                    "ON c.file_id = f.file_id"
            params.append(list(paths))
        return self._cursor().execute(
            f"""WITH window_hashes AS (
                   SELECT c.embed_hash, min(c.file_id) AS first_file
                   FROM chunks c ANTI JOIN (SELECT text_hash FROM embeddings WHERE model = ?) e
                   ON c.embed_hash = e.text_hash {scope}
                   GROUP BY c.embed_hash ORDER BY first_file, c.embed_hash LIMIT ?)
               SELECT w.embed_hash, any_value(coalesce(c.index_text, c.text))
               FROM window_hashes w JOIN chunks c ON c.embed_hash = w.embed_hash
               GROUP BY w.embed_hash, w.first_file ORDER BY w.first_file, w.embed_hash""",
            [*params, limit]).fetchall()

    def count_missing_embeddings(self, model: str) -> int:
        return first_row(self._cursor().execute(
            """SELECT count(DISTINCT c.embed_hash) FROM chunks c
               ANTI JOIN (SELECT text_hash FROM embeddings WHERE model = ?) e
               ON c.embed_hash = e.text_hash""", [model]))[0]

    def put_embeddings(self, model: str, hashes: Sequence[str], vectors: np.ndarray) -> int:
        if len(hashes) == 0:
            return self.generation()
        # Through the Arrow C interface: DuckDB reads the matrix where it is (a registered
        # object array of rows is converted value by value: ~15 ms a window of 1,024, not ~2).
        incoming = vector_table(("text_hash", "vector"), list(hashes), vectors)
        with self._transaction() as cur:
            gen = self._bump_generation(cur)
            cur.register("_incoming_vectors", incoming)
            try:
                cur.execute(
                    """INSERT INTO embeddings (model, text_hash, vector)
                       SELECT DISTINCT ON (i.text_hash) ?, i.text_hash, i.vector
                       FROM _incoming_vectors i
                       ANTI JOIN (SELECT text_hash FROM embeddings WHERE model = ?) e
                       ON i.text_hash = e.text_hash""", [model, model])
            finally:
                cur.unregister("_incoming_vectors")
        return gen

    def prune_embeddings(self, keep_model: str) -> int:
        with self._transaction() as cur:
            before = first_row(cur.execute("SELECT count(*) FROM embeddings"))[0]
            cur.execute("""DELETE FROM embeddings WHERE model <> ? OR (
                           text_hash NOT IN (SELECT embed_hash FROM chunks)
                           AND text_hash NOT IN (SELECT text_hash FROM stash_segments))""",
                        [keep_model])
            after = first_row(cur.execute("SELECT count(*) FROM embeddings"))[0]
        return before - after

    def chunk_vectors(self, model: str, file_ids: Sequence[int] | None = None
                      ) -> tuple[list[str], np.ndarray]:
        """(chunk ids, matrix) of every stored chunk (or those of ``file_ids``) that has a
        vector for ``model``; the semantic provider keeps this in memory."""
        sql = ("SELECT c.chunk_id, e.vector FROM chunks c JOIN embeddings e "
               "ON e.text_hash = c.embed_hash AND e.model = ?")
        params: list[Any] = [model]
        if file_ids is not None:
            sql += " WHERE c.file_id IN (SELECT unnest(?))"
            params.append(list(file_ids))
        # A relation on a cursor of its own, free of the thread cursor's pending results, read
        # as DuckDB's Arrow C stream: each batch's floats are copied once into the matrix.
        with self._own_cursor() as cur:
            return ids_and_vectors(cur.sql(sql, params=params))

    def vectors_for(self, model: str, embed_hashes: Sequence[str]) -> dict[str, np.ndarray]:
        rows = self._cursor().execute(
            "SELECT text_hash, vector FROM embeddings WHERE model = ? AND text_hash IN "
            "(SELECT unnest(?))", [model, list(embed_hashes)]).fetchall()
        return {h: np.asarray(v, dtype=np.float32) for h, v in rows}

    def vectors_mark(self, model: str) -> object | None:
        # Rows only ever appended (a prune deletes, and the next write appends past the
        # highest row id), so count and highest row id together change with every write.
        return first_row(self._cursor().execute(
            "SELECT count(*), max(rowid) FROM embeddings WHERE model = ?", [model]))

    def embedded_hashes(self, model: str, embed_hashes: Sequence[str]) -> set[str]:
        # The hash column alone: no vector is read.
        if not embed_hashes:
            return set()
        with self._own_cursor() as cur:
            return {h for (h,) in cur.execute(
                "SELECT text_hash FROM embeddings "
                "WHERE model = ? AND text_hash IN (SELECT unnest(?))",
                [model, list(embed_hashes)]).fetchall()}

    def vector_rows(self, model: str, embed_hashes: Sequence[str]
                    ) -> tuple[list[str], np.ndarray]:
        # Through the Arrow C stream, as chunk_vectors: no numpy array or Python float per
        # row, and a cursor of its own, free of the thread cursor's pending results.
        if not embed_hashes:
            return [], np.zeros((0, 0), dtype=np.float32)
        with self._own_cursor() as cur:
            return ids_and_vectors(cur.sql(
                "SELECT text_hash, vector FROM embeddings "
                "WHERE model = ? AND text_hash IN (SELECT unnest(?))",
                params=[model, list(embed_hashes)]))

    def vector_batches(self, model: str, embed_hashes: Sequence[str], rows: int
                       ) -> Iterator[tuple[list[str], np.ndarray]]:
        # Rowid ranges: each reads only its own row groups, so a batch holds ~rows vectors
        # (~16 MB at 10k), never the whole matrix and its Arrow copy at once.
        count, top = first_row(self._cursor().execute(
            "SELECT count(*), max(rowid) FROM embeddings"))
        if not count or len(embed_hashes) < SCAN_SHARE * count:
            yield from super().vector_batches(model, embed_hashes, rows)
            return
        for start in range(0, top + 1, rows):
            with self._own_cursor() as cur:
                yield ids_and_vectors(cur.sql(
                    "SELECT text_hash, vector FROM embeddings "
                    "WHERE model = ? AND rowid >= ? AND rowid < ?",
                    params=[model, start, start + rows]))
