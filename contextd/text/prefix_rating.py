"""How well a contextual prefix speaks of its chunk: the key terms it mentions and the generic
phrases it avoids (issue 30's quality score, reported by get_contextual_retrieval_stats).

It lives below the stores because a structural prefix is rated when the report asks, not
while indexing (issue 37: "nothing computed on the index path that only an LLM prefix
needs"; the rating was 1.2-1.9 CPU s of prometheus's bootstrap). The stores keep such a
prefix's quality NULL and rate it from the stored chunk: its text, its index text (the
prefix, a blank line, the text) and the names it defines. An LLM's prefix is rated when it
is written (its checks decide whether it is kept) and stored with its score.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Sequence

# Between a prefix and its chunk's text in the index text.
PREFIX_SEPARATOR = "\n\n"
# Openings that say nothing about this chunk.
GENERIC_PHRASES = (
    "this section discusses", "this section describes", "this chunk", "this code snippet",
    "this snippet", "the following code", "this text", "this passage", "in this section",
    "as an ai", "here is", "sure,", "certainly",
)
# Identifiers this short or this common are not key terms of a chunk.
MIN_KEY_TERM_LENGTH = 4
KEY_TERMS_PER_CHUNK = 8
_COMMON_WORDS = frozenset(
    "self this that return none true false null undefined const function class import from "
    "export def async await elif else with pass raise while public private static string "
    "void int bool char type interface value values default args kwargs param params".split())
# Identifiers long enough to be key terms, the shorter ones never matched: the same long
# identifiers, in the same order, as matching every identifier and dropping the short ones.
_KEY_TERM_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{%d,}" % (MIN_KEY_TERM_LENGTH - 1))


def key_terms_of(defined: Sequence[str], text: str) -> list[str]:
    """The terms a good prefix should mention: the names the chunk defines (``defined``,
    qualified or not, in the chunker's order), then its most frequent distinctive
    identifiers."""
    ranked = [name.rsplit(".", 1)[-1] for name in defined]
    names = set(ranked)
    if len(ranked) >= KEY_TERMS_PER_CHUNK:
        return ranked[:KEY_TERMS_PER_CHUNK]
    # Every long identifier counted in C first, then the distinct ones taken in rank order
    # until enough pass the filter: filtering each occurrence in Python was half the
    # contextualizer's time (issue 37). Same ranking: counts descending, first occurrence
    # first.
    for word, _ in Counter(_KEY_TERM_RE.findall(text)).most_common():
        if word not in names and word.lower() not in _COMMON_WORDS:
            ranked.append(word)
            if len(ranked) == KEY_TERMS_PER_CHUNK:
                break
    return ranked


def terms_and_phrase(prefix: str, terms: Sequence[str]) -> tuple[int, str]:
    """How many of ``terms`` the prefix mentions, and the first generic phrase it holds
    ("" for none)."""
    lowered = prefix.lower()
    mentioned = sum(1 for t in terms if t.lower() in lowered)
    return mentioned, next((p for p in GENERIC_PHRASES if p in lowered), "")


def share_point(share: float, min_key_term_share: float) -> float:
    """The key-term check's point: the share mentioned, against the share wanted."""
    return min(1.0, share / max(min_key_term_share, 1e-9))


def structural_quality(prefix: str, defined: Sequence[str], text: str,
                       min_key_term_share: float) -> float:
    """The quality score (0-1) of a structural prefix: built, not written, and short by
    design, so its length is not held against it; it is rated on the key terms it mentions
    and on holding no generic phrase."""
    terms = key_terms_of(defined, text)
    mentioned, generic = terms_and_phrase(prefix, terms)
    share = mentioned / len(terms) if terms else 1.0
    return round((share_point(share, min_key_term_share) + float(not generic)) / 2, 4)


def prefix_of(index_text: str, text: str) -> str:
    """The prefix a stored index text carries before the separator and the chunk's text."""
    return index_text[:len(index_text) - len(text) - len(PREFIX_SEPARATOR)]
