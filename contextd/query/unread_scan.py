"""The files not read yet, searched as text for the query's distinctive words only.

A first command reads a large project for a second or two and answers from what it read;
the background owner reads the rest. On a 12,000-file project the first answer came from a
few hundred files and said "no strong match" for a question whose file it had not read yet.
So while files wait to be indexed (the bootstrap's pending list), an answer also scans their
bytes the way ripgrep would (a case-insensitive substring test per term over each file, source
code first, at most SCAN_BUDGET_S), and fuses each matching file's best window, read from disk.

Only the query's *distinctive* terms are searched: its literals (quoted strings, identifiers,
ids: :mod:`contextd.query.literals`) and its words that are not stop words and are rare in the
part already indexed (BM25 document frequencies: held by at most COMMON_SHARE of the indexed
chunks) and in the part scanned. A first try searched every word of the query: in a project
of 5,000 look-alike handlers, 12-line windows matched on the query's common words were fused
above the one indexed file that answered, which is why evidence decides the place of a
scanned window (:func:`place_scanned`): it never ranks above an indexed chunk that holds as
much of the distinctive terms as it does.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import os
import re
import time
from typing import Any, Callable, Container, Mapping, Sequence

from contextd.chunkers.chunking import language_for
from contextd.query.evidence import words
from contextd.query.literals import Literal
from contextd.records import ChunkKind, ContextScope, ContextSnippet
from contextd.scrub.scrubber import scrub_secrets
from contextd.text.stemming import light_stem
from contextd.text.stop_words import STOP_WORDS
from contextd.text.tokens import estimate_tokens

PROVIDER_ID = "text_scan"
# Lines of a snippet cut around the best place of a file.
WINDOW_LINES = 12
# Words shorter than this match inside too many others to be searched as substrings.
MIN_WORD_LENGTH = 3
# A word held by more than this share of the indexed chunks (or of the files scanned) tells
# files apart no better than the indexed answer does: it is not searched for / weighs nothing.
COMMON_SHARE = 0.02
# ... unless it is held by this few chunks (a small index says little about rarity).
RARE_MIN_DOCS = 3
# Below this many files scanned, the share of them holding a term says nothing.
SCAN_SHARE_MIN_FILES = 100
# How long one answer may spend scanning files not read yet (12,000 small files take 0.3 s on
# a quiet 2-core machine, 1.1-2.2 s at load 12).
SCAN_BUDGET_S = 1.0
# Files kept from a scan (the best by evidence) and the least evidence worth showing.
SCAN_KEEP = 20
MIN_EVIDENCE = 0.5
# Files larger than this are not scanned (the boundary's size limit applies before).
MAX_SCAN_BYTES = 2_000_000
# Scanned first: source code, then docs, tests and configuration (the bootstrap's order, told
# by the name alone: the roles' own rules cost 2.9 s for 12,000 paths), so what the budget
# reaches is what answers most questions.
_DOC_SUFFIXES = frozenset({".md", ".mdx", ".rst", ".txt", ".adoc"})
_CONFIG_SUFFIXES = frozenset({".json", ".yaml", ".yml", ".toml", ".ini", ".cfg", ".xml"})
# Words of a path (folders and file name) at least this long count as spelling a query term.
PATH_WORD_LENGTH = 4
# A name written as code: snake_case, camelCase, or capitals inside a word (HTTPException,
# OpenAPI); not an acronym alone (JSON, HTML: prose writes them everywhere).
_CODE_NAME_RE = re.compile(
    r"\b(?:[A-Za-z]\w*_\w*[A-Za-z0-9]|[a-z]+[A-Z]\w*|[A-Z]+[a-z]\w*[A-Z]\w*|[A-Z]{2,}[a-z]\w*)\b")
_PATH_WORD_RE = re.compile(r"[a-z0-9]+")
SCANNED_NOTE = ("{searched:,} of the {pending:,} files not indexed yet were searched as text "
                "for {terms} ({found}); {left:,} not searched")
NO_TERMS_NOTE = ("the {pending:,} files not indexed yet were not searched as text: every word "
                 "of the query is common in the part indexed")


FULL_TEXT_ID = "full_text"


class UnreadScan:
    """The scan as one step of an answer: the pending list from the store, the indexed
    part's document frequencies from the full-text provider (``provider(id)``)."""

    def __init__(self, project: Any, store: Any, provider: Callable[[str], Any]):
        self.project = project
        self.store = store
        self.provider = provider

    def placed(self, candidates: Sequence[ContextSnippet], query: str,
               literals: Sequence[Literal], scope: ContextScope,
               accepts_path: Callable[[str], bool] | None, indexed_paths: Container[str]
               ) -> tuple[list[ContextSnippet], str | None, list[str]]:
        """(the candidates with the scanned windows placed among them, the note saying how
        many files were searched, the files not indexed yet: translation groups span them
        too); the candidates alone when every file is indexed or the scope filters by what
        only indexing knows (languages, chunk kinds, roles).
        ``accepts_path``: the scope's test of a path (None: every path is inside);
        ``indexed_paths``: the files the answer's indexes hold (a pending file a refresh has
        indexed since, after a cancelled rebuild, is not scanned again)."""
        if scope.languages or scope.kinds or scope.roles:
            return list(candidates), None, []
        _, pending = self.store.progress_pending()
        pending = [p for p in pending if p not in indexed_paths
                   and (accepts_path is None or accepts_path(p))]
        if not pending:
            return list(candidates), None, []
        asked = query_words(query) + [lit.text.lower() for lit in literals]
        indexed, frequency = self._frequencies(asked + [_needle(w) for w in asked])
        terms = distinctive_terms(query, literals, indexed, frequency)
        security = self.project.config.security
        scan = scan_unread(str(self.project.root), pending, query, terms, indexed, frequency,
                           lambda text, path: scrub_secrets(text, path, security).text)
        return place_scanned(candidates, scan), scan.note(), pending

    def _frequencies(self, asked: Sequence[str]) -> tuple[int, dict[str, int]]:
        """(indexed chunks, BM25 document frequency of each word's stem)."""
        index = getattr(self.provider(FULL_TEXT_ID), "index", None)
        if index is None:
            return 0, {}
        with index.lock:
            stems = {light_stem(w) for w in asked}
            return len(index.bm25), {stem: index.bm25.df(stem) for stem in stems}


@dataclasses.dataclass(frozen=True)
class Term:
    """One distinctive term: the lower-cased text searched for and what the query wrote."""

    needle: str
    written: str
    # Written as code (a literal, ``HTTPException``, ``response_model``): distinctive by its
    # form, however many files hold it.
    identifier: bool = False


def distinctive_terms(query: str, literals: Sequence[Literal], indexed: int,
                      frequency: Mapping[str, int]) -> list[Term]:
    """The query's literals, then its words that are neither stop words nor common among the
    ``indexed`` chunks (``frequency``: a word's BM25 document frequency, by its stem)."""
    terms = {lit.text.lower(): Term(lit.text.lower(), lit.text, identifier=True)
             for lit in literals if len(lit.text) >= MIN_WORD_LENGTH}
    for name in _CODE_NAME_RE.findall(query):
        if len(name) >= MIN_WORD_LENGTH:
            terms.setdefault(name.lower(), Term(name.lower(), name, identifier=True))
    limit = max(RARE_MIN_DOCS, COMMON_SHARE * indexed)
    for word in query_words(query):
        if frequency.get(light_stem(word), 0) <= limit:
            terms.setdefault(word, Term(_needle(word), word))
    return list(terms.values())


def query_words(query: str) -> list[str]:
    """The lower-cased words of a query that could be distinctive (no stop word, no short
    one), each once."""
    return list(dict.fromkeys(w for w in words(query)
                              if len(w) >= MIN_WORD_LENGTH and w not in STOP_WORDS))


def _needle(word: str) -> str:
    """What a word is searched as: its stem where the stem starts it ("invoices" finds
    "invoice"), else the word."""
    stem = light_stem(word)
    return stem if len(stem) >= MIN_WORD_LENGTH and word.startswith(stem) else word


@dataclasses.dataclass
class Scan:
    """What a scan found (snippets, best first, each with its evidence) and how far it got."""

    snippets: list[ContextSnippet]
    terms: list[Term]
    weights: list[float]
    searched: int
    pending: int

    def note(self) -> str | None:
        if not self.pending:
            return None
        if not self.terms:
            return NO_TERMS_NOTE.format(pending=self.pending)
        found = f"{len(self.snippets)} matched" if self.snippets else "none matched"
        return SCANNED_NOTE.format(
            searched=self.searched, pending=self.pending, found=found,
            terms=", ".join(repr(t.written) for t in self.terms),
            left=self.pending - self.searched)

    def evidence(self, text: str) -> float:
        """The weighted share of the distinctive terms ``text`` holds, in [0, 1]."""
        return _held_weight(text.lower(), self.terms, self.weights) / (sum(self.weights) or 1.0)


def scan_unread(root: str, paths: Sequence[str], query: str, terms: Sequence[Term],
                indexed: int, frequency: Mapping[str, int], scrub: Callable[[str, str], str],
                budget_s: float = SCAN_BUDGET_S) -> Scan:
    """Search the files ``paths`` (root-relative, not indexed yet) for ``terms`` of
    ``query`` (whose words a window holds is its coverage, as BM25 coverage for calibration);
    ``indexed``/``frequency`` as for :func:`distinctive_terms` weigh each term (a term rare
    among the indexed chunks and the files scanned weighs most); ``scrub(text, path)``
    redacts a snippet's secrets as indexing would."""
    if not terms or not paths:
        return Scan([], list(terms), [], 0, len(paths))
    needles = [t.needle.encode() for t in terms]
    deadline = time.monotonic() + budget_s
    held: dict[str, tuple[bytes, frozenset[int]]] = {}
    searched = 0
    base = root.rstrip(os.sep) + os.sep
    for path in sorted(paths, key=lambda p: _scan_order(p, terms)):
        if searched % 64 == 0 and time.monotonic() > deadline:
            break
        searched += 1
        try:
            # Plain open() and read(): a Path, or read(n) with its n-byte buffer, cost as much
            # as the reading (the boundary has already left out files over its size limit).
            with open(base + path, "rb") as handle:
                data = handle.read(MAX_SCAN_BYTES + 1)
        except OSError:
            continue
        if len(data) > MAX_SCAN_BYTES:
            continue
        lower = data.lower()
        found = frozenset(i for i, needle in enumerate(needles) if needle in lower)
        if found:
            held[path] = (data, found)
    weights = _weights(terms, held, searched, indexed, frequency)
    total = sum(weights) or 1.0

    def rank(share: float, path: str) -> tuple[float, tuple[int, int], str]:
        return -round(share, 2), _scan_order(path, terms), path

    # A window holds at most what its file holds, so the files are taken best file first and
    # the search for windows stops at the first file that could not rank among the SCAN_KEEP
    # best windows found: a common term left hundreds of files to cut windows of (1.6 s of a
    # 3 s answer on fastapi), where twenty are kept.
    files = sorted((rank(sum(weights[i] for i in found) / total, path), path)
                   for path, (_, found) in held.items())
    best: list[tuple[tuple[float, tuple[int, int], str], float, int, list[str]]] = []
    for file_rank, path in files:
        if -file_rank[0] < MIN_EVIDENCE:
            break  # the whole file holds too little: no window of it holds more
        if len(best) >= SCAN_KEEP and file_rank > best[-1][0]:
            break
        window = _best_window(held[path][0], terms, weights)
        if window is not None and window[0] / total >= MIN_EVIDENCE:
            best.append((rank(window[0] / total, path), window[0] / total, window[1], window[2]))
            best = sorted(best, key=lambda item: item[0])[:SCAN_KEEP]
    asked = query_words(query)
    snippets = [_snippet(key[2], share, _coverage(asked, lines), start, lines, scrub)
                for key, share, start, lines in best]
    return Scan(snippets, list(terms), weights, searched, len(paths))


def _weights(terms: Sequence[Term], held: Mapping[str, tuple[bytes, frozenset[int]]],
             searched: int, indexed: int, frequency: Mapping[str, int]) -> list[float]:
    """Each term's IDF over the indexed chunks and the files scanned together. A word held
    by more than COMMON_SHARE of enough files scanned (common in the unread part) weighs 0;
    a name written as code weighs at least as much as the heaviest word (on fastapi,
    ``HTTPException`` is in hundreds of files, and a README window holding "turned" outranked
    the module that raises it)."""
    weights = []
    for i, term in enumerate(terms):
        in_scan = sum(1 for _, found in held.values() if i in found)
        if not term.identifier and searched >= SCAN_SHARE_MIN_FILES \
                and in_scan > COMMON_SHARE * searched:
            weights.append(0.0)
            continue
        df = in_scan + frequency.get(light_stem(term.needle), 0)
        weights.append(math.log(1 + (searched + indexed) / (1 + df)))
    heaviest = max((w for w, t in zip(weights, terms) if not t.identifier), default=0.0)
    return [max(w, heaviest) if t.identifier else w for w, t in zip(weights, terms)]


def _held_weight(lower: str, terms: Sequence[Term], weights: Sequence[float]) -> float:
    return sum(w for t, w in zip(terms, weights) if w and t.needle in lower)


def _scan_order(path: str, terms: Sequence[Term]) -> tuple[int, int]:
    """(0 source code, 1 docs and their examples, 2 tests, 3 configuration (see
    _DOC_SUFFIXES); 0 when the path spells a query term, else 1): within each kind, the
    files whose path spells a term of the query first, since the budget may end before the
    kind's last file. Code under a top folder of docs or examples (fastapi's 1,000 modules of
    ``docs_src/``) counts as docs: the package's own code answers first."""
    lowered = path.lower()
    suffix = lowered[lowered.rfind("."):] if "." in lowered[lowered.rfind("/") + 1:] else ""
    top = lowered.split("/", 1)[0] if "/" in lowered else ""
    if suffix in _DOC_SUFFIXES or "doc" in top or "example" in top:
        kind = 1
    elif "test" in lowered:
        kind = 2
    else:
        kind = 3 if suffix in _CONFIG_SUFFIXES else 0
    parts = [p for p in _PATH_WORD_RE.findall(lowered) if len(p) >= PATH_WORD_LENGTH]
    spelled = any(p in t.needle or t.needle in p for p in parts for t in terms
                  if len(t.needle) >= PATH_WORD_LENGTH)
    return kind, 0 if spelled else 1


def _best_window(data: bytes, terms: Sequence[Term], weights: Sequence[float]
                 ) -> tuple[float, int, list[str]] | None:
    """(weight held, first line number, lines) of the WINDOW_LINES-line window of a file
    holding the most weight of the terms, opening on a line that holds one (the first such
    window); None when the file is not text or holds none. The lines holding each term are
    found by searching the lower-cased text, not by testing each term on each line (3 s of
    CPU for fastapi's 944 files holding 'OpenAPI')."""
    try:
        lines = data.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        return None
    lower = "\n".join(line.lower() for line in lines)
    starts = [0]  # offset of each line in ``lower``
    for line_number, low in enumerate(lower.split("\n")[:-1]):
        starts.append(starts[line_number] + len(low) + 1)
    held_at: dict[int, list[int]] = {}  # term -> the lines holding it, in order
    for i, term in enumerate(terms):
        if not weights[i]:
            continue
        at, found = lower.find(term.needle), []
        while at >= 0:
            line_number = bisect.bisect_right(starts, at) - 1
            found.append(line_number)
            at = lower.find(term.needle, starts[line_number + 1]) \
                if line_number + 1 < len(starts) else -1
        if found:
            held_at[i] = found
    best = (0.0, 0)
    for start in sorted({n for found in held_at.values() for n in found}):
        weight = 0.0
        for i, found in held_at.items():
            k = bisect.bisect_left(found, start)
            if k < len(found) and found[k] < start + WINDOW_LINES:
                weight += weights[i]
        if weight > best[0]:
            best = (weight, start)
    weight, start = best
    if not weight:
        return None
    return weight, start + 1, lines[start:start + WINDOW_LINES]


def _coverage(asked: Sequence[str], lines: Sequence[str]) -> float:
    """The share of the query's words a window holds (its stems, as substrings)."""
    lower = "\n".join(lines).lower()
    return sum(1 for w in asked if _needle(w) in lower) / (len(asked) or 1)


def _snippet(path: str, share: float, coverage: float, start: int, lines: list[str],
             scrub: Callable[[str, str], str]) -> ContextSnippet:
    text = scrub("\n".join(lines), path)
    return ContextSnippet(
        chunk_id=f"{PROVIDER_ID}:{path}:{start}", score=share, file_path=path, label="",
        kind=ChunkKind.CODE_BLOCK.value, text=text, language=language_for(path) or "",
        start_line=start, end_line=start + len(lines) - 1, tokens=estimate_tokens(text),
        providers=(PROVIDER_ID,),
        metadata={"scan_evidence": round(share, 4), "bm25_coverage": round(coverage, 4),
                  "read_from_disk": True})


def place_scanned(candidates: Sequence[ContextSnippet], scan: Scan) -> list[ContextSnippet]:
    """The indexed candidates and the scanned windows in one list, best first. A window goes
    below every candidate (indexed or scanned) that holds at least as much of the
    distinctive terms as it does, and above the rest; its score lies between its
    neighbours' (the indexed candidates keep theirs). With no indexed candidate, a window
    scores its evidence."""
    ranked = sorted(candidates, key=lambda s: -s.score)
    if not scan.snippets:
        return ranked
    # (evidence, snippet, scanned)
    placed = [(scan.evidence(c.text), c, False) for c in ranked]
    for hit in scan.snippets:  # best evidence first
        evidence = float(hit.metadata["scan_evidence"])
        after = max((i for i, (e, _, _) in enumerate(placed) if e >= evidence), default=-1)
        placed.insert(after + 1, (evidence, hit, True))
    out: list[ContextSnippet] = []
    for i, (evidence, snippet, scanned) in enumerate(placed):
        if scanned:
            above = out[-1].score if out else None
            below = next((s.score for _, s, later in placed[i + 1:] if not later), None)
            if above is None:
                score = evidence if below is None else (below * 1.01 or evidence)
            else:
                score = above * 0.99 if below is None else (above + below) / 2
            snippet = dataclasses.replace(snippet, score=score)
        out.append(snippet)
    return out
