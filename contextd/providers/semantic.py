"""Semantic provider: cosine similarity between the query embedding and chunk embeddings.

A store that searches vectors itself (PostgreSQL + pgvector: :meth:`IndexStore.nearest`) is
asked for the nearest chunks instead (:class:`StoreVectorSearch`). Otherwise vectors are
held once: their int8 codes in memory (:mod:`contextd.vectors.quantized`: a first pass over
the codes, 1.5-3.5 ms at 100k chunks instead of 6-16 ms for the float32 product) and the
float32 rows in a spool file (:class:`~contextd.providers.spool.RowFile`: 92 MB at 60k chunks
kept off the heap), from which the best candidates of the first pass are read back and scored
exactly, so the top-k is the exact one. They follow the catalog file by file as a
:class:`~contextd.providers.catalog.CatalogFollower`. Chunks written before their vectors exist
are remembered per file and picked up as soon as the vectors are stored, so results are never
stale. Until the embedding model has loaded the provider reports a pending note instead of
blocking the query.
"""

from __future__ import annotations

import collections
import logging
import threading
from pathlib import Path
from typing import Any, BinaryIO, Callable, Sequence

import numpy as np

from contextd.providers.base import (
    ContextProvider, ProviderQuery, QueryCounters, ScopeFilter, snippet_from_row,
)
from contextd.providers.catalog import CatalogFollower, ChunkCatalog
from contextd.providers.saved_pair import (copy_bytes, joined, load_pair, save_pair,
                                           snapshot_folder, split)
from contextd.providers.source_share import is_source, with_source_share
from contextd.providers.spool import RowFile
from contextd.vectors.quantized import approximate_scores, exact_top, quantize
from contextd.query.duplicates import TRANSLATION_DEPTH, own_language_first, translation_groups
from contextd.records import ContextScope, ContextSnippet, ProviderType, TokenBudget
from contextd.vectors.similarity import similarities

log = logging.getLogger(__name__)

# When a scope is set, look this many times deeper into the ranking before sorting it all.
SCOPE_OVERFETCH = 8
PENDING_NOTE = "semantic results pending: model loading"
# Rows of re-written or removed files are only marked dead; the matrix is compacted when dead
# rows exceed this share of it (and this many), so a small write never copies 150 MB.
COMPACT_DEAD_SHARE = 0.25
COMPACT_MIN_DEAD = 1024
MIN_CAPACITY = 1024
# Vectors one store read loads (IndexStore.vector_batches): a load holds one batch of vectors
# at a time (~16 MB), not the whole matrix, its Arrow copy and the hash table of a join with
# every vector (chunk_vectors: ~240 MB above the matrix at 60k chunks, most of it kept by
# DuckDB's allocator afterwards). A read of a few hashes scans the embeddings table (0.1-0.3 s
# at 60k), and while the vectors are being computed each query asks again for every chunk
# still missing one, so batches are not much smaller.
CHUNKS_PER_VECTOR_READ = 10000
# The saved vectors beside the index (contextd.providers.saved_pair): the int8 codes, the
# chunk ids and text hashes of their rows, and the float32 rows.
VECTORS_SNAPSHOT = "vectors"
VECTORS_FORMAT = 1
# Query embeddings kept per text: agents repeat queries (retries, one task's context asked
# for again), and embedding costs 3-15 ms on a loaded machine.
QUERY_VECTOR_CACHE = 256
# The deepest a store-side search looks when a scope filters candidates out (pgvector's
# HNSW returns at most its ef_search, 1000, per query).
STORE_SEARCH_MAX_DEPTH = 1000


class VectorIndex(CatalogFollower):
    """Chunk vectors of one embedding model, in memory, brought up to the store's generation.

    The int8 codes (``codes``, with ``factors`` to scale them back) with spare capacity, for
    the first pass of a search, and the float32 rows in a spool (``matrix``, a few hundred
    rows read per query): a re-written file's rows are marked dead (``alive``) and its new
    rows appended, so an update costs its own rows.
    """

    def __init__(self, catalog: ChunkCatalog, model: str, dimension: int,
                 snapshot: Path | None = None):
        super().__init__(catalog)
        self.model = model
        self.dimension = dimension
        self.matrix: RowFile | None = None
        # Where the vectors are saved at close and loaded from (None: never), and the
        # updates made since the last save or load (saved again only after one).
        self.snapshot_folder = snapshot
        self._updates = 0
        self._saved_updates: int | None = None
        self.loaded_from_snapshot = False
        self._clear()

    def sync(self, generation: int | None = None) -> None:
        with self.lock:
            if self.version < 0 and self.snapshot_folder is not None:
                self._load_snapshot(generation)
            super().sync(generation)

    def _load_snapshot(self, generation: int | None) -> None:
        """Start from the saved vectors of the chunks the catalog holds as saved (same id,
        same text hash): the rows of other chunks are dead, and the files of chunks without
        a row are read from the store. Nothing happens when there is no snapshot of this
        model or it cannot be read (the caller then loads every vector)."""
        try:
            pair = load_pair(self.snapshot_folder, VECTORS_SNAPSHOT)
            if pair is None:
                return
            meta, arrays, path = pair
            if (meta.get("format"), meta.get("model"), meta.get("dimension")) != \
                    (VECTORS_FORMAT, self.model, self.dimension):
                return
            count = meta["rows"]
            ids = split(arrays["chunk_ids"], count)
            hashes = split(arrays["embed_hashes"], count)
            codes, factors = arrays["codes"], arrays["factors"]
            if codes.shape != (count, self.dimension) or len(factors) != count \
                    or meta["bytes"] != count * 4 * self.dimension:
                raise ValueError("arrays of different lengths")
        except (OSError, ValueError, KeyError, UnicodeDecodeError) as exc:
            log.info("saved vectors in %s unreadable (%s): loading them from the store",
                     self.snapshot_folder, exc)
            return
        catalog = self.catalog
        with catalog.lock:
            catalog.sync(generation)
            version, rows = catalog.version, catalog.rows
            self._clear()
            copy_bytes(path, meta["bytes"], self.matrix.spool.append)
            self.codes, self.factors = np.ascontiguousarray(codes), factors.astype(np.float32)
            self.alive = np.zeros(count, dtype=bool)
            self.size = count
            for row, (chunk_id, text_hash) in enumerate(zip(ids, hashes)):
                entry = rows.get(chunk_id)
                if entry is None or entry.embed_hash != text_hash or chunk_id in self.position:
                    self.ids.append(None)
                    continue
                self.ids.append(chunk_id)
                self.alive[row] = True
                self.position[chunk_id] = row
                self.file_rows.setdefault(entry.file_id, []).append(row)
                self.file_ids[entry.file_path] = entry.file_id
            without = sorted({e.file_id for cid, e in rows.items() if cid not in self.position})
            self.apply(without, ())
            self.version = version
        self._saved_updates = self._updates
        self.loaded_from_snapshot = True

    def save(self) -> None:
        """Write the live vectors beside the index for the next process (nothing without a
        snapshot folder, or when nothing changed since the last save or load). A failure
        costs the next process its head start only."""
        with self.lock:
            if self.snapshot_folder is None or self.version < 0 \
                    or self._updates == self._saved_updates:
                return
            rows = self.catalog.rows
            keep = np.asarray([i for i in np.flatnonzero(self.alive[:self.size])
                               if self.ids[i] in rows], dtype=np.int64)
            ids = [self.ids[i] for i in keep]

            def write_rows(out: BinaryIO) -> int:
                for start in range(0, len(keep), CHUNKS_PER_VECTOR_READ):
                    out.write(self.matrix[keep[start:start + CHUNKS_PER_VECTOR_READ]].tobytes())
                return len(keep) * 4 * self.dimension

            try:
                save_pair(self.snapshot_folder, VECTORS_SNAPSHOT,
                          {"format": VECTORS_FORMAT, "model": self.model,
                           "dimension": self.dimension, "rows": len(keep)},
                          {"chunk_ids": joined(ids),
                           "embed_hashes": joined(rows[cid].embed_hash for cid in ids),
                           "codes": self.codes[keep], "factors": self.factors[keep]},
                          write_rows)
                self._saved_updates = self._updates
            except OSError as exc:
                log.warning("could not save the vectors to %s: %s", self.snapshot_folder, exc)

    def _clear(self) -> None:
        if self.matrix is not None:
            self.matrix.close()
        self.matrix = RowFile(self.catalog.spool_folder, self.dimension)
        self.codes = np.zeros((0, self.dimension), dtype=np.int8)
        self.factors = np.zeros(0, dtype=np.float32)
        self.alive = np.zeros(0, dtype=bool)
        self.size = 0
        self.ids: list[str | None] = []
        self.position: dict[str, int] = {}
        self.file_rows: dict[int, list[int]] = {}
        # file path → id, so a scope of a few knowledge documents scores their rows only.
        self.file_ids: dict[str, int] = {}
        # The catalog's entries still without a vector, by text hash, and the hashes each
        # file waits for: a store write then looks up these hashes only (see store_moved).
        self.waiting: dict[str, list[Any]] = {}
        self.files_missing_vectors: dict[int, dict[str, None]] = {}
        # The store's vectors_mark when the waiting hashes were last looked up.
        self._vectors_mark: object | None = None

    def __len__(self) -> int:
        return len(self.position)

    def apply(self, changed: Sequence[int] | None, removed: Sequence[int]) -> None:
        self._updates += 1
        if changed is None:
            self._clear()
        for file_id in set(changed or ()) | set(removed):
            self._stop_waiting(file_id)
            for row in self.file_rows.pop(file_id, ()):
                self.alive[row] = False
                del self.position[self.ids[row]]
                self.ids[row] = None
        wanted: dict[str, list[Any]] = {}
        for entry in self.catalog.entries_for_files(changed):
            wanted.setdefault(entry.embed_hash, []).append(entry)
        self._take_vectors(wanted)

    def store_moved(self) -> None:
        """Take in the vectors written since the last sync for the chunks waiting for one.
        The store is asked which of their hashes have a vector now (hashes only), and only
        those vectors are read: re-reading every file still missing vectors on each sync
        cost 3-7 s and +65 MB of the owner's peak per answer while 55k chunks waited on
        wagtail (issue 37)."""
        if not self.waiting:
            return
        mark = self.store.vectors_mark(self.model)
        if mark is not None and mark == self._vectors_mark:
            return  # no vector written since the last look (a refresh's chunks, say)
        self._vectors_mark = mark
        self._updates += 1
        found = self.store.embedded_hashes(self.model, list(self.waiting))
        ready: dict[str, list[Any]] = {}
        for text_hash in found:
            entries = self.waiting.pop(text_hash, None)
            if entries is None:
                continue
            ready[text_hash] = entries
            for entry in entries:
                hashes = self.files_missing_vectors.get(entry.file_id)
                if hashes is not None:
                    hashes.pop(text_hash, None)
                    if not hashes:
                        del self.files_missing_vectors[entry.file_id]
        self._take_vectors(ready)

    def _take_vectors(self, wanted: dict[str, list[Any]]) -> None:
        """Append the rows of ``wanted`` (text hash → catalog entries) whose vectors the
        store holds; the others wait (:meth:`store_moved`)."""
        for hashes, vectors in self.store.vector_batches(self.model, list(wanted),
                                                         CHUNKS_PER_VECTOR_READ):
            new, picked = [], []
            for row, text_hash in enumerate(hashes):
                for entry in wanted.pop(text_hash, ()):
                    new.append(entry)
                    picked.append(row)
            if new:
                self._append(new, vectors[picked])
        for text_hash, entries in wanted.items():
            self.waiting.setdefault(text_hash, []).extend(entries)
            for entry in entries:
                self.files_missing_vectors.setdefault(entry.file_id, {})[text_hash] = None
        if self.size - len(self.position) > max(COMPACT_MIN_DEAD,
                                                 COMPACT_DEAD_SHARE * self.size):
            self._compact()

    def _stop_waiting(self, file_id: int) -> None:
        """Forget the vectors a re-written or removed file waited for."""
        for text_hash in self.files_missing_vectors.pop(file_id, ()):
            kept = [e for e in self.waiting.get(text_hash, ()) if e.file_id != file_id]
            if kept:
                self.waiting[text_hash] = kept
            else:
                self.waiting.pop(text_hash, None)

    def _append(self, rows: list[Any], vectors: np.ndarray) -> None:
        """Add rows at the end, doubling the capacity when it runs out."""
        end = self.size + len(rows)
        if end > len(self.codes):
            capacity = max(MIN_CAPACITY, end, 2 * len(self.codes))
            self.codes = _grown(self.codes, self.size, capacity)
            self.factors = _grown(self.factors, self.size, capacity)
            self.alive = _grown(self.alive, self.size, capacity)
        self.matrix.append(vectors)
        self.codes[self.size:end], self.factors[self.size:end] = quantize(vectors)
        self.alive[self.size:end] = True
        for offset, row in enumerate(rows, start=self.size):
            self.ids.append(row.chunk_id)
            self.position[row.chunk_id] = offset
            self.file_rows.setdefault(row.file_id, []).append(offset)
            self.file_ids[row.file_path] = row.file_id
        self.size = end

    def _compact(self) -> None:
        """Drop dead rows (one copy of the live ones)."""
        keep = np.flatnonzero(self.alive[:self.size])
        remap = np.full(self.size, -1, dtype=np.int64)
        remap[keep] = np.arange(len(keep))
        old, self.matrix = self.matrix, self.matrix.kept(keep)
        old.close()
        self.codes = np.ascontiguousarray(self.codes[keep])
        self.factors = self.factors[keep]
        self.alive = np.ones(len(keep), dtype=bool)
        self.ids = [self.ids[i] for i in keep]
        self.position = {cid: i for i, cid in enumerate(self.ids)}
        self.file_rows = {fid: [int(remap[r]) for r in rows]
                          for fid, rows in self.file_rows.items()}
        self.size = len(keep)

    def search(self, query_vector: np.ndarray, limit: int, scope: ScopeFilter,
               min_score: float, only: Callable[[str], bool] | None = None
               ) -> list[tuple[str, float]]:
        """(chunk id, cosine) of the best ``limit`` chunks inside the scope (and for which
        ``only(chunk_id)`` holds, when given)."""
        n = self.size
        if not self.position or limit <= 0:
            return []
        if scope.only_documents is not None:
            return self._search_documents(query_vector, limit, scope, min_score, only)
        approximate = approximate_scores(self.codes[:n], self.factors[:n], query_vector)
        if len(self.position) < n:
            approximate[~self.alive[:n]] = -np.inf
        depth = limit if scope.unrestricted and only is None else limit * SCOPE_OVERFETCH
        rows = self.catalog.rows
        while True:
            order, scores = exact_top(approximate, self.matrix, query_vector, min(depth, n))
            hits = [(self.ids[i], float(s)) for i, s in zip(order, scores)
                    if s >= min_score and self._accepts(scope, rows.get(self.ids[i]))
                    and (only is None or only(self.ids[i]))]
            if (len(hits) >= limit or depth >= n or not len(scores)
                    or scores[-1] < min_score):
                return hits[:limit]
            depth *= SCOPE_OVERFETCH

    def _search_documents(self, query_vector: np.ndarray, limit: int, scope: ScopeFilter,
                          min_score: float, only: Callable[[str], bool] | None = None
                          ) -> list[tuple[str, float]]:
        """:meth:`search` when only some knowledge documents can match: their rows alone are
        scored (a context of 500 chunks beside 50k others costs 500 products, not 50k)."""
        rows = [r for path in scope.only_documents
                for r in self.file_rows.get(self.file_ids.get(path, -1), ())]
        if not rows:
            return []
        index = np.asarray(rows, dtype=np.int64)
        scores = similarities(self.matrix[index], query_vector)
        catalog_rows = self.catalog.rows
        depth = limit * SCOPE_OVERFETCH
        while True:
            order = _top(scores, min(depth, len(scores)))
            hits = [(self.ids[index[i]], float(scores[i])) for i in order
                    if scores[i] >= min_score
                    and self._accepts(scope, catalog_rows.get(self.ids[index[i]]))
                    and (only is None or only(self.ids[index[i]]))]
            if len(hits) >= limit or depth >= len(scores) or scores[order[-1]] < min_score:
                return hits[:limit]
            depth *= SCOPE_OVERFETCH

    @staticmethod
    def _accepts(scope: ScopeFilter, row: Any) -> bool:
        return scope.unrestricted or (row is not None and scope.accepts_row(row))

    def vectors(self, chunk_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Stored vectors of the given chunks (those without one are left out)."""
        with self.lock:
            return {cid: self.matrix[self.position[cid]] for cid in chunk_ids
                    if cid in self.position}


class StoreVectorSearch:
    """Nearest neighbours asked of the store, for stores that search vectors themselves
    (:meth:`IndexStore.nearest`: PostgreSQL's HNSW index). Nothing is held in memory, so a
    process answering many workspaces does not load their vectors; each query is one SQL
    round trip, and results follow the store's committed state (never stale)."""

    # What the store has not embedded yet the indexer's own count says (never a lag here).
    files_missing_vectors: frozenset[int] = frozenset()
    waiting: frozenset[str] = frozenset()

    def __init__(self, catalog: ChunkCatalog, model: str):
        self.catalog = catalog
        self.store = catalog.store
        self.model = model
        self.lock = threading.RLock()

    def __len__(self) -> int:
        return 0

    def sync(self, generation: int | None = None) -> None:
        """The store answers from its committed rows; only the catalog, whose rows the scope
        filter reads, catches up."""
        self.catalog.sync(generation)

    def is_current(self, generation: int | None) -> bool:
        """Never "answers from memory": each search is a database round trip, better run on
        a pool thread beside the in-memory providers (contextd.providers.runner)."""
        return False

    def search(self, query_vector: np.ndarray, limit: int, scope: ScopeFilter,
               min_score: float) -> list[tuple[str, float]]:
        """(chunk id, cosine) of the best ``limit`` chunks inside the scope, looking deeper
        (up to STORE_SEARCH_MAX_DEPTH) while the scope filters too many out."""
        if limit <= 0:
            return []
        depth = limit if scope.unrestricted else limit * SCOPE_OVERFETCH
        while True:
            depth = min(depth, STORE_SEARCH_MAX_DEPTH)
            found = self.store.nearest(self.model, query_vector, depth)
            rows = self.catalog.rows
            hits = [(cid, score) for cid, score in found
                    if score >= min_score and VectorIndex._accepts(scope, rows.get(cid))]
            if (len(hits) >= limit or len(found) < depth or depth >= STORE_SEARCH_MAX_DEPTH
                    or found[-1][1] < min_score):
                return hits[:limit]
            depth *= SCOPE_OVERFETCH

    def vectors(self, chunk_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Stored vectors of the given chunks, read from the store (for MMR)."""
        rows = self.catalog.rows
        hashes = {cid: rows[cid].embed_hash for cid in chunk_ids if cid in rows}
        found = self.store.vectors_for(self.model, sorted(set(hashes.values())))
        return {cid: found[h] for cid, h in hashes.items() if h in found}


def _grown(array: np.ndarray, used: int, capacity: int) -> np.ndarray:
    """``array`` with room for ``capacity`` rows, its first ``used`` rows kept."""
    grown = np.zeros((capacity, *array.shape[1:]), dtype=array.dtype)
    grown[:used] = array[:used]
    return grown


def _top(scores: np.ndarray, depth: int) -> np.ndarray:
    """Indices of the ``depth`` highest scores, best first."""
    if depth >= len(scores):
        return np.argsort(-scores)
    part = np.argpartition(-scores, depth - 1)[:depth]
    return part[np.argsort(-scores[part])]


class SemanticProvider(ContextProvider):
    """Embedding search over every chunk."""

    id = "semantic"
    name = "Semantic search (embeddings)"
    type = ProviderType.SEMANTIC

    def __init__(self) -> None:
        super().__init__()
        self.index: VectorIndex | StoreVectorSearch | None = None
        self._query_vectors: collections.OrderedDict[tuple[str, str], np.ndarray] = \
            collections.OrderedDict()
        self._cache_lock = threading.Lock()

    def _embed_query(self, embedder: Any, text: str, counters: QueryCounters) -> np.ndarray:
        """The query's embedding, from a small LRU cache keyed by model and text (none with
        ``[embedding] cache_enabled = false``); ``counters`` learns whether it was a hit."""
        if not self.context.config.embedding.cache_enabled:
            return embedder.embed_query(text)
        key = (embedder.identity, text)
        counters.cache_lookups += 1
        with self._cache_lock:
            vector = self._query_vectors.get(key)
            if vector is not None:
                self._query_vectors.move_to_end(key)
                counters.cache_hits += 1
                return vector
        vector = embedder.embed_query(text)
        vector.setflags(write=False)  # shared by later queries
        with self._cache_lock:
            self._query_vectors[key] = vector
            while len(self._query_vectors) > QUERY_VECTOR_CACHE:
                self._query_vectors.popitem(last=False)
        return vector

    def _embedder(self) -> Any:
        assert self.context is not None, "initialize() was not called"
        return self.context.embedder.get_nowait()

    def is_available(self) -> bool:
        return self.context is not None and self._embedder() is not None

    def pending_note(self) -> str | None:
        if self.context is not None and self.context.embedder.loading:
            return PENDING_NOTE
        return None

    def ready_index(self, generation: int | None = None
                    ) -> VectorIndex | StoreVectorSearch | None:
        """The vector index, synced with the store; None while the model is loading. A store
        that searches vectors itself (``nearest``) is asked instead of loading them."""
        embedder = self._embedder()
        if embedder is None:
            return None
        if self.index is None or self.index.model != embedder.identity:
            catalog = self.context.catalog
            probe = np.zeros(embedder.dimension, dtype=np.float32)
            if catalog.store.nearest(embedder.identity, probe, 0) is not None:
                self.index = StoreVectorSearch(catalog, embedder.identity)
            else:
                self.index = VectorIndex(catalog, embedder.identity, embedder.dimension,
                                         snapshot_folder(self.context.project))
        self.index.sync(generation)
        return self.index

    def warm_up(self) -> None:
        self.ready_index()

    def catch_up(self, generation: int | None) -> None:
        self.ready_index(generation)

    def share_indexed(self) -> float:
        """Chunks with a vector / chunks (1.0 when the store searches vectors itself)."""
        index = self.index
        if not isinstance(index, VectorIndex):
            return 1.0
        return min(1.0, len(index) / max(1, len(self.context.catalog.rows)))

    def answers_from_memory(self, generation: int | None) -> bool:
        embedder = self._embedder()
        return (embedder is not None and self.index is not None
                and self.index.model == embedder.identity and self.index.is_current(generation)
                and self.context.catalog.is_current(generation))

    def query(self, query: ProviderQuery | str, scope: ContextScope, budget: TokenBudget
              ) -> list[ContextSnippet]:
        query = ProviderQuery.of(query)
        index = self.ready_index(query.generation)
        if index is None or not query.text.strip():
            return []
        vector = self._embed_query(self._embedder(), query.text, query.counters)
        catalog = self.context.catalog
        groups = translation_groups(catalog.file_paths(query.generation))
        depth = query.limit * TRANSLATION_DEPTH if groups.member else query.limit
        scope_filter = ScopeFilter(scope)
        with index.lock:
            query.counters.texts_without_vectors += len(index.waiting)
            hits = index.search(vector, depth, scope_filter, query.min_score)
            if isinstance(index, VectorIndex) and scope_filter.only_documents is None:
                rows = catalog.rows
                hits = with_source_share(hits, rows, depth, lambda n, seen: index.search(
                    vector, n, scope_filter, query.min_score,
                    lambda cid: cid not in seen and is_source(rows, cid)))
        hits = own_language_first(
            hits, lambda hit: (row := catalog.rows.get(hit[0])) and row.file_path, groups,
            query.text, query.limit)
        rows = self.context.catalog.rows_by_id([cid for cid, _ in hits], query.generation)
        return [snippet_from_row(rows[cid], score, self.id, {"cosine": round(score, 4)})
                for cid, score in hits if cid in rows]

    def vectors(self, chunk_ids: Sequence[str], generation: int | None = None
                ) -> dict[str, np.ndarray]:
        """Vectors of chunks, for MMR (empty while the model is loading): from memory when
        the index holds ``generation``, else the few asked for are read from the store. An
        answer after a ``git checkout`` otherwise first took every re-written file into
        the index, and, while vectors are still being computed, re-read every file missing
        one (issue 37: 84 of the answer's 103 samples); the index's own catch-up and the
        semantic search bring it up to the store."""
        index = self.index
        embedder = self._embedder()
        if isinstance(index, VectorIndex) and embedder is not None \
                and index.model == embedder.identity and not index.is_current(generation):
            return StoreVectorSearch(self.context.catalog, index.model).vectors(chunk_ids)
        ready = self.ready_index(generation)
        return ready.vectors(chunk_ids) if ready is not None else {}

    def shutdown(self) -> None:
        if isinstance(self.index, VectorIndex):
            self.index.save()  # the next process starts from it

    def stats(self) -> dict[str, Any]:
        if self.index is None:
            return {"loaded": False}
        if isinstance(self.index, StoreVectorSearch):
            return {"loaded": True, "model": self.index.model, "vectors": "searched in the store"}
        return {"loaded": True, "model": self.index.model, "vectors": len(self.index),
                "files_missing_vectors": len(self.index.files_missing_vectors)}
