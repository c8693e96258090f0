"""How stashed segments are ranked: the maths, free of storage and models.

``score = w_sim * similarity + w_age * exp(-age / age_decay) + w_rec * exp(-since_stash /
recency_decay)`` with ages in fractional days (the seed counts whole days; a segment from
23 hours ago is not "today's" in the same way as one from a minute ago). A segment reached
from a hit through ``h`` references scores ``hit score * reference_decay ** h``: it is there
because of the hit, so it never outranks it. All weights come from ``[stash]``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np

SECONDS_PER_DAY = 86_400.0


@dataclass(frozen=True)
class Weights:
    """The ranking constants of one retrieval."""

    similarity: float = 0.6
    age: float = 0.2
    recency: float = 0.2
    age_decay_days: float = 30.0
    recency_decay_days: float = 7.0
    reference_decay: float = 0.5

    @classmethod
    def from_config(cls, stash_config) -> "Weights":
        """The weights of a ``[stash]`` section."""
        return cls(stash_config.similarity_weight, stash_config.age_weight,
                   stash_config.recency_weight, stash_config.age_decay_days,
                   stash_config.recency_decay_days, stash_config.reference_decay)


def decay(age_seconds, decay_days: float):
    """``exp(-age / decay)`` for an age in seconds (scalar or array); a future time counts
    as age 0, so a clock skew never scores above 1."""
    return np.exp(-np.maximum(age_seconds, 0.0) / (decay_days * SECONDS_PER_DAY))


def score_parts(similarity, created_s, stashed_s, now_s: float, weights: Weights):
    """(age part, recency part, combined score) for similarities and epoch-second times
    (scalars or arrays of one length)."""
    age = decay(now_s - created_s, weights.age_decay_days)
    recency = decay(now_s - stashed_s, weights.recency_decay_days)
    combined = (weights.similarity * similarity + weights.age * age
                + weights.recency * recency)
    return age, recency, combined


def follow_references(start: Sequence[str], references: Callable[[str], Sequence[str]],
                      max_hops: int) -> dict[str, tuple[int, str]]:
    """Segments reachable from ``start`` through references, breadth first, at most
    ``max_hops`` away: id -> (hops, the start segment it was reached from). Start segments
    themselves are left out; the nearest path wins, ties go to the earlier start."""
    found: dict[str, tuple[int, str]] = {}
    seen = set(start)
    queue = deque((sid, 0, sid) for sid in start)
    while queue:
        current, hops, origin = queue.popleft()
        if hops >= max_hops:
            continue
        for ref in references(current):
            if ref in seen:
                continue
            seen.add(ref)
            found[ref] = (hops + 1, origin)
            queue.append((ref, hops + 1, origin))
    return found


def collapse_duplicates(order: Sequence[str], text_hashes: Mapping[str, str],
                        vectors: Mapping[str, np.ndarray], threshold: float
                        ) -> list[tuple[str, list[str]]]:
    """Walk ids best first; an id whose text equals a kept one, or whose vector is at least
    ``threshold`` similar to a kept one's, is collapsed into it. Returns (kept id, ids
    collapsed into it), best first."""
    kept: list[tuple[str, list[str]]] = []
    by_hash: dict[str, int] = {}
    kept_vectors: list[np.ndarray] = []
    for sid in order:
        index = by_hash.get(text_hashes[sid])
        vector = vectors[sid]
        if index is None and kept_vectors:
            similar = np.stack(kept_vectors) @ vector
            best = int(np.argmax(similar))
            if similar[best] >= threshold:
                index = best
        if index is not None:
            kept[index][1].append(sid)
            continue
        by_hash[text_hashes[sid]] = len(kept)
        kept.append((sid, []))
        kept_vectors.append(vector)
    return kept
