"""One chunk per file first: the default answer covers several files when several match.

A ranking of chunks often holds five chunks of one file at its head (8 of 32 written
questions did): each is relevant, yet the agent gets no second file to look at, and the
second file is where a change request's other half or a question's caller lives. A file's
chunks after its best ``[ranking] chunks_kept_per_file`` (3) step back by a factor per chunk
already taken (``further_chunk_factor``): another file's best chunk then comes before them
unless they are much stronger, and they still follow when nothing else matches. The best
three keep their place: a question's answer is often a file's second or third chunk, close
behind its first (the golden repository's ``calculate_total`` behind the ``Order`` class it
belongs to, ``connect_with_retry`` behind ``ConnectionPool``), and stepping it back behind a
weak match of another file lost it. Only the order of an answer
changes: the scores shown are the chunks' own.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from contextd.records import ContextSnippet


def spread_over_files(snippets: Sequence[ContextSnippet], kept: int, factor: float
                      ) -> list[ContextSnippet]:
    """The snippets, best first, each file's n-th one (n from 0) scored
    ``factor ** (n + 1 - kept)`` times its own score once n reaches ``kept``, re-sorted;
    ``factor`` 1 leaves the order as it is."""
    if factor >= 1.0:
        return list(snippets)
    taken: dict[str, int] = {}
    spread = []
    for snippet in sorted(snippets, key=lambda s: -s.score):
        n = taken.get(snippet.file_path, 0)
        taken[snippet.file_path] = n + 1
        steps = max(0, n + 1 - kept)
        spread.append(dataclasses.replace(snippet, score=snippet.score * factor ** steps))
    return sorted(spread, key=lambda s: -s.score)


def own_scores(chosen: Sequence[ContextSnippet], pool: Sequence[ContextSnippet]
               ) -> list[ContextSnippet]:
    """``chosen`` in its order, each with the score it has in ``pool`` (its own, before
    :func:`spread_over_files` lowered it for the order)."""
    scores = {s.chunk_id: s.score for s in pool}
    return [dataclasses.replace(s, score=scores.get(s.chunk_id, s.score)) for s in chosen]
