"""The share of a change request's keywords that a code file's own name and folder spell,
added to its chunks' scores (semble's file-stem boost, on top of the path factor).

The path factor (:mod:`contextd.query.path_words`) *multiplies* a chunk's fused score, so a
file whose name the message spells but whose text uses only common words stays behind:
"Support partial document forms" names ``documents/forms.py``, yet its chunk fused at 0.23
and a factor of 1.4 could not lift it over chunks at 0.37. semble *adds* instead: the best
score times a weight times the share of the query's keywords that the file's stem and its
folder's name match, so a file the message is about rises wherever the providers put it.
Measured with the path factor kept (benchmarks/scale/results_issue36.md, eighth pass).

Only the stem and the folder count (not the whole path: the package name would match every
file), and a keyword matches a name part when one is a prefix of the other of three letters
or more (``document`` and ``documents``, ``serializ`` and ``serializers``); a share under
:data:`MIN_SHARE` counts nothing, as one stray word of a long message locates nothing.
"""

from __future__ import annotations

import functools
import re
from pathlib import PurePosixPath

from contextd.query.path_words import PART_RE
from contextd.text.stop_words import STOP_WORDS

# A share of the query's keywords below this is chance, not the file the message names.
MIN_SHARE = 0.1
# Keywords and name parts this long or longer are compared (shorter ones match too much).
MIN_LENGTH = 3
_WORD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def query_keywords(query: str) -> frozenset[str]:
    """The query's keywords: its words of MIN_LENGTH letters or more, lower-cased, stop
    words out (an identifier counts whole: ``get_api_representation``)."""
    return frozenset(w.lower() for w in _WORD_RE.findall(query)
                     if len(w) >= MIN_LENGTH and w.lower() not in STOP_WORDS)


def stem_share(keywords: frozenset[str], path: str) -> float:
    """The share of ``keywords`` that the file's stem and its folder's name spell (0 under
    MIN_SHARE): ``redirects/api.py`` spells 2 of "allow anonymous reads on v3 redirects
    endpoints"' keywords."""
    if not keywords:
        return 0.0
    parts = _name_parts(path)
    found = sum(1 for k in keywords if any(_prefix_match(k, p) for p in parts))
    share = found / len(keywords)
    return share if share >= MIN_SHARE else 0.0


def _prefix_match(keyword: str, part: str) -> bool:
    if keyword == part:
        return True
    short, long_ = (keyword, part) if len(keyword) <= len(part) else (part, keyword)
    return len(short) >= MIN_LENGTH and long_.startswith(short)


@functools.lru_cache(maxsize=16_384)
def _name_parts(path: str) -> frozenset[str]:
    """The lower-cased word parts of a path's file stem and of its folder's name."""
    p = PurePosixPath(path)
    return frozenset(w.lower() for name in (p.stem, p.parent.name) if name
                     for w in PART_RE.findall(name))
