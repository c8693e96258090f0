"""Fusion, de-duplication, trimming and MMR selection of snippets.

Pure functions over :class:`~contextd.records.ContextSnippet` lists, so the hybrid provider,
the module and the tests share one implementation:

- :func:`fuse` merges the ranked lists of several providers (reciprocal rank fusion, weighted
  average of scores, or cascade) into one list with per-provider attribution;
- :func:`deduplicate` merges repeats of one chunk and overlapping line ranges of one file;
- :func:`mmr_select` picks snippets by maximal marginal relevance on embedding similarity
  until the token budget or ``k`` is reached, trimming the last one to fit when worth it.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from typing import Mapping, Sequence

import numpy as np

from contextd.records import ContextSnippet
from contextd.text.tokens import estimate_tokens

# A snippet trimmed below this many tokens says too little to be worth its header.
MIN_TRIMMED_TOKENS = 40
# MMR chooses among the POOL_FACTOR × k most relevant candidates only: diversity may reorder
# and replace strong candidates, but must not promote ones that were never relevant.
MMR_POOL_FACTOR = 2
_WORD_RE = re.compile(r"[A-Za-z0-9_]+")
# Metadata key of a hit whose provider doubts it (a factor in (0, 1]): its RRF vote is
# multiplied by it. The symbol provider sets it on definitions found only through a plain
# prose word (see contextd.providers.symbol); a hit without it votes in full.
VOTE_TRUST = "vote_trust"


class FusionStrategy(str, enum.Enum):
    """How the hybrid provider merges its sub-providers' lists (``fusion_strategy``)."""

    RRF = "rrf"
    WEIGHTED_AVERAGE = "weighted_average"
    CASCADE = "cascade"


# ----- fusion ---------------------------------------------------------------------------
def rrf_scores(rankings: Mapping[str, Sequence[str]], weights: Mapping[str, float], k: int,
               trust: Mapping[str, Sequence[float]] | None = None) -> dict[str, float]:
    """Weighted reciprocal rank fusion: ``score(c) = Σ_p w_p · t_p(c) / (k + rank_p(c))``,
    ranks from 1.

    A provider missing from ``weights`` weighs 1. ``trust`` holds, per provider and in the
    order of its ranking, how far each of its hits is believed (:data:`VOTE_TRUST`); a
    provider without it votes with full trust.
    """
    scores: dict[str, float] = {}
    for provider, ids in rankings.items():
        weight = weights.get(provider, 1.0)
        factors = (trust or {}).get(provider)
        for rank, chunk_id in enumerate(ids, start=1):
            vote = weight * (factors[rank - 1] if factors else 1.0)
            scores[chunk_id] = scores.get(chunk_id, 0.0) + vote / (k + rank)
    return scores


def _vote_trust(ranked: Mapping[str, Sequence[ContextSnippet]]) -> dict[str, list[float]]:
    """Per provider whose hits carry :data:`VOTE_TRUST`: each hit's trust, in rank order."""
    return {provider: [s.metadata.get(VOTE_TRUST, 1.0) for s in items]
            for provider, items in ranked.items()
            if any(VOTE_TRUST in s.metadata for s in items)}


def _weighted_average_scores(ranked: Mapping[str, Sequence[ContextSnippet]],
                             weights: Mapping[str, float]) -> dict[str, float]:
    total_weight = sum(weights.get(p, 1.0) for p, items in ranked.items() if items) or 1.0
    scores: dict[str, float] = {}
    for provider, items in ranked.items():
        weight = weights.get(provider, 1.0)
        for snippet in items:
            scores[snippet.chunk_id] = scores.get(snippet.chunk_id, 0.0) + weight * snippet.score
    return {cid: s / total_weight for cid, s in scores.items()}


def _cascade_scores(ranked: Mapping[str, Sequence[ContextSnippet]], order: Sequence[str]
                    ) -> dict[str, float]:
    """Everything of the first provider, then what the next ones add, in that order."""
    sequence: list[str] = []
    for provider in [p for p in order if p in ranked] + [p for p in ranked if p not in order]:
        sequence.extend(s.chunk_id for s in ranked[provider] if s.chunk_id not in sequence)
    n = len(sequence)
    return {cid: 1.0 - i / n for i, cid in enumerate(sequence)}


def fuse(ranked: Mapping[str, Sequence[ContextSnippet]], weights: Mapping[str, float],
         strategy: FusionStrategy = FusionStrategy.RRF, rrf_k: int = 60,
         order: Sequence[str] = (), limit: int | None = None) -> list[ContextSnippet]:
    """One ranked list from several providers' lists (each best first), at most ``limit``.

    Scores are rescaled into [0, 1] (RRF: divided by the score of a chunk ranked first by
    every provider that answered, each vote times the hit's :data:`VOTE_TRUST`). Each result names every provider that returned it and
    keeps their ranks in ``metadata["provider_ranks"]``. Only the results kept are built
    (a query fuses a few hundred candidates and keeps ~50).
    """
    if strategy is FusionStrategy.RRF:
        rankings = {p: [s.chunk_id for s in items] for p, items in ranked.items()}
        scores = rrf_scores(rankings, weights, rrf_k, _vote_trust(ranked))
        # The scale stays that of full trust: a doubted hit ranked first everywhere is
        # below 1, so its doubt survives into the final score.
        best = sum(weights.get(p, 1.0) / (rrf_k + 1) for p, items in ranked.items() if items)
        scores = {cid: s / best for cid, s in scores.items()} if best else scores
    elif strategy is FusionStrategy.WEIGHTED_AVERAGE:
        scores = _weighted_average_scores(ranked, weights)
    else:
        scores = _cascade_scores(ranked, order)
    merged = sorted(_merge_attribution(ranked).items(),
                    key=lambda item: (-min(1.0, scores[item[0]]), item[1][0].file_path,
                                      item[1][0].start_line))
    return [dataclasses.replace(snippet, score=min(1.0, scores[cid]), providers=providers,
                                metadata=meta)
            for cid, (snippet, providers, meta) in merged[:limit]]


def _merge_attribution(ranked: Mapping[str, Sequence[ContextSnippet]]
                       ) -> dict[str, tuple[ContextSnippet, tuple[str, ...], dict]]:
    """Per chunk id: its first snippet, the union of providers, and merged metadata with
    every provider's rank."""
    merged: dict[str, tuple[ContextSnippet, list[str], dict]] = {}
    for provider, items in ranked.items():
        for rank, snippet in enumerate(items, start=1):
            entry = merged.get(snippet.chunk_id)
            if entry is None:
                entry = merged[snippet.chunk_id] = (snippet, [], {"provider_ranks": {}})
            first, providers, meta = entry
            providers.extend(p for p in (snippet.providers or (provider,)) if p not in providers)
            for key, value in snippet.metadata.items():
                meta.setdefault(key, value)
            meta["provider_ranks"][provider] = rank
    return {cid: (first, tuple(providers), meta)
            for cid, (first, providers, meta) in merged.items()}


# ----- de-duplication --------------------------------------------------------------------
def deduplicate(snippets: Sequence[ContextSnippet]) -> list[ContextSnippet]:
    """Merge repeats: the same chunk, or line ranges of one file that overlap.

    The higher-scored snippet stays (input order breaks ties) and takes over the providers of
    the ones merged into it; their chunk ids are listed in ``metadata["merged"]``.
    """
    kept: list[ContextSnippet] = []
    by_file: dict[str, list[int]] = {}
    for snippet in sorted(snippets, key=lambda s: -s.score):
        target = None
        for index in by_file.get(snippet.file_path, ()):
            other = kept[index]
            if other.chunk_id == snippet.chunk_id or (
                    snippet.start_line <= other.end_line and other.start_line <= snippet.end_line):
                target = index
                break
        if target is None:
            by_file.setdefault(snippet.file_path, []).append(len(kept))
            kept.append(snippet)
            continue
        other = kept[target]
        merged_ids = list(other.metadata.get("merged", ()))
        if snippet.chunk_id != other.chunk_id:
            merged_ids.append(snippet.chunk_id)
        kept[target] = dataclasses.replace(
            other, providers=tuple(dict.fromkeys(other.providers + snippet.providers)),
            metadata={**snippet.metadata, **other.metadata, "merged": merged_ids}
            if merged_ids else {**snippet.metadata, **other.metadata})
    return kept


# ----- trimming --------------------------------------------------------------------------
def trim_snippet(snippet: ContextSnippet, max_tokens: int) -> ContextSnippet | None:
    """The snippet cut to whole lines from its end so it costs at most ``max_tokens``;
    None when even its first line does not fit. A Markdown code block the cut leaves open
    is closed (its fence counted in the budget): an unclosed fence turns the rest of a
    prompt, the block's closing tag included, into code."""
    if snippet.tokens <= max_tokens:
        return snippet
    markdown = snippet.language in FENCED_LANGUAGES
    kept: list[str] = []
    used = 0
    fence = ""  # the opening fence the kept lines leave open
    for line in snippet.text.split("\n"):
        after = _fence_after(fence, line) if markdown else ""
        cost = estimate_tokens(line + "\n")
        closing = estimate_tokens(after + "\n") if after else 0
        if used + cost + closing > max_tokens:
            break
        kept.append(line)
        used += cost
        fence = after
    if not kept:
        return None
    end_line = snippet.start_line + len(kept) - 1
    if fence:
        kept.append(fence)
    text = "\n".join(kept)
    return dataclasses.replace(
        snippet, text=text, end_line=end_line,
        tokens=min(max_tokens, estimate_tokens(text)),
        metadata={**snippet.metadata, "truncated": True})


# Languages whose text holds fenced code blocks (``` or ~~~ lines).
FENCED_LANGUAGES = frozenset({"markdown", "mdx"})
_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def _fence_after(open_fence: str, line: str) -> str:
    """The fence left open after ``line``, given the one open before it ("" for none): a
    fence line opens a block, or closes the open one when it is of the same character and
    at least as long (CommonMark)."""
    match = _FENCE_RE.match(line)
    if not match:
        return open_fence
    marker = match.group(1)
    if not open_fence:
        return marker
    closes = marker[0] == open_fence[0] and len(marker) >= len(open_fence) \
        and not line.strip()[len(marker):].strip()
    return "" if closes else open_fence


# ----- MMR -------------------------------------------------------------------------------
def token_set(text: str) -> frozenset[str]:
    """Lower-cased words of a text: the fallback similarity when a chunk has no vector."""
    return frozenset(w.lower() for w in _WORD_RE.findall(text))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """|a ∩ b| / |a ∪ b| (0 for two empty sets)."""
    union = len(a | b)
    return len(a & b) / union if union else 0.0


@dataclasses.dataclass
class Selection:
    """What :func:`mmr_select` chose, and whether it had to fall back to word overlap."""

    snippets: list[ContextSnippet]
    total_tokens: int
    used_word_overlap: bool = False


def _similarity_matrix(candidates: Sequence[ContextSnippet],
                       vectors: Mapping[str, np.ndarray]) -> tuple[np.ndarray, bool]:
    """Pairwise similarities: cosine of embeddings, Jaccard of words where one is missing."""
    n = len(candidates)
    have = [c.chunk_id in vectors for c in candidates]
    sims = np.zeros((n, n), dtype=np.float32)
    if any(have):
        dim = len(next(iter(vectors.values())))
        mat = np.stack([vectors[c.chunk_id] if h else np.zeros(dim, dtype=np.float32)
                        for c, h in zip(candidates, have)])
        sims = mat @ mat.T
    missing = [i for i, h in enumerate(have) if not h]
    if missing:
        words = [token_set(c.text) for c in candidates]
        for i in missing:
            for j in range(n):
                sims[i, j] = sims[j, i] = jaccard(words[i], words[j])
    return sims, bool(missing)


def mmr_select(candidates: Sequence[ContextSnippet], vectors: Mapping[str, np.ndarray],
               lambda_: float, max_tokens: int, k: int, rerank: bool = True) -> Selection:
    """Greedy maximal marginal relevance under a token budget.

    ``mmr = λ·relevance − (1 − λ)·max similarity to what is already selected``, relevance
    being the score divided by the best score, among the MMR_POOL_FACTOR × k best candidates.
    A candidate that does not fit the remaining
    budget is trimmed when at least MIN_TRIMMED_TOKENS remain, else skipped (a smaller one may
    still fit). With ``rerank`` False the order is plain relevance (same budget rules).
    """
    pool = sorted((c for c in candidates if c.tokens > 0 or c.text), key=lambda c: -c.score)
    pool = pool[:max(k * MMR_POOL_FACTOR, k)] if rerank else pool
    if not pool or k <= 0 or max_tokens <= 0:
        return Selection([], 0)
    sims, fallback = _similarity_matrix(pool, vectors) if rerank else (None, False)
    top = max(c.score for c in pool) or 1.0
    relevance = np.array([c.score / top for c in pool], dtype=np.float32)
    max_sim = np.full(len(pool), -np.inf if rerank else 0.0, dtype=np.float32)
    remaining = np.ones(len(pool), dtype=bool)
    chosen: list[ContextSnippet] = []
    used = 0
    while remaining.any() and len(chosen) < k and max_tokens - used > 0:
        if rerank and chosen:
            mmr = lambda_ * relevance - (1 - lambda_) * max_sim
        else:
            mmr = relevance.copy()
        mmr[~remaining] = -np.inf
        best = int(np.argmax(mmr))
        remaining[best] = False
        snippet = pool[best]
        room = max_tokens - used
        if snippet.tokens > room:
            snippet = trim_snippet(snippet, room) if room >= MIN_TRIMMED_TOKENS else None
            if snippet is None:
                continue
        chosen.append(snippet)
        used += snippet.tokens
        if rerank:
            max_sim = np.maximum(max_sim, sims[best])
    return Selection(chosen, used, fallback)
