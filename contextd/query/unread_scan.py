"""The files not read yet, searched as text: no file is missed only because it is not indexed.

A first command reads a large project for a second or two and answers from what it read;
the background owner reads the rest. On a 2,059-file project the first answer came from 186
files and said "no strong match" for a question whose file it had not read yet. So while
files wait to be indexed (the bootstrap's pending list), an answer also scans their bytes
the way ripgrep would: a case-insensitive substring test per query word over each file
(reading and testing runs at tens of thousands of files per second, far faster than
chunking; source code first, as the bootstrap reads), then, in the few files that hold any, the window of WINDOW_LINES lines holding
the most of the query, as a snippet fused with the indexed candidates.

Words weigh by their rarity among the files scanned (a word in every file tells none apart),
so a file holding the query's rare words ranks first; a file's *coverage* is the weighted
share of the query's words its best window holds. The scan stops at SCAN_BUDGET_S; the answer
says how many files it searched.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import time
from pathlib import Path
from typing import Callable, Sequence

from contextd.chunkers.chunking import language_for
from contextd.query.evidence import words
from contextd.records import ChunkKind, ContextSnippet
from contextd.text.stop_words import STOP_WORDS
from contextd.text.tokens import estimate_tokens

PROVIDER_ID = "text_scan"
# Lines of a snippet cut around the best place of a file.
WINDOW_LINES = 12
# Words shorter than this match inside too many others to be searched as substrings.
MIN_WORD_LENGTH = 3
# How long one answer may spend scanning files not read yet (12,000 small files take 0.3 s on
# a quiet 2-core machine, 1.1-2.2 s at load 12).
SCAN_BUDGET_S = 1.5
# Files kept from a scan (the best by coverage) and the least coverage worth showing.
SCAN_KEEP = 20
MIN_COVERAGE = 0.5
# Files larger than this are not scanned (the boundary's size limit applies before).
MAX_SCAN_BYTES = 2_000_000
# A window's score against the indexed hits': a window holding the whole query stands at this
# share of the best indexed hit. Substring counts are cruder evidence than BM25 over chunks:
# on fastapi, whose first window reads its source, scanned windows of its 2,000 translated
# docs at full weight pushed the code out of the first five.
SCAN_WEIGHT = 0.6
# Scanned first: source code, then docs, tests and configuration (the bootstrap's order, told
# by the name alone: the roles' own rules cost 2.9 s for 12,000 paths), so what the budget
# reaches is what answers most questions.
_DOC_SUFFIXES = frozenset({".md", ".mdx", ".rst", ".txt", ".adoc"})
_CONFIG_SUFFIXES = frozenset({".json", ".yaml", ".yml", ".toml", ".ini", ".cfg", ".xml"})
# Words of a path (folders and file name) at least this long count as spelling a query word.
PATH_WORD_LENGTH = 4
_PATH_WORD_RE = re.compile(r"[a-z0-9]+")
SCANNED_NOTE = ("{searched:,} of the {pending:,} files not indexed yet were searched as text "
                "for this answer{found}")


@dataclasses.dataclass
class Scan:
    """What a scan found (snippets, best first) and how far it got."""

    snippets: list[ContextSnippet]
    searched: int
    pending: int

    def note(self) -> str | None:
        if not self.pending:
            return None
        found = f" ({len(self.snippets)} matched)" if self.snippets else " (none matched)"
        return SCANNED_NOTE.format(searched=self.searched, pending=self.pending, found=found)


def scan_words(query: str) -> list[str]:
    """The lower-cased words of a query worth searching for as substrings."""
    return list(dict.fromkeys(w for w in words(query)
                              if len(w) >= MIN_WORD_LENGTH and w not in STOP_WORDS))


def scan_unread(root: Path, paths: Sequence[str], query: str,
                scrub: Callable[[str, str], str], budget_s: float = SCAN_BUDGET_S) -> Scan:
    """Search the files ``paths`` (root-relative, not indexed yet) for the query's words;
    ``scrub(text, path)`` redacts a snippet's secrets as indexing would."""
    terms = scan_words(query)
    if not terms or not paths:
        return Scan([], 0, len(paths))
    needles = [t.encode() for t in terms]
    deadline = time.monotonic() + budget_s
    held: dict[str, tuple[bytes, frozenset[int]]] = {}
    searched = 0
    base = str(root) + os.sep
    for path in sorted(paths, key=lambda p: _scan_order(p, terms)):
        if searched % 64 == 0 and time.monotonic() > deadline:
            break
        searched += 1
        try:
            # Plain open() and read(): a Path, or read(n) with its n-byte buffer, cost as much
            # as the reading (the boundary has already left out files over its size limit).
            with open(base + path, "rb") as handle:
                data = handle.read()
        except OSError:
            continue
        if len(data) > MAX_SCAN_BYTES:
            continue
        lower = data.lower()
        found = frozenset(i for i, needle in enumerate(needles) if needle in lower)
        if found:
            held[path] = (data, found)
    weights = [math.log(1 + searched / (1 + sum(1 for _, f in held.values() if i in f)))
               for i in range(len(terms))]
    total = sum(weights) or 1.0
    best = []
    for path, (data, found) in held.items():
        if sum(weights[i] for i in found) / total < MIN_COVERAGE:
            continue  # the whole file holds too little of the query: no window holds more
        window = _best_window(data, terms, weights)
        if window is not None and window[0] / total >= MIN_COVERAGE:
            best.append((window[0] / total, path, window[1], window[2]))
    # Equal coverage (a question's words are in many translated pages alike): source code,
    # and a path spelling the query, first.
    best.sort(key=lambda item: (-round(item[0], 2), _scan_order(item[1], terms), item[1]))
    snippets = [_snippet(path, coverage, start, lines, scrub)
                for coverage, path, start, lines in best[:SCAN_KEEP]]
    return Scan(snippets, searched, len(paths))


def _scan_order(path: str, terms: Sequence[str]) -> tuple[int, int]:
    """(0 source code, 1 docs, 2 tests, 3 configuration (see _DOC_SUFFIXES); 0 when the
    path spells a query word, else 1): within each kind, the files whose path spells a word
    of the query first (``fastapi/exception_handlers.py`` for "HTTPException"), since the
    budget may end before the kind's last file (fastapi's 1,000 example modules under
    ``docs_src/`` sort before its package)."""
    lowered = path.lower()
    suffix = lowered[lowered.rfind("."):] if "." in lowered[lowered.rfind("/") + 1:] else ""
    if suffix in _DOC_SUFFIXES:
        kind = 1
    elif "test" in lowered:
        kind = 2
    else:
        kind = 3 if suffix in _CONFIG_SUFFIXES else 0
    parts = [p for p in _PATH_WORD_RE.findall(lowered) if len(p) >= PATH_WORD_LENGTH]
    spelled = any(p in t or t in p for p in parts for t in terms if len(t) >= PATH_WORD_LENGTH)
    return kind, 0 if spelled else 1


def _best_window(data: bytes, terms: list[str], weights: list[float]
                 ) -> tuple[float, int, list[str]] | None:
    """(weight held, first line number, lines) of the WINDOW_LINES-line window of a file
    holding the most weight of the query's words; None when the file is not text."""
    try:
        lines = data.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        return None
    per_line = [frozenset(i for i, t in enumerate(terms) if t in line.lower())
                for line in lines]
    best = (0.0, 0)
    for start in range(max(1, len(lines) - WINDOW_LINES + 1)):
        held = frozenset().union(*per_line[start:start + WINDOW_LINES])
        weight = sum(weights[i] for i in held)
        if weight > best[0]:
            best = (weight, start)
    weight, start = best
    if not weight:
        return None
    # The window starts at its first line holding a word, so the snippet opens on the match.
    while start < len(lines) - 1 and not per_line[start]:
        start += 1
    return weight, start + 1, lines[start:start + WINDOW_LINES]


def _snippet(path: str, coverage: float, start: int, lines: list[str],
             scrub: Callable[[str, str], str]) -> ContextSnippet:
    text = scrub("\n".join(lines), path)
    return ContextSnippet(
        chunk_id=f"{PROVIDER_ID}:{path}:{start}", score=coverage, file_path=path, label="",
        kind=ChunkKind.CODE_BLOCK.value, text=text, language=language_for(path) or "",
        start_line=start,
        end_line=start + len(lines) - 1, tokens=estimate_tokens(text),
        providers=(PROVIDER_ID,),
        metadata={"bm25_coverage": round(coverage, 4), "read_from_disk": True})


def fuse_scanned(candidates: Sequence[ContextSnippet], scanned: Sequence[ContextSnippet]
                 ) -> list[ContextSnippet]:
    """The indexed candidates and the scanned windows in one list, best first: a window's
    score is its coverage times SCAN_WEIGHT times the best candidate's score (a window
    holding the query's rare literal is lifted later, as any chunk: contextd.query.literals)."""
    if not scanned:
        return list(candidates)
    top = SCAN_WEIGHT * (max((c.score for c in candidates), default=1.0) or 1.0)
    merged = list(candidates) + [dataclasses.replace(s, score=s.score * top) for s in scanned]
    return sorted(merged, key=lambda s: -s.score)
