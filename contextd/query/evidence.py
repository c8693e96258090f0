"""Exact evidence: does a chunk hold the query's words in order, or the names it writes?

Fusion ranks by agreement between providers, which outvotes a chunk that holds a sentence
verbatim (an agent quoting a docstring or an error message it read) when its neighbours (the
class header, a sibling method) score about as well on every provider. These signals look at
the text itself, over the few dozen candidates of one query only, so they cost next to
nothing:

- **phrase coverage**: the share of the query's word trigrams (each holding a content word)
  found in the chunk's text, docstrings and string literals included, once words are
  lower-cased and punctuation and line breaks are ignored;
- **names as written**: the share of the names the query writes as code (``_parse_opts``,
  ``Client.#retryDelay``) that the chunk holds verbatim (a dotted name by its last part),
  counted only when names make up at least NAME_QUERY_SHARE of the query's words: in a
  sentence that mentions a name in passing ("Sends a PreparedRequest object") the name is
  context, and the chunks holding it are rarely the answer.

:func:`exact_evidence` combines them into one number in [0, 1]; the ranking multiplies a
candidate's score by ``1 + ranking.exact_evidence_boost × evidence``, and the confidence of
a hit (:mod:`contextd.query.calibration`) counts it as direct evidence.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Sequence

_WORD_RE = re.compile(r"[#$]?[A-Za-z0-9_]+")
_NON_WORD_RE = re.compile(r"[^a-z0-9_#$]+")
# Flattened chunk texts kept: the candidates of consecutive queries overlap a lot.
FLAT_CACHE_SIZE = 8192
# Fewer words than this are not a phrase: a two-word query is a keyword search.
PHRASE_MIN_WORDS = 4
# Names count as exact evidence when they make up at least this share of the query's words.
NAME_QUERY_SHARE = 0.3
PHRASE_SIZE = 3
# Below this coverage the trigrams met are chance ("the number of"), not a quotation.
MIN_PHRASE_COVERAGE = 0.5
# From this coverage on the chunk quotes the query: it ranks above every chunk that does not
# (a name or a neighbour's agreement between providers explains a quotation less well), and
# among quoting chunks the one quoting more (in steps of QUOTE_STEP) comes first.
QUOTE_COVERAGE = 0.8
QUOTE_STEP = 0.05
# Words that alone do not make a trigram worth matching.
_FUNCTION_WORDS = frozenset("""
a an and are as at be by for from has have if in is it its of on or that the this to was were
will with not no can may should must when which who what how where than then there these those
""".split())


def words(text: str) -> list[str]:
    """Lower-cased words of a text (``#`` and ``$`` kept as part of a name)."""
    return [w.lower() for w in _WORD_RE.findall(text)]


@functools.lru_cache(maxsize=FLAT_CACHE_SIZE)
def flat_text(text: str) -> str:
    """The text's lower-cased words joined by single spaces and framed by spaces, so a
    phrase is found with one substring test (one regex pass, cached per text)."""
    return " " + _NON_WORD_RE.sub(" ", text.lower()).strip() + " "


@dataclass(frozen=True)
class ExactQuery:
    """What exact evidence looks for in a chunk: the query's phrase trigrams (joined by
    single spaces, framed by spaces) and its names as written."""

    phrases: tuple[str, ...]
    names: tuple[str, ...]

    @classmethod
    def of(cls, query: str, names: Sequence[str]) -> "ExactQuery":
        found = flat_text(query).split()
        phrases: list[str] = []
        if len(found) >= PHRASE_MIN_WORDS:
            for i in range(len(found) - PHRASE_SIZE + 1):
                gram = found[i:i + PHRASE_SIZE]
                if any(w not in _FUNCTION_WORDS for w in gram):
                    phrases.append(" " + " ".join(gram) + " ")
        tails = [n.rsplit(".", 1)[-1] for n in names]
        if len(tails) < NAME_QUERY_SHARE * max(1, len(found)):
            tails = []
        return cls(tuple(dict.fromkeys(phrases)), tuple(dict.fromkeys(t for t in tails if t)))

    def __bool__(self) -> bool:
        return bool(self.phrases or self.names)


def phrase_coverage(query: ExactQuery, text: str) -> float:
    """The share of the query's phrase trigrams found in ``text`` (0 when it has none)."""
    if not query.phrases:
        return 0.0
    flat = flat_text(text)
    return sum(1 for gram in query.phrases if gram in flat) / len(query.phrases)


def quotation_tier(query: ExactQuery, text: str) -> int:
    """0 when ``text`` does not quote the query; else 1 + the number of QUOTE_STEPs its
    phrase coverage lies above QUOTE_COVERAGE (a higher tier quotes more of it)."""
    coverage = phrase_coverage(query, text)
    if coverage < QUOTE_COVERAGE:
        return 0
    return 1 + int((coverage - QUOTE_COVERAGE) / QUOTE_STEP + 1e-9)


# Text between quotes or backticks on one line: where an example shows a query being typed.
_QUOTED_SPAN_RE = re.compile(r'"([^"\n]{8,})"|\'([^\'\n]{8,})\'|`([^`\n]{8,})`')


def echoes_query(query: ExactQuery, text: str) -> bool:
    """Whether ``text`` holds the query itself between quotes or backticks (a README's
    ``contextd query "how does the indexer resume..."``, an example's sample input): it
    repeats the question, it does not answer it."""
    if not query.phrases or '"' not in text and "'" not in text and "`" not in text:
        return False
    return any(phrase_coverage(query, next(g for g in m.groups() if g)) >= QUOTE_COVERAGE
               for m in _QUOTED_SPAN_RE.finditer(text))


def names_present(query: ExactQuery, text: str) -> float:
    """The share of the query's names that ``text`` holds as whole words, case as written."""
    if not query.names:
        return 0.0
    found = 0
    for name in query.names:
        start = text.find(name)
        while start != -1:
            end = start + len(name)
            before = text[start - 1] if start else " "
            after = text[end] if end < len(text) else " "
            if not (before.isalnum() or before in "_$#") and not (after.isalnum() or after == "_"):
                found += 1
                break
            start = text.find(name, start + 1)
    return found / len(query.names)


def exact_evidence(query: ExactQuery, text: str) -> float:
    """One number in [0, 1]: a quotation (phrase coverage from MIN_PHRASE_COVERAGE up) or the
    names the query writes, whichever is stronger."""
    if not query:
        return 0.0
    phrase = phrase_coverage(query, text)
    phrase = phrase if phrase >= MIN_PHRASE_COVERAGE else 0.0
    return max(phrase, names_present(query, text))


def matched_lines(terms: frozenset[str], query: ExactQuery, text: str, start_line: int,
                  limit: int) -> list[int]:
    """The (at most ``limit``) line numbers of ``text`` that hold the most of the query:
    phrase trigrams count double, then query terms (lower-cased words), then names as
    written; in file order. Empty when no line holds any of it."""
    scored = []
    for offset, line in enumerate(text.split("\n")):
        found = words(line)
        if not found:
            continue
        flat = " " + " ".join(found) + " "
        score = (2 * sum(1 for gram in query.phrases if gram in flat)
                 + len(terms.intersection(found))
                 + sum(1 for name in query.names if name in line))
        if score:
            scored.append((-score, offset))
    best = sorted(scored)[:limit]
    return sorted(start_line + offset for _, offset in best)
