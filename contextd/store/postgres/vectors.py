"""Embeddings on PostgreSQL: pgvector values, an HNSW index per (workspace, model), and
nearest-neighbour search in SQL, so no process loads every vector.

The column is an untyped ``vector`` (a workspace may cache vectors of several models, of
different dimensions); HNSW needs a fixed dimension, so each (workspace, model) gets a
partial expression index ``((vector::vector(dim)) vector_cosine_ops) WHERE workspace_id = …
AND model = …``. It is created right after the first vectors of that model are committed:
one bulk build for a copied or bulk-loaded index, then incremental inserts. Queries name the
workspace and model as literals, which is what lets the planner match the partial index.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any, Sequence

import numpy as np

from contextd.store.postgres.session import PostgresSession
from contextd.store.postgres.workspace import lock_key

log = logging.getLogger(__name__)

# HNSW parameters: pgvector's defaults for the graph, a wider search than its default 40 so a
# provider's 50 candidates (and the chunks sharing a text) come back at recall ~0.98.
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 64
HNSW_EF_SEARCH_MIN = 100
HNSW_EF_SEARCH_MAX = 1000
# Memory for one index build: 100k 384-d vectors take ~200 MB with the graph; below that the
# build spills and gets several times slower.
INDEX_BUILD_MEMORY = "512MB"


def configure_connection(conn: Any) -> None:
    """Every pooled connection: numpy arrays in and out of pgvector, and the HNSW search
    width of a provider's usual k, so most searches need no transaction to set it."""
    from pgvector.psycopg import register_vector

    register_vector(conn)
    conn.execute(f"SET hnsw.ef_search = {HNSW_EF_SEARCH_MIN}")


def as_array(value: Any) -> np.ndarray:
    """A float32 array of a vector as the pgvector adapter returns it."""
    return np.asarray(value.to_numpy() if hasattr(value, "to_numpy") else value,
                      dtype=np.float32)


def index_name(workspace: str, model: str, dimension: int) -> str:
    """The HNSW index of a workspace's vectors of one model (≤ 63 characters)."""
    digest = hashlib.sha256(f"{model}\0{dimension}".encode()).hexdigest()[:12]
    return f"emb_hnsw_{workspace}_{digest}"


class VectorsMixin(PostgresSession):
    """IndexStore's embedding methods, plus :meth:`nearest`."""

    def _init_vectors(self) -> None:
        self._indexed_models: set[tuple[str, int]] = set()

    def missing_embeddings(self, model: str, limit: int, paths: Sequence[str] | None = None
                           ) -> list[tuple[str, str]]:
        scope, params = "", [self.workspace, model]
        if paths is not None:
            scope = """AND c.file_id IN (SELECT f.file_id FROM file_state f
                       WHERE f.workspace_id = c.workspace_id AND f.path = ANY(%s))"""
            params.append(list(paths))
        return self._rows(
            f"""SELECT c.embed_hash, (array_agg(coalesce(c.index_text, c.text)))[1]
               FROM chunks c WHERE c.workspace_id = %s AND NOT EXISTS (
                   SELECT 1 FROM embeddings e WHERE e.workspace_id = c.workspace_id
                   AND e.model = %s AND e.text_hash = c.embed_hash) {scope}
               GROUP BY c.embed_hash ORDER BY min(c.file_id), c.embed_hash COLLATE "C"
               LIMIT %s""",
            [*params, limit])

    def count_missing_embeddings(self, model: str) -> int:
        return self._row(
            """SELECT count(DISTINCT c.embed_hash) FROM chunks c WHERE c.workspace_id = %s
               AND NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.workspace_id = c.workspace_id
                               AND e.model = %s AND e.text_hash = c.embed_hash)""",
            [self.workspace, model])[0]

    def put_embeddings(self, model: str, hashes: Sequence[str], vectors: np.ndarray) -> int:
        if len(hashes) == 0:
            return self.generation()
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        with self._transaction() as tx:
            conn = tx.conn
            conn.execute("CREATE TEMP TABLE IF NOT EXISTS incoming_vectors "
                         "(model TEXT, text_hash TEXT, vector vector) ON COMMIT DELETE ROWS")
            self._copy_vectors(conn, "incoming_vectors", [model] * len(hashes), hashes, vectors)
            conn.execute(
                """INSERT INTO embeddings (workspace_id, model, text_hash, vector)
                   SELECT DISTINCT ON (text_hash) %s, model, text_hash, vector
                   FROM incoming_vectors ORDER BY text_hash
                   ON CONFLICT (workspace_id, model, text_hash) DO NOTHING""",
                [self.workspace])
            tx.touch()
            self._index_after_commit(tx, model, int(vectors.shape[1]))
        return self._result_generation(tx)

    def _copy_vectors(self, conn: Any, table: str, models: Sequence[str],
                      hashes: Sequence[str], vectors: Any) -> None:
        """COPY (model, text_hash, vector) rows in binary (numpy straight to pgvector)."""
        workspace = [] if table == "incoming_vectors" else [self.workspace]
        names = ("workspace_id, " if workspace else "") + "model, text_hash, vector"
        with conn.cursor() as cur, cur.copy(
                f"COPY {table} ({names}) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["text"] * (len(workspace) + 2) + ["vector"])
            for model, text_hash, vector in zip(models, hashes, vectors):
                copy.write_row((*workspace, model, text_hash,
                                np.asarray(vector, dtype=np.float32)))

    def _index_after_commit(self, tx: Any, model: str, dimension: int) -> None:
        if (model, dimension) not in self._indexed_models:
            tx.after_commit.append(lambda: self._ensure_vector_index(model, dimension))

    def _ensure_vector_index(self, model: str, dimension: int) -> None:
        """Create the HNSW index of (workspace, model) if missing (after the vectors that
        call for it are committed: never inside a transaction that holds row locks on
        embeddings, which CREATE INDEX would wait for)."""
        from psycopg import sql

        name = index_name(self.workspace, model, dimension)
        statement = sql.SQL(
            "CREATE INDEX IF NOT EXISTS {name} ON embeddings USING hnsw "
            "((vector::vector({dim})) vector_cosine_ops) WITH (m = {m}, ef_construction = {ef}) "
            "WHERE workspace_id = {ws} AND model = {model}").format(
                name=sql.Identifier(name), dim=sql.Literal(dimension),
                m=sql.Literal(HNSW_M), ef=sql.Literal(HNSW_EF_CONSTRUCTION),
                ws=sql.Literal(self.workspace), model=sql.Literal(model))
        with self._pool.connection() as conn, conn.transaction():
            # Processes that add the first vectors at once build it once, in turn.
            conn.execute("SELECT pg_advisory_xact_lock(%s)",
                         [lock_key(self.workspace, f"vector-index:{name}")])
            conn.execute(sql.SQL("SET LOCAL maintenance_work_mem = {}").format(
                sql.Literal(INDEX_BUILD_MEMORY)))
            conn.execute(statement)
        self._indexed_models.add((model, dimension))

    def prune_embeddings(self, keep_model: str) -> int:
        with self._transaction() as tx:
            deleted = tx.conn.execute(
                """DELETE FROM embeddings e WHERE e.workspace_id = %s AND (e.model <> %s
                   OR (NOT EXISTS (SELECT 1 FROM chunks c WHERE c.workspace_id = e.workspace_id
                                   AND c.embed_hash = e.text_hash)
                       AND NOT EXISTS (SELECT 1 FROM stash_segments s
                                       WHERE s.workspace_id = e.workspace_id
                                       AND s.text_hash = e.text_hash)))""",
                [self.workspace, keep_model]).rowcount
        return deleted

    def vectors_for(self, model: str, embed_hashes: Sequence[str]) -> dict[str, np.ndarray]:
        with self._connection() as conn:  # binary: numpy from the wire, no text parsing
            rows = conn.execute("SELECT text_hash, vector FROM embeddings WHERE workspace_id = %s "
                                "AND model = %s AND text_hash = ANY(%s)",
                                [self.workspace, model, list(embed_hashes)],
                                binary=True).fetchall()
        return {h: as_array(v) for h, v in rows}

    def nearest(self, model: str, vector: np.ndarray, k: int) -> list[tuple[str, float]]:
        from psycopg import sql

        if k <= 0:
            return []
        vector = np.asarray(vector, dtype=np.float32)
        dim = sql.Literal(int(vector.shape[0]))
        query = sql.SQL(
            """SELECT c.chunk_id, 1 - nn.distance FROM (
                   SELECT text_hash, (vector::vector({dim})) <=> %s::vector({dim}) AS distance
                   FROM embeddings WHERE workspace_id = {ws} AND model = {model}
                   ORDER BY distance LIMIT %s) nn
               JOIN chunks c ON c.workspace_id = {ws} AND c.embed_hash = nn.text_hash
               ORDER BY nn.distance, c.chunk_id COLLATE "C" LIMIT %s""").format(
                   dim=dim, ws=sql.Literal(self.workspace), model=sql.Literal(model))
        # Vectors no chunk uses any more (kept as a cache) may take a few of the k places.
        with self._connection() as conn:
            if k <= HNSW_EF_SEARCH_MIN:  # the session's setting (configure_connection)
                rows = conn.execute(query, [vector, k, k], binary=True).fetchall()
            else:
                with conn.transaction():
                    conn.execute(sql.SQL("SET LOCAL hnsw.ef_search = {}").format(
                        sql.Literal(min(HNSW_EF_SEARCH_MAX, k))))
                    rows = conn.execute(query, [vector, k, k], binary=True).fetchall()
        return [(chunk_id, float(score)) for chunk_id, score in rows]
