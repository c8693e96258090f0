"""Contextual retrieval over one index: search with the prefixes, the same search
without them side by side (A/B), and what the prefixes are worth.

The A/B comparison is a dense ranking of every indexed chunk twice: once by the vectors of
the index texts (contextual prefix + chunk: what the index holds) and once by the vectors of
the chunk texts alone (what the index would hold without prefixes). Both use the configured
embedding model; the chunk-only vectors are computed the first time (a one-off cost of about
one indexing pass over the contextualized chunks, progress on the log) and kept in the
embeddings table, which is keyed by text hash, so later comparisons cost a matrix product.
Lexical ranks change with prefixes too; the comparison leaves them out so that the one
difference between the two columns is the prefix.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from contextd.errors import ModelUnavailableError, UsageError
from contextd.query.records import QueryRequest
from contextd.store.rows import text_hash

log = logging.getLogger(__name__)

MODEL_WAIT_S = 120.0
MAX_LIMIT = 100
# How much of each side the comparison reports a rank for beyond ``limit``.
RANK_DEPTH = 1000


@dataclass(frozen=True)
class RankedChunk:
    """One chunk of one side of the A/B comparison; ``other_rank`` is its rank on the other
    side (None: below RANK_DEPTH there)."""

    rank: int
    chunk_id: str
    file_path: str
    start_line: int
    end_line: int
    label: str
    score: float
    other_rank: int | None


@dataclass(frozen=True)
class ExpectedRank:
    """Where a file the caller knows answers the query ranks on each side: the rank of its
    best chunk (None: not indexed, or no vector)."""

    path: str
    rank_with_context: int | None
    rank_without_context: int | None


@dataclass(frozen=True)
class Comparison:
    """Dense rankings with and without the contextual prefixes, side by side."""

    query: str
    with_context: tuple[RankedChunk, ...]
    without_context: tuple[RankedChunk, ...]
    overlap: int                     # chunks in both top-``limit`` lists
    chunks_compared: int
    contextualized_chunks: int
    vectors_computed: int            # chunk-only vectors embedded by this comparison
    expected: tuple[ExpectedRank, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)


def _ranked(order: np.ndarray, scores: np.ndarray, rows: Sequence[Any], other: dict[str, int],
            limit: int) -> tuple[RankedChunk, ...]:
    return tuple(RankedChunk(rank=n, chunk_id=rows[i].chunk_id, file_path=rows[i].file_path,
                             start_line=rows[i].start_line, end_line=rows[i].end_line,
                             label=rows[i].label, score=round(float(scores[i]), 4),
                             other_rank=other.get(rows[i].chunk_id))
                 for n, i in enumerate(order[:limit], start=1))


def _best_rank(order: np.ndarray, rows: Sequence[Any], path: str) -> int | None:
    """1-based rank of the first chunk of file ``path`` in ``order`` (None: no chunk)."""
    for n, i in enumerate(order, start=1):
        if rows[i].file_path == path:
            return n
    return None


class ContextualRetrieval:
    """Seed 003's search, A/B comparison and statistics over a ProjectContext's index."""

    def __init__(self, context: Any):
        self.context = context
        self.store = context.store
        self.config = context.config

    def _model(self) -> Any:
        embedder = self.context.embedder.wait(MODEL_WAIT_S)
        if embedder is None:
            raise ModelUnavailableError("contextual retrieval needs the embedding model, "
                                        f"which is unavailable: {self.context.embedder.error}")
        return embedder

    def search(self, query: str, limit: int = 10, score_threshold: float | None = None,
               ab: bool = False, expect: Sequence[str] = ()) -> dict[str, Any]:
        """The hybrid search over the contextualized chunks (what query_context runs), each
        result with its prefix, the prefix's quality and tokens; with ``ab`` also the
        :class:`Comparison` (``expect``: files known to answer the query, ranked on both
        sides)."""
        if not 1 <= limit <= MAX_LIMIT:
            raise UsageError(f"limit must be between 1 and {MAX_LIMIT}, not {limit}")
        response = self.context.query(QueryRequest(query=query, k=limit,
                                                   min_score=score_threshold,
                                                   wait_for_model=True))
        rows = self.context.catalog.rows_by_id([h.chunk_id for h in response.hits])
        details = self.store.prefix_details([h.chunk_id for h in response.hits],
                                            self.config.contextualizer.min_key_term_share)
        results = []
        for hit in response.hits:
            row = rows.get(hit.chunk_id)
            prefix = ""
            if row is not None and row.index_text != row.text:
                prefix = row.index_text[:len(row.index_text) - len(row.text)].rstrip()
            quality, tokens = details.get(hit.chunk_id, (None, 0))
            results.append({
                "id": hit.chunk_id, "file_path": hit.file_path, "start_line": hit.start_line,
                "end_line": hit.end_line, "label": hit.label, "score": hit.score,
                "content": hit.snippet, "context": prefix,
                "metadata": {"has_context": bool(prefix), "context_quality": quality,
                             "prefix_tokens": tokens, "providers": list(hit.providers)}})
        answer: dict[str, Any] = {"success": True, "query": query, "count": len(results),
                                  "total": response.total, "results": results,
                                  "strategy": self.config.contextualizer.strategy,
                                  "notes": list(response.notes)}
        if ab:
            answer["ab"] = self.compare(query, limit, expect)
        return answer

    def compare(self, query: str, limit: int = 10, expect: Sequence[str] = ()
                ) -> Comparison:
        """Rank every indexed chunk by its index-text vector and by its chunk-text vector;
        ``expect`` names files that answer the query, whose best rank each side reports."""
        model = self._model()
        rows = list(self.context.catalog.iter_chunks())
        if not rows:
            raise UsageError("nothing is indexed yet: run contextd refresh (or a query) first")
        with_hash = [r.embed_hash for r in rows]
        without_hash = [r.embed_hash if r.index_text == r.text else text_hash(r.text)
                        for r in rows]
        contextualized = sum(1 for a, b in zip(with_hash, without_hash) if a != b)
        stored = self.store.vectors_for(model.identity, list(dict.fromkeys(with_hash
                                                                             + without_hash)))
        computed = self._embed_missing(model, rows, without_hash, stored)
        keep = [i for i, h in enumerate(with_hash) if h in stored]
        notes = []
        if len(keep) < len(rows):
            notes.append(f"{len(rows) - len(keep)} chunk(s) have no vector yet and are left "
                         "out of both columns")
        if not contextualized:
            notes.append(f"no chunk carries a prefix ([contextualizer] strategy = "
                         f"{self.config.contextualizer.strategy!r}): both columns are the same")
        rows = [rows[i] for i in keep]
        vector = model.embed_query(query)
        sides = []
        for hashes in ([with_hash[i] for i in keep], [without_hash[i] for i in keep]):
            # No chunk has a vector yet (the bootstrap embeds after it reads): empty columns,
            # and the note above says why, instead of stacking nothing.
            matrix = (np.stack([stored[h] for h in hashes]) if hashes
                      else np.zeros((0, len(vector)), dtype=np.float32))
            scores = matrix @ vector
            order = np.argsort(-scores, kind="stable")
            sides.append((order, scores))
        ranks = [{rows[i].chunk_id: n for n, i in enumerate(order[:RANK_DEPTH], start=1)}
                 for order, _ in sides]
        top = [set(list(r)[:limit]) for r in ranks]
        expected = tuple(ExpectedRank(path, *(_best_rank(order, rows, path)
                                              for order, _ in sides))
                         for path in dict.fromkeys(p.strip().lstrip("./") for p in expect)
                         if path)
        return Comparison(
            query=query,
            with_context=_ranked(*sides[0], rows, ranks[1], limit),
            without_context=_ranked(*sides[1], rows, ranks[0], limit),
            overlap=len(top[0] & top[1]), chunks_compared=len(rows),
            contextualized_chunks=contextualized, vectors_computed=computed,
            expected=expected, notes=tuple(notes))

    def _embed_missing(self, model: Any, rows: Sequence[Any], hashes: Sequence[str],
                       stored: dict[str, np.ndarray]) -> int:
        """Embed the chunk texts whose vector is not stored, store them (the cache) and add
        them to ``stored``; returns how many."""
        missing = {h: r.text for h, r in zip(hashes, rows) if h not in stored}
        if not missing:
            return 0
        batch = max(1, self.config.embedding.batch_size)
        items = list(missing.items())
        started = time.monotonic()
        for start in range(0, len(items), batch):
            part = items[start:start + batch]
            vectors = model.embed([text for _, text in part])
            self.store.put_embeddings(model.identity, [h for h, _ in part], vectors)
            stored.update((h, vectors[i]) for i, (h, _) in enumerate(part))
            log.info("A/B: embedded %d of %d chunk texts without their prefix (%.0f s)",
                     min(start + batch, len(items)), len(items), time.monotonic() - started)
        return len(items)

    def stats(self) -> dict[str, Any]:
        """get_contextual_retrieval_stats: strategy, chunks with a prefix, their mean length
        and quality, and the LLM tokens and cost spent over the recorded indexing runs."""
        settings = self.config.contextualizer
        summary = self.store.prefix_summary(settings.min_key_term_share)
        tokens = cost = 0.0
        for job in self.store.list_jobs(limit=1000):
            llm = (job.metrics.get("contextualizer") or {}).get("llm") or {}
            tokens += (llm.get("prompt_tokens") or 0) + (llm.get("completion_tokens") or 0)
            cost += llm.get("cost") or 0.0
        running = [j for j in self.store.list_jobs(("queued", "in_progress"), limit=5)]
        status = ("disabled" if settings.strategy == "none" else
                  "reindexing" if running else
                  "ready" if summary["contextualized"] else "not_indexed")
        return {"status": status, "strategy": settings.strategy,
                "llm_provider": settings.llm_api if settings.strategy == "llm" else None,
                "llm_model": settings.llm_model if settings.strategy == "llm" else None,
                "total_entities": summary["chunks"],
                "contextualized_entities": summary["contextualized"],
                "average_context_length": summary["mean_prefix_tokens"],
                "average_quality": summary["mean_quality"], "quality": summary["quality"],
                "total_prefix_tokens": summary["prefix_tokens"],
                "total_tokens_used": int(tokens), "estimated_cost": round(cost, 4)}
