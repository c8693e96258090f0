"""Full-text provider: BM25 (Okapi) over code-aware tokens, in memory and incremental.

Tokenisation splits identifiers the way programmers read them (``parseHTTPResponse`` →
``parse``, ``http``, ``response``; ``max_retries`` → ``max``, ``retries``) and keeps the whole
identifier as a token too, so an exact identifier outranks a chance co-occurrence of its
parts. A light suffix stemmer lets "tokens"/"token" and "validated"/"validate" meet.

The index (:class:`BM25Index`) holds postings per term and document lengths per slot; files are
removed and re-added as the store changes, so it is never stale and never fully rebuilt after
the first load. Scores equal ``rank_bm25.BM25Okapi`` on the same tokens (tests/test_bm25.py),
including its treatment of negative IDF (replaced by ε × the average IDF).

A query costs one vectorised add per query term: each term's BM25 contribution to every
document containing it (slots and weights as numpy arrays) is computed once and kept until
the next change of the index, and only the best ``limit`` scores are sorted.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from functools import lru_cache
from typing import Any, Callable, Sequence

import numpy as np

from contextd.providers.base import (
    ContextProvider, ProviderQuery, ScopeFilter, snippet_from_row,
)
from contextd.providers.catalog import ChunkCatalog, IncrementalIndex
from contextd.records import ContextScope, ContextSnippet, ProviderType, TokenBudget
from contextd.text.stemming import light_stem
from contextd.store.base import ChunkRow

# BM25 Okapi parameters: rank_bm25's defaults, the usual choice for short documents.
BM25_K1 = 1.5
BM25_B = 0.75
BM25_EPSILON = 0.25
# The floor of the average IDF behind the weight of a very common term: in a corpus of a few
# documents the average itself is 0 or below, and every term would weigh nothing.
MIN_AVERAGE_IDF = 1.0
MIN_TOKEN_LENGTH = 2
_SPLIT_CACHE_SIZE = 200_000

_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+")
_CAMEL_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
STOPWORDS = frozenset("""
a an and are as at be by can do does for from how i if in into is it its of on or so that the
their then there these this to was what when where which while who why will with you your
""".split())


@lru_cache(maxsize=_SPLIT_CACHE_SIZE)
def _identifier_tokens(identifier: str) -> tuple[str, ...]:
    parts = [p.lower() for piece in identifier.split("_") for p in _CAMEL_RE.findall(piece)]
    whole = identifier.lower().strip("_")
    out = [whole] if len(whole) >= MIN_TOKEN_LENGTH and whole not in STOPWORDS else []
    if len(parts) > 1:
        out.extend(light_stem(p) for p in parts
                   if len(p) >= MIN_TOKEN_LENGTH and p not in STOPWORDS)
    elif out:
        out[0] = light_stem(whole)
    return tuple(out)


def code_tokens(text: str) -> list[str]:
    """Code-aware tokens of a text: whole identifiers plus their camelCase/snake_case parts,
    lower-cased and lightly stemmed, stopwords and one-character tokens dropped."""
    out: list[str] = []
    for identifier in _IDENT_RE.findall(text):
        out.extend(_identifier_tokens(identifier))
    return out


class BM25Index:
    """BM25 Okapi over documents that can be added and removed one at a time."""

    def __init__(self, k1: float = BM25_K1, b: float = BM25_B, epsilon: float = BM25_EPSILON):
        self.k1, self.b, self.epsilon = k1, b, epsilon
        self.postings: dict[str, dict[int, int]] = {}
        self.doc_len = np.zeros(0, dtype=np.float64)
        self.slot_ids: list[str | None] = []
        self.slot_terms: list[tuple[str, ...]] = []
        self.slot_of: dict[str, int] = {}
        self.free: list[int] = []
        self.total_len = 0
        # Per term: (slots, BM25 contribution) at the current N and average length.
        self._weights: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._average_idf: float | None = None

    def __len__(self) -> int:
        return len(self.slot_of)

    def add(self, doc_id: str, tokens: Sequence[str]) -> None:
        """Index a document (replacing one with the same id)."""
        if doc_id in self.slot_of:
            self.remove(doc_id)
        counts = Counter(tokens)
        slot = self.free.pop() if self.free else self._grow()
        self.slot_ids[slot] = doc_id
        self.slot_terms[slot] = tuple(counts)
        self.slot_of[doc_id] = slot
        self.doc_len[slot] = len(tokens)
        self.total_len += len(tokens)
        for term, tf in counts.items():
            self.postings.setdefault(term, {})[slot] = tf
        self._changed()

    def _changed(self) -> None:
        """Forget what depends on N, the average length or the postings."""
        self._weights.clear()
        self._average_idf = None

    def _grow(self) -> int:
        slot = len(self.slot_ids)
        if slot >= len(self.doc_len):
            self.doc_len = np.concatenate([self.doc_len, np.zeros(max(64, slot), np.float64)])
        self.slot_ids.append(None)
        self.slot_terms.append(())
        return slot

    def remove(self, doc_id: str) -> None:
        """Forget a document (no-op when unknown)."""
        slot = self.slot_of.pop(doc_id, None)
        if slot is None:
            return
        for term in self.slot_terms[slot]:
            docs = self.postings[term]
            del docs[slot]
            if not docs:
                del self.postings[term]
        self.total_len -= int(self.doc_len[slot])
        self.doc_len[slot] = 0
        self.slot_ids[slot] = None
        self.slot_terms[slot] = ()
        self.free.append(slot)
        self._changed()

    def idf(self, term: str) -> float:
        """rank_bm25's IDF: log((N − df + 0.5) / (df + 0.5)), negatives → ε × average IDF.

        Unlike rank_bm25, a term held by half the documents or more never weighs 0 or less:
        in a new two-file project every word is in one of two files (IDF exactly 0, average
        IDF ≤ 0), and a search for words of a docstring found nothing at all."""
        df = len(self.postings.get(term, ()))
        if not df:
            return 0.0
        n = len(self.slot_of)
        value = math.log(n - df + 0.5) - math.log(df + 0.5)
        return value if value > 0 else self.epsilon * max(self._average(), MIN_AVERAGE_IDF)

    def _average(self) -> float:
        if self._average_idf is None:
            dfs = np.fromiter((len(d) for d in self.postings.values()), dtype=np.float64)
            n = len(self.slot_of)
            self._average_idf = float(np.mean(np.log(n - dfs + 0.5) - np.log(dfs + 0.5))) \
                if len(dfs) else 0.0
        return self._average_idf

    def _term_weights(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        """(slots containing ``term``, the term's BM25 contribution to each)."""
        cached = self._weights.get(term)
        if cached is None:
            docs = self.postings[term]
            slots = np.fromiter(docs.keys(), np.int64, len(docs))
            tf = np.fromiter(docs.values(), np.float64, len(docs))
            avgdl = self.total_len / len(self.slot_of)
            norm = self.k1 * (1 - self.b + self.b * self.doc_len[slots] / avgdl)
            cached = (slots, self.idf(term) * tf * (self.k1 + 1) / (tf + norm))
            self._weights[term] = cached
        return cached

    def score_slots(self, query_tokens: Sequence[str]) -> np.ndarray:
        """BM25 score of every slot (free slots score 0); repeated query tokens count again,
        as in rank_bm25."""
        scores = np.zeros(len(self.slot_ids), dtype=np.float64)
        if not self.slot_of:
            return scores
        for term in query_tokens:
            if term in self.postings:
                slots, weights = self._term_weights(term)
                scores[slots] += weights
        return scores

    def coverage(self, query_tokens: Sequence[str], doc_ids: Sequence[str]) -> list[float]:
        """Per document: the IDF-weighted share of the distinct query terms it holds, a term
        found in no document weighing the most any term can (an absolute measure: a query
        for a name that does not exist scores low everywhere)."""
        terms = list(dict.fromkeys(query_tokens))
        if not terms or not self.slot_of:
            return [0.0] * len(doc_ids)
        ceiling = math.log(len(self.slot_of) + 0.5) - math.log(0.5)
        weights = [self.idf(t) if t in self.postings else ceiling for t in terms]
        total = sum(weights) or 1.0
        out = []
        for doc_id in doc_ids:
            slot = self.slot_of.get(doc_id)
            held = sum(w for t, w in zip(terms, weights)
                       if slot is not None and slot in self.postings.get(t, ()))
            out.append(held / total)
        return out

    def scores(self, query_tokens: Sequence[str]) -> dict[str, float]:
        """BM25 score of every document, by id."""
        dense = self.score_slots(query_tokens)
        return {doc_id: float(dense[slot]) for doc_id, slot in self.slot_of.items()}

    def top(self, query_tokens: Sequence[str], limit: int,
            accept: Callable[[str], bool] | None = None) -> list[tuple[str, float]]:
        """The ``limit`` best (id, score) with a positive score, optionally filtered."""
        dense = self.score_slots(query_tokens)
        candidates = np.flatnonzero(dense > 0)
        if accept is None and len(candidates) > limit > 0:
            # Only the best ``limit`` (and any tied with the last) need sorting.
            values = dense[candidates]
            cut = np.partition(values, len(values) - limit)[len(values) - limit]
            candidates = candidates[values >= cut]
        order = candidates[np.argsort(-dense[candidates], kind="stable")]
        out = []
        for slot in order:
            doc_id = self.slot_ids[slot]
            if accept is None or accept(doc_id):
                out.append((doc_id, float(dense[slot])))
                if len(out) >= limit:
                    break
        return out


def document_text(row: ChunkRow) -> str:
    """What BM25 indexes for a chunk: its path and label (so file and symbol names count)
    and the indexed text (contextual prefix + chunk)."""
    return f"{row.file_path}\n{row.label or ''}\n{row.index_text or row.text}"


class FullTextIndex(IncrementalIndex):
    """A BM25Index over the store's chunks, updated file by file (rows from the catalog)."""

    def __init__(self, catalog: ChunkCatalog):
        super().__init__(catalog.store)
        self.catalog = catalog
        self.bm25 = BM25Index()
        self.file_chunks: dict[int, list[str]] = {}

    def apply(self, changed: Sequence[int] | None, removed: Sequence[int]) -> None:
        if changed is None:
            self.bm25, self.file_chunks = BM25Index(), {}
        for file_id in list(removed) + list(changed or ()):
            for chunk_id in self.file_chunks.pop(file_id, ()):
                self.bm25.remove(chunk_id)
        for row in self.catalog.chunks_for_files(changed):
            self.bm25.add(row.chunk_id, code_tokens(document_text(row)))
            self.file_chunks.setdefault(row.file_id, []).append(row.chunk_id)


class FullTextProvider(ContextProvider):
    """BM25 keyword search (spec 004 §9.3), no model needed."""

    id = "full_text"
    name = "Full-text search (BM25)"
    type = ProviderType.FULL_TEXT

    def __init__(self) -> None:
        super().__init__()
        self.index: FullTextIndex | None = None

    def initialize(self, context) -> None:
        super().initialize(context)
        self.index = FullTextIndex(context.catalog)

    def warm_up(self) -> None:
        self.index.sync()

    def answers_from_memory(self, generation: int | None) -> bool:
        return (self.index is not None and self.index.is_current(generation)
                and self.context.catalog.is_current(generation))

    def query(self, query: ProviderQuery | str, scope: ContextScope, budget: TokenBudget
              ) -> list[ContextSnippet]:
        query = ProviderQuery.of(query)
        tokens = code_tokens(query.text)
        if not tokens:
            return []
        index = self.index
        scope_filter = ScopeFilter(scope)
        with index.lock:
            index.sync(query.generation)
            rows = self.context.catalog.rows
            accept = None if scope_filter.unrestricted else (
                lambda cid: (row := rows.get(cid)) is not None and scope_filter.accepts_row(row))
            hits = index.bm25.top(tokens, query.limit, accept)
            coverage = index.bm25.coverage(tokens, [cid for cid, _ in hits])
        if not hits:
            return []
        best = hits[0][1]
        rows = self.context.rows([cid for cid, _ in hits], query.generation)
        results = [snippet_from_row(rows[cid], score / best, self.id,
                                    {"bm25": round(score, 4), "bm25_coverage": round(cov, 4)})
                   for (cid, score), cov in zip(hits, coverage) if cid in rows]
        return [s for s in results if s.score >= query.min_score]

    def stats(self) -> dict[str, Any]:
        if self.index is None:
            return {}
        return {"documents": len(self.index.bm25), "terms": len(self.index.bm25.postings)}
