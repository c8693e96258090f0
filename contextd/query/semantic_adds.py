"""Semantic hits add evidence; they never push out a chunk that the lexical and symbol
providers agree on.

Reciprocal rank fusion scales every score by what a chunk ranked first by *every* provider
would get. Once the vectors exist, the semantic provider answers too: the best lexical and
symbol chunk, which the model ranks low or not at all, drops to two thirds of the score it
had, below chunks the model likes that BM25 saw only in passing. A Prometheus question about
where the write-ahead log is replayed lost ``tsdb/head.go`` from the top 5 that way, to
remote-write files and import lines. :func:`keep_lexical_floor` gives every chunk at least
the score it gets from the providers other than the semantic ones, fused and scaled among
themselves: what the ranking was before the vectors existed is a floor, and the semantic
provider can only lift chunks above it.

The floor holds only for a chunk the other providers *agree on*: one that at least
AGREEING_PROVIDERS of them rank within their first AGREEING_DEPTH. Given to every chunk, it
also held down what the vectors rightly lift in plain questions: with it (and the rare-literal
lift of code names), the hybrid's MRR@10 on three libraries' docstring questions
(``bench_retrieval.py``) fell from 0.601 to 0.543.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Iterable, Mapping, Sequence

from contextd.query.fusion import rrf_scores
from contextd.records import ContextSnippet

SEMANTIC_PROVIDERS = ("semantic",)
# A chunk keeps its floor when this many non-semantic providers rank it this high.
AGREEING_PROVIDERS = 2
AGREEING_DEPTH = 3


def keep_lexical_floor(fused: Sequence[ContextSnippet],
                       ranked: Mapping[str, Sequence[ContextSnippet]],
                       weights: Mapping[str, float], rrf_k: int,
                       semantic: Sequence[str] = SEMANTIC_PROVIDERS) -> list[ContextSnippet]:
    """``fused`` (an RRF fusion of ``ranked``) with the score of each chunk the other
    providers agree on (see the module docstring) raised to its RRF score among the providers
    not in ``semantic`` (scaled by their own best), re-sorted; unchanged when no semantic
    provider answered or no other one did."""
    others = {p: [s.chunk_id for s in items] for p, items in ranked.items()
              if p not in semantic and items}
    if not others or len(others) == sum(1 for items in ranked.values() if items):
        return list(fused)
    best = sum(weights.get(p, 1.0) / (rrf_k + 1) for p in others)
    if not best:
        return list(fused)
    floor = rrf_scores(others, weights, rrf_k)
    agreed = _agreed(others.values())
    lifted = [dataclasses.replace(s, score=min(1.0, floor[s.chunk_id] / best))
              if s.chunk_id in agreed and floor[s.chunk_id] / best > s.score else s
              for s in fused]
    return sorted(lifted, key=lambda s: (-s.score, s.file_path, s.start_line))


def _agreed(rankings: Iterable[Sequence[str]]) -> set[str]:
    """The chunk ids that at least AGREEING_PROVIDERS rankings hold in their first
    AGREEING_DEPTH."""
    counts = Counter(cid for ids in rankings for cid in dict.fromkeys(ids[:AGREEING_DEPTH]))
    return {cid for cid, count in counts.items() if count >= AGREEING_PROVIDERS}
