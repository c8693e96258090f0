"""Absolute confidence: how strongly the providers' raw evidence backs a hit.

Fused scores are relative: the best of a result set scores near 1 whether it answers the
query or is merely the least bad of nothing, so a caller could not tell a strong hit from no
match. This module reads what each provider measured, on scales that mean the same for every
query, and maps it to [0, 1]:

- ``cosine`` (semantic): the embedding similarity, mapped linearly from COSINE_FLOOR
  (unrelated text with this model) to COSINE_FLOOR + COSINE_SPAN (a close paraphrase);
- ``bm25_coverage`` (full text): the IDF-weighted share of the query's terms the chunk holds,
  a term found nowhere in the project counting at the highest IDF (so a name that does not
  exist pulls coverage down instead of dropping out);
- ``symbol_score`` (symbols): the match strength of a name found as written;
- exact evidence (:mod:`contextd.query.evidence`): the query quoted verbatim or its names present;
- ``rare_literals`` (:mod:`contextd.query.literals`): the share of the query's rare identifiers
  and quoted strings the chunk holds verbatim.

A hit's evidence is the strongest of these. The module scales the ranked list so its best hit
scores the strongest evidence among the leading candidates (:func:`calibrate`); below
``ranking.strong_match_confidence`` the answer carries a "no strong match" note.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from contextd.query.evidence import ExactQuery, exact_evidence
from contextd.query.literals import LITERAL_KEY
from contextd.records import ContextSnippet

COSINE_FLOOR = 0.2
COSINE_SPAN = 0.5
# The leading candidates whose evidence sets the scale of a result set.
EVIDENCE_DEPTH = 10
NO_MATCH_NOTE = ("no strong match: the best hit's evidence is weak (confidence {:.2f}); the "
                 "names or words asked for may not exist in this project")


def _clip(value: float) -> float:
    return min(1.0, max(0.0, value))


def hit_evidence(snippet: ContextSnippet, exact: ExactQuery | None) -> float:
    """The strongest raw evidence behind one candidate, in [0, 1]."""
    return max(exact_evidence(exact, snippet.text) if exact else 0.0,
               measured_evidence(snippet.metadata))


def measured_evidence(meta: dict) -> float:
    """The strongest evidence the providers measured for a hit (its ``metadata``: cosine,
    BM25 coverage, symbol score), in [0, 1]; 0 when none says it is related."""
    found = [0.0]
    if "cosine" in meta:
        found.append(_clip((float(meta["cosine"]) - COSINE_FLOOR) / COSINE_SPAN))
    if "bm25_coverage" in meta:
        found.append(_clip(float(meta["bm25_coverage"])))
    if "symbol_score" in meta:
        found.append(_clip(float(meta["symbol_score"])))
    if LITERAL_KEY in meta:
        found.append(_clip(float(meta[LITERAL_KEY])))
    return max(found)


def calibrate(ranked: Sequence[ContextSnippet], exact: ExactQuery | None
              ) -> tuple[list[ContextSnippet], float]:
    """(the snippets, best first, with scores scaled so the best one scores the strongest
    evidence among the first EVIDENCE_DEPTH; that confidence). Order is kept."""
    if not ranked:
        return [], 0.0
    confidence = max(hit_evidence(s, exact) for s in ranked[:EVIDENCE_DEPTH])
    top = ranked[0].score or 1.0
    scaled = [dataclasses.replace(s, score=round(min(1.0, s.score / top) * confidence, 6))
              for s in ranked]
    return scaled, confidence
