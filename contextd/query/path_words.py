"""The words of a file's path that a query writes: "Add filters and ordering to the redirects
API" names ``contrib/redirects/api.py`` as plainly as any identifier would.

A change request or a question names the part of the project it is about in the project's
own words, and projects are laid out by those words (``documents/forms.py``,
``users/views/apitokens.py``). A chunk's text may not repeat them: the form class in
``documents/forms.py`` need not say "document" in the lines BM25 sees, while a chunk of an
unrelated file that mentions forms and documents in passing does.

Only a path's *distinctive* words count: a word found in the paths of more than
:data:`COMMON_SHARE` of the project's files (the package name, ``src``, ``tests``) locates
nothing, unless those are :data:`MIN_COMMON_FILES` files or fewer: in a small project a topic
that spans its layers (``orders.py``, ``orders.ts``, ``orders.md``, the orders migration) still
locates its code. The share of a path's distinctive words that the query writes is what the ranking
reads (:func:`contextd.query.understanding.boost_factor`), so a short path fully named beats
a deep one that shares a single word with the query.

That share is tempered by how much of the *query* the path accounts for
(:meth:`PathWords.evidence`): in a long commit message one word among fifty, taken from a
library's dotted name (``botocore.exceptions.BotoCoreError``), spelt the whole of
``core/exceptions.py`` and lifted it over the file that changed (saleor). A path's words
count fully once they are QUERY_SHARE of the query's words or more (semble, the peer, boosts a
file stem by the share of the query's keywords it matches, from 10%).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import re
from typing import Iterable

from contextd.text.stemming import light_stem
from contextd.text.stop_words import STOP_WORDS

# A word in the paths of more than this share of the files is not distinctive.
COMMON_SHARE = 0.1
MIN_COMMON_FILES = 5
MIN_WORD_LENGTH = 2
# The share of a query's words that a path's words must make up to count fully.
QUERY_SHARE = 0.1
# Path parts split at case changes, keeping a version suffix with its word (v3, oauth2).
PART_RE = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+\d*|\d+")


@functools.lru_cache(maxsize=65_536)
def path_stems(path: str) -> tuple[str, ...]:
    """The stemmed words of a path's folders and file name, extension and stop words left
    out (``users/views/apiTokens.py`` -> users, view, api, token; ``copy_for_translation``
    -> copy, translation)."""
    stem = path.rsplit(".", 1)[0] if "." in path.rsplit("/", 1)[-1] else path
    words = (w.lower() for w in PART_RE.findall(stem))
    return tuple(dict.fromkeys(light_stem(w) for w in words if len(w) >= MIN_WORD_LENGTH
                               and not w.isdigit() and w not in STOP_WORDS))


class PathWords:
    """The distinctive path words of a project's files."""

    def __init__(self, paths: Iterable[str]):
        counts: collections.Counter[str] = collections.Counter()
        total = 0
        for path in paths:
            counts.update(path_stems(path))
            total += 1
        limit = max(MIN_COMMON_FILES, COMMON_SHARE * total)
        self.common = frozenset(w for w, n in counts.items() if n > limit)

    def share(self, path: str, query_stems: frozenset[str]) -> float:
        """The share of ``path``'s distinctive words that are among the query's word stems
        (:attr:`contextd.query.understanding.UnderstoodQuery.word_stems`)."""
        return self._counts(path, query_stems)[0]

    def evidence(self, path: str, query_stems: frozenset[str]) -> float:
        """:meth:`share`, times the share of the query's words the path spells over
        QUERY_SHARE, at most 1 (see the module docstring)."""
        share, found = self._counts(path, query_stems)
        return share * min(1.0, found / max(1.0, QUERY_SHARE * len(query_stems)))

    def _counts(self, path: str, query_stems: frozenset[str]) -> tuple[float, int]:
        """(the share of the path's distinctive words the query writes, how many it writes),
        from one walk of the path's stems."""
        words = [w for w in path_stems(path) if w not in self.common]
        if not words:
            return 0.0, 0
        found = sum(1 for w in words if w in query_stems)
        return found / len(words), found


def area_share(path: str, area_stems: frozenset[str]) -> float:
    """The share of a title's area words (:func:`contextd.query.intent.title_area`, stemmed)
    that ``path`` spells, common words included: ``tsdb`` names the part of prometheus a
    change is in even though a tenth of its files are there."""
    if not area_stems:
        return 0.0
    words = set(path_stems(path))
    return sum(1 for w in area_stems if w in words) / len(area_stems)


@dataclasses.dataclass(frozen=True)
class PathFactor:
    """The factor a code file's path gives its score for one query: its path words
    (:meth:`PathWords.evidence`, times ``[ranking] path_words_boost``) and the area its title
    names before a colon (:func:`area_share`, times ``area_path_boost``).

    One function for the index's ranking (:func:`contextd.query.understanding.boost_factor`)
    and the scan of the files not indexed yet (:mod:`contextd.query.unread_scan`), so that a
    first answer ranks a scanned file as the complete index would rank it. ``words``: the
    project's path words (None: no path word counts, as when no file list is at hand)."""

    words: PathWords | None
    word_stems: frozenset[str]
    area_stems: frozenset[str] = frozenset()
    words_boost: float = 0.0
    area_boost: float = 0.0

    def __call__(self, path: str) -> float:
        return self.boosted(*self.evidence(path))

    def boosted(self, words: float, area: float) -> float:
        """The factor of a path whose :meth:`evidence` is (``words``, ``area``)."""
        return (1 + self.words_boost * words) * (1 + self.area_boost * area)

    def evidence(self, path: str) -> tuple[float, float]:
        """(the path words' evidence, the share of the title's area the path spells), the
        factor's two parts before their boosts."""
        words = self.words.evidence(path, self.word_stems) if self.words is not None else 0.0
        return words, area_share(path, self.area_stems)
