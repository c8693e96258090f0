"""Semantic provider: cosine similarity between the query embedding and chunk embeddings.

Vectors live in memory as one float32 matrix (exact top-k by one matrix product: ~0.4 ms at
10k chunks, ~4 ms at 100k on this machine kind) and follow the store file by file through
:class:`~contextd.providers.base.IncrementalIndex`. Chunks written before their vectors exist
are remembered per file and picked up as soon as the vectors are stored, so results are never
stale. Until the embedding model has loaded the provider reports a pending note instead of
blocking the query.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from contextd.providers.base import (
    ContextProvider, IncrementalIndex, ProviderQuery, ScopeFilter, snippet_from_row,
)
from contextd.records import ContextScope, ContextSnippet, ProviderType, TokenBudget
from contextd.store.base import IndexStore

# When a scope is set, look this many times deeper into the ranking before sorting it all.
SCOPE_OVERFETCH = 8
PENDING_NOTE = "semantic results pending: model loading"


@dataclass(frozen=True)
class _Rows:
    """Per-chunk metadata aligned with the rows of the matrix."""

    ids: list[str]
    file_ids: np.ndarray
    paths: list[str]
    languages: list[str]
    kinds: list[str]


class VectorIndex(IncrementalIndex):
    """Chunk vectors of one embedding model, in memory, kept in step with the store."""

    def __init__(self, store: IndexStore, model: str, dimension: int):
        super().__init__(store)
        self.model = model
        self.matrix = np.zeros((0, dimension), dtype=np.float32)
        self.rows = _Rows([], np.zeros(0, dtype=np.int64), [], [], [])
        self.position: dict[str, int] = {}
        self.files_missing_vectors: set[int] = set()

    def extra_file_ids(self) -> Sequence[int]:
        return sorted(self.files_missing_vectors)

    def apply(self, changed: Sequence[int] | None, removed: Sequence[int]) -> None:
        rows, matrix = self.rows, self.matrix
        if changed is None:
            keep = np.zeros(len(rows.ids), dtype=bool)
        else:
            drop = np.fromiter(set(changed) | set(removed), dtype=np.int64)
            keep = ~np.isin(rows.file_ids, drop)
            self.files_missing_vectors -= set(changed) | set(removed)
        chunk_rows = self.store.chunks_for_files(changed)
        ids, vectors = self.store.chunk_vectors(self.model, changed)
        found = dict(zip(ids, range(len(ids))))
        new = [r for r in chunk_rows if r.chunk_id in found]
        self.files_missing_vectors |= {r.file_id for r in chunk_rows if r.chunk_id not in found}
        take = [i for i, k in enumerate(keep) if k]
        order = np.array([found[r.chunk_id] for r in new], dtype=np.int64)
        added = vectors[order] if len(order) else np.zeros((0, matrix.shape[1]), np.float32)
        self.matrix = np.ascontiguousarray(np.vstack([matrix[keep], added]), dtype=np.float32)
        self.rows = _Rows(
            ids=[rows.ids[i] for i in take] + [r.chunk_id for r in new],
            file_ids=np.concatenate([rows.file_ids[keep],
                                     np.array([r.file_id for r in new], dtype=np.int64)]),
            paths=[rows.paths[i] for i in take] + [r.file_path for r in new],
            languages=[rows.languages[i] for i in take] + [r.language or "" for r in new],
            kinds=[rows.kinds[i] for i in take] + [r.kind for r in new])
        self.position = {cid: i for i, cid in enumerate(self.rows.ids)}

    def search(self, query_vector: np.ndarray, limit: int, scope: ScopeFilter,
               min_score: float) -> list[tuple[str, float]]:
        """(chunk id, cosine) of the best ``limit`` chunks inside the scope."""
        n = len(self.rows.ids)
        if n == 0 or limit <= 0:
            return []
        scores = self.matrix @ query_vector
        depth = limit if scope.unrestricted else limit * SCOPE_OVERFETCH
        while True:
            order = _top(scores, min(depth, n))
            hits = [(self.rows.ids[i], float(scores[i])) for i in order
                    if scores[i] >= min_score and scope.accepts(
                        self.rows.paths[i], self.rows.languages[i], self.rows.kinds[i])]
            if len(hits) >= limit or depth >= n or scores[order[-1]] < min_score:
                return hits[:limit]
            depth *= SCOPE_OVERFETCH

    def vectors(self, chunk_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Stored vectors of the given chunks (those without one are left out)."""
        with self.lock:
            return {cid: self.matrix[self.position[cid]] for cid in chunk_ids
                    if cid in self.position}


def _top(scores: np.ndarray, depth: int) -> np.ndarray:
    """Indices of the ``depth`` highest scores, best first."""
    if depth >= len(scores):
        return np.argsort(-scores)
    part = np.argpartition(-scores, depth - 1)[:depth]
    return part[np.argsort(-scores[part])]


class SemanticProvider(ContextProvider):
    """Embedding search over every chunk (spec 004 §9.1)."""

    id = "semantic"
    name = "Semantic search (embeddings)"
    type = ProviderType.SEMANTIC

    def __init__(self) -> None:
        super().__init__()
        self.index: VectorIndex | None = None

    def _embedder(self) -> Any:
        assert self.context is not None, "initialize() was not called"
        return self.context.embedder.get_nowait()

    def is_available(self) -> bool:
        return self.context is not None and self._embedder() is not None

    def pending_note(self) -> str | None:
        if self.context is not None and self.context.embedder.loading:
            return PENDING_NOTE
        return None

    def ready_index(self, generation: int | None = None) -> VectorIndex | None:
        """The vector index, synced with the store; None while the model is loading."""
        embedder = self._embedder()
        if embedder is None:
            return None
        if self.index is None or self.index.model != embedder.identity:
            self.index = VectorIndex(self.context.store, embedder.identity, embedder.dimension)
        self.index.sync(generation)
        return self.index

    def warm_up(self) -> None:
        self.ready_index()

    def query(self, query: ProviderQuery | str, scope: ContextScope, budget: TokenBudget
              ) -> list[ContextSnippet]:
        query = ProviderQuery.of(query)
        index = self.ready_index(query.generation)
        if index is None or not query.text.strip():
            return []
        vector = self._embedder().embed_query(query.text)
        min_score = max(query.min_score, self.context.config.query.min_score_threshold)
        with index.lock:
            hits = index.search(vector, query.limit, ScopeFilter(scope), min_score)
        rows = self.context.rows([cid for cid, _ in hits], index.generation)
        return [snippet_from_row(rows[cid], score, self.id, {"cosine": round(score, 4)})
                for cid, score in hits if cid in rows]

    def vectors(self, chunk_ids: Sequence[str], generation: int | None = None
                ) -> dict[str, np.ndarray]:
        """In-memory vectors of chunks, for MMR (empty while the model is loading)."""
        index = self.ready_index(generation)
        return index.vectors(chunk_ids) if index is not None else {}

    def stats(self) -> dict[str, Any]:
        if self.index is None:
            return {"loaded": False}
        return {"loaded": True, "model": self.index.model, "vectors": len(self.index.rows.ids),
                "files_missing_vectors": len(self.index.files_missing_vectors)}
