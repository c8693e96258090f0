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
_PART_RE = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+\d*|\d+")


@functools.lru_cache(maxsize=65_536)
def path_stems(path: str) -> tuple[str, ...]:
    """The stemmed words of a path's folders and file name, extension and stop words left
    out (``users/views/apiTokens.py`` -> users, view, api, token; ``copy_for_translation``
    -> copy, translation)."""
    stem = path.rsplit(".", 1)[0] if "." in path.rsplit("/", 1)[-1] else path
    words = (w.lower() for w in _PART_RE.findall(stem))
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
        words = [w for w in path_stems(path) if w not in self.common]
        if not words:
            return 0.0
        return sum(1 for w in words if w in query_stems) / len(words)

    def evidence(self, path: str, query_stems: frozenset[str]) -> float:
        """:meth:`share`, times the share of the query's words the path spells over
        QUERY_SHARE, at most 1 (see the module docstring)."""
        share = self.share(path, query_stems)
        if not share:
            return 0.0
        found = sum(1 for w in path_stems(path) if w not in self.common and w in query_stems)
        return share * min(1.0, found / max(1.0, QUERY_SHARE * len(query_stems)))


def area_share(path: str, area_stems: frozenset[str]) -> float:
    """The share of a title's area words (:func:`contextd.query.intent.title_area`, stemmed)
    that ``path`` spells, common words included: ``tsdb`` names the part of prometheus a
    change is in even though a tenth of its files are there."""
    if not area_stems:
        return 0.0
    words = set(path_stems(path))
    return sum(1 for w in area_stems if w in words) / len(area_stems)
