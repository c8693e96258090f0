"""The light suffix stemmer shared by the full-text index and the ranking.

Its own module so that query understanding (imported by the light ``query_api`` records)
can stem the way the BM25 index does without importing the providers.
"""

from __future__ import annotations

# Suffixes removed by the light stemmer, longest first; "ies" becomes "y".
_SUFFIXES = ("ing", "ed", "es", "s")
_MIN_STEM = 3


def light_stem(word: str) -> str:
    """A tiny, predictable stemmer: tokens/token, validated/validate, caches/cache meet."""
    if word.endswith("ies") and len(word) > _MIN_STEM + 2:
        return word[:-3] + "y"
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= _MIN_STEM:
            if suffix == "s" and word.endswith("ss"):
                break
            word = word[:-len(suffix)]
            break
    if word.endswith("e") and len(word) > _MIN_STEM:
        word = word[:-1]
    return word
