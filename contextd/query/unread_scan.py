"""The files not read yet, searched as text for the query's words, ranked as BM25 would.

A first command reads a large project for a second or two and answers from what it read;
the background owner reads the rest. On a 12,000-file project the first answer came from a
few hundred files and said "no strong match" for a question whose file it had not read yet.
So while files wait to be indexed (the bootstrap's pending list), an answer also scans their
bytes the way ripgrep would (a case-insensitive count per term over each file, source code
first, at most SCAN_BUDGET_S), and fuses the best files' best windows, read from disk.

The query's literals (quoted strings, identifiers, ids: :mod:`contextd.query.literals`), its
names written as code and its words that are not stop words are searched. A word common in
the part indexed or scanned weighs next to nothing (its BM25 rarity), and a file whose terms
weigh less than MIN_EVIDENCE of the query's is not shown: in a project of 5,000 look-alike
handlers, windows matched on the query's common words were once fused above the one indexed
file that answered. Leaving such words out of the search instead, as the scan did before,
had it rank wagtail's image models by "generated" and "cached" alone once the owner had
indexed the image package's other modules.

The files found are ranked the way the complete index would rank them (issue 37: the first
answers had the right file in the top 5 for 5 of 8 fastapi questions, the complete lexical
index for 7): BM25 over the files, with each term's rarity counted over the files scanned and
the chunks indexed, length normalisation, the ranking's role factors and path words
(:class:`Measure`). The same measure places a scanned window among the indexed candidates
(:func:`place_scanned`): it never ranks above an indexed chunk that measures as much as its
file does.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import os
import re
import time
from typing import Any, Callable, Collection, Mapping, Sequence

from contextd.chunkers.chunking import language_for
# The answer's own near-copy test: a window the answer would collapse is not chosen.
from contextd.query.duplicates import near_copies, word_set
from contextd.query.evidence import words
from contextd.query.literals import Literal
from contextd.query.path_words import PathFactor, PathWords
from contextd.records import ChunkKind, ContextScope, ContextSnippet
from contextd.scrub.scrubber import scrub_secrets
from contextd.text.stemming import light_stem
from contextd.text.stop_words import STOP_WORDS
from contextd.text.tokens import estimate_tokens

PROVIDER_ID = "text_scan"
# Lines of a snippet cut around the best place of a file.
WINDOW_LINES = 12
# The windows of a file tried, best first, for one that is no near-copy of another file's.
WINDOW_TRIES = 8
# Words shorter than this match inside too many others to be searched as substrings.
MIN_WORD_LENGTH = 3
# BM25's term-frequency saturation, as the index's (its provider sits above this stage).
FILE_K1 = 1.5
# BM25's length normalisation over whole files (the index's b is 0.75 over chunks). A file is
# many chunks and the index finds a long module by one of them; at 0.75 over files,
# fastapi's routing.py and dependencies/utils.py (4,000 and 1,000 lines) sank below a dozen
# short tests that say "dependencies" and "yield" once each.
FILE_LENGTH_B = 0.3
# A file's score by its kind (source, docs, tests, configuration: _kind) when the
# caller gives none.
NO_PRIORS = (1.0, 1.0, 1.0, 1.0)
# How long one answer may spend scanning files not read yet (12,000 small files take 0.3 s on
# a quiet 2-core machine, 1.1-2.2 s at load 12).
SCAN_BUDGET_S = 1.0
# Files kept from a scan (the best by their Measure), and the least share of the query's
# term weight a file must hold to be shown (0.5 left out wagtail's embeds/finders/oembed.py,
# which holds "oembed", "html" and "url" but not "video" or "fetched").
SCAN_KEEP = 20
MIN_EVIDENCE = 0.4
# Files larger than this are not scanned (the boundary's size limit applies before).
MAX_SCAN_BYTES = 2_000_000
# Scanned first: source code, then docs, tests and configuration (the bootstrap's order, told
# by the name alone: the roles' own rules cost 2.9 s for 12,000 paths), so what the budget
# reaches is what answers most questions.
_DOC_SUFFIXES = frozenset({".md", ".mdx", ".rst", ".txt", ".adoc"})
_CONFIG_SUFFIXES = frozenset({".json", ".yaml", ".yml", ".toml", ".ini", ".cfg", ".xml"})
# The kinds (_kind) whose paths say what their code is about (source, tests), as the
# ranking's path words boost only code: docs pages are named by their topic in every language.
_CODE_KINDS = frozenset({0, 2})
# A name written as code: snake_case, camelCase, or capitals inside a word (HTTPException,
# OpenAPI); not an acronym alone (JSON, HTML: prose writes them everywhere).
_CODE_NAME_RE = re.compile(
    r"\b(?:[A-Za-z]\w*_\w*[A-Za-z0-9]|[a-z]+[A-Z]\w*|[A-Z]+[a-z]\w*[A-Z]\w*|[A-Z]{2,}[a-z]\w*)\b")
SCANNED_NOTE = ("{searched:,} of the {pending:,} files not indexed yet were searched as text "
                "for {terms} ({found}); {left:,} not searched")
NO_TERMS_NOTE = ("the {pending:,} files not indexed yet were not searched as text: the query "
                 "has no word to search for (stop words and words under "
                 f"{MIN_WORD_LENGTH} letters are not searched)")


FULL_TEXT_ID = "full_text"


class UnreadScan:
    """The scan as one step of an answer: the pending list from the store, the indexed
    part's document frequencies from the full-text provider (``provider(id)``), and the
    files written but not yet taken into the answer's indexes (``waiting()``: the catalog's,
    see :mod:`contextd.query.catch_up`)."""

    def __init__(self, project: Any, store: Any, provider: Callable[[str], Any],
                 waiting: Callable[[], Sequence[str]] = lambda: ()):
        self.project = project
        self.store = store
        self.provider = provider
        self.waiting = waiting

    def placed(self, candidates: Sequence[ContextSnippet], query: str,
               literals: Sequence[Literal], scope: ContextScope,
               accepts_path: Callable[[str], bool] | None, indexed_paths: Collection[str],
               path_factor: PathFactor | None = None
               ) -> tuple[list[ContextSnippet], str | None, list[str]]:
        """(the candidates with the scanned windows placed among them, the note saying how
        many files were searched, the files not indexed yet: translation groups span them
        too); the candidates alone when every file is indexed or the scope filters by what
        only indexing knows (languages, chunk kinds, roles).
        ``accepts_path``: the scope's test of a path (None: every path is inside);
        ``indexed_paths``: the files the answer's indexes hold (a pending file a refresh has
        indexed since, after a cancelled rebuild, is not scanned again); ``path_factor``: the
        ranking's path factor for the query
        (:func:`contextd.query.understanding.path_factor`), its path words read here over
        the indexed and the pending files together, as the complete index would read them
        (None: paths do not count)."""
        if scope.languages or scope.kinds or scope.roles:
            return list(candidates), None, []
        _, pending = self.store.progress_pending()
        # A waiting file is among the answer's paths, but none of its chunks is searched.
        pending = [p for p in dict.fromkeys([*(p for p in pending if p not in indexed_paths),
                                             *self.waiting()])
                   if accepts_path is None or accepts_path(p)]
        if not pending:
            return list(candidates), None, []
        asked = query_words(query) + [lit.text.lower() for lit in literals]
        indexed, frequency = self._frequencies(asked + [_needle(w) for w in asked])
        terms = search_terms(query, literals)
        security, ranking = self.project.config.security, self.project.config.ranking
        if path_factor is not None:
            path_factor = dataclasses.replace(
                path_factor, words=PathWords([*indexed_paths, *pending]))
        scan = scan_unread(str(self.project.root), pending, query, terms, indexed, frequency,
                           lambda text, path: scrub_secrets(text, path, security).text,
                           priors=scan_priors(ranking), path_factor=path_factor)
        return place_scanned(candidates, scan), scan.note(), pending

    def _frequencies(self, asked: Sequence[str]) -> tuple[int, dict[str, int]]:
        """(indexed chunks, BM25 document frequency of each word's stem)."""
        index = getattr(self.provider(FULL_TEXT_ID), "index", None)
        if index is None:
            return 0, {}
        with index.lock:
            stems = {light_stem(w) for w in asked}
            return len(index.bm25), {stem: index.bm25.df(stem) for stem in stems}


def scan_priors(ranking: Any) -> tuple[float, float, float, float]:
    """The factor of a scanned file's score by its kind (source, docs, tests, configuration:
    :func:`_kind`): the ``[ranking]`` role factors the index's answer applies (docs and
    configuration as for an implementation question, tests as ``source_over_tests``), so a
    docs page in each of ten languages does not bury the module it describes."""
    return (1.0, ranking.implementation_doc_factor, ranking.source_over_tests,
            ranking.implementation_config_factor)


@dataclasses.dataclass(frozen=True)
class Term:
    """One term searched for: the lower-cased text searched for and what the query wrote."""

    needle: str
    written: str
    # Written as code (a literal, ``HTTPException``, ``response_model``): distinctive by its
    # form, however many files hold it.
    identifier: bool = False


def search_terms(query: str, literals: Sequence[Literal]) -> list[Term]:
    """The query's literals, its names written as code, then its words (no stop word, no
    short one), each once."""
    terms = {lit.text.lower(): Term(lit.text.lower(), lit.text, identifier=True)
             for lit in literals if len(lit.text) >= MIN_WORD_LENGTH}
    for name in _CODE_NAME_RE.findall(query):
        if len(name) >= MIN_WORD_LENGTH:
            terms.setdefault(name.lower(), Term(name.lower(), name, identifier=True))
    for word in query_words(query):
        terms.setdefault(word, Term(_needle(word), word))
    return list(terms.values())


def query_words(query: str) -> list[str]:
    """The lower-cased words of a query that are searched (no stop word, no short one), each
    once."""
    return list(dict.fromkeys(w for w in words(query)
                              if len(w) >= MIN_WORD_LENGTH and w not in STOP_WORDS))


def _needle(word: str) -> str:
    """What a word is searched as: its stem where the stem starts it ("invoices" finds
    "invoice"), else the word."""
    stem = light_stem(word)
    return stem if len(stem) >= MIN_WORD_LENGTH and word.startswith(stem) else word


@dataclasses.dataclass(frozen=True)
class Measure:
    """A scan's BM25 measure of a text at a path, one scale for the files scanned and the
    indexed chunks they are placed among: each term's occurrences, saturated and normalised
    by the text's length against the average of the files searched, times the term's weight
    (:func:`_weights`), times the prior of the path's kind (:func:`scan_priors`) and, for
    code, its path factor (path words: ``fastapi/openapi/docs.py`` for "the Swagger UI docs
    page"; a title's area), the one the index's ranking applies."""

    terms: Sequence[Term]
    weights: Sequence[float]
    average: float
    priors: Sequence[float]
    path_factor: Callable[[str], float]

    def counted(self, path: str, counts: Sequence[int], length: int) -> float:
        norm = FILE_K1 * (1 - FILE_LENGTH_B + FILE_LENGTH_B * length / self.average)
        lexical = sum(w * n * (FILE_K1 + 1) / (n + norm)
                      for w, n in zip(self.weights, counts) if n and w)
        kind = _kind(path)
        boost = self.path_factor(path) if kind in _CODE_KINDS else 1.0
        return lexical * self.priors[kind] * boost

    def of_text(self, path: str, text: str) -> float:
        lower = text.lower()
        return self.counted(path, [lower.count(t.needle) for t in self.terms], len(text))


@dataclasses.dataclass
class Scan:
    """What a scan found (snippets, best first, each with its evidence and its file's
    measure) and how far it got."""

    snippets: list[ContextSnippet]
    terms: list[Term]
    weights: list[float]
    searched: int
    pending: int
    measure: Measure | None = None
    root: str = ""

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


def scan_unread(root: str, paths: Sequence[str], query: str, terms: Sequence[Term],
                indexed: int, frequency: Mapping[str, int], scrub: Callable[[str, str], str],
                budget_s: float = SCAN_BUDGET_S, priors: Sequence[float] = NO_PRIORS,
                path_factor: PathFactor | None = None) -> Scan:
    """Search the files ``paths`` (root-relative, not indexed yet) for ``terms`` of
    ``query`` (whose words a window holds is its coverage, as BM25 coverage for calibration);
    ``indexed``/``frequency`` (the indexed chunks, the BM25 document frequency of a word's
    stem among them) weigh each term (a term rare among the indexed chunks and the files
    scanned weighs most); ``scrub(text, path)`` redacts a snippet's secrets as indexing
    would; ``priors``: the factor of a file's score by its kind (source, docs, tests,
    configuration: :func:`scan_priors`); ``path_factor``: the ranking's factor of a code
    file's path (:class:`contextd.query.path_words.PathFactor`; None: its path words over
    ``paths`` for the stems of :func:`query_words`, which order the search but leave
    the scores alone).

    Files are searched in :func:`scan_order` and ranked by their :class:`Measure`, as BM25
    ranks documents, so that the first answer orders them as the complete index would.
    Ranking them by the share of the terms they hold put a docs page that says each word
    once beside the module about them."""
    if not terms or not paths:
        return Scan([], list(terms), [], 0, len(paths))
    needles = [t.needle.encode() for t in terms]
    deadline = time.monotonic() + budget_s
    held: dict[str, tuple[bytes, tuple[int, ...]]] = {}
    searched = size = 0
    base = root.rstrip(os.sep) + os.sep
    if path_factor is None:
        path_factor = PathFactor(PathWords(paths),
                                 frozenset(light_stem(w) for w in query_words(query)))
    for path in scan_order(paths, path_factor):
        if searched % 64 == 0 and time.monotonic() > deadline:
            break
        searched += 1
        try:
            data = _read_head(base + path)
        except OSError:
            continue
        if len(data) > MAX_SCAN_BYTES:
            continue
        size += len(data)
        lower = data.lower()
        counts = tuple(lower.count(needle) for needle in needles)
        if any(counts):
            held[path] = (data, counts)
    weights = _weights(terms, held, searched, indexed, frequency)
    total = sum(weights) or 1.0
    measure = Measure(list(terms), weights, size / (searched or 1) or 1.0, priors, path_factor)
    # The best files whose terms weigh at least MIN_EVIDENCE; a window of each (a window
    # holds at most what its file holds, so only the files kept are cut: a common term left
    # hundreds of files to cut windows of, 1.6 s of a 3 s answer on fastapi).
    files = sorted(((-measure.counted(path, counts, len(data)), _kind(path), path)
                    for path, (data, counts) in held.items()
                    if sum(w for w, n in zip(weights, counts) if n) / total >= MIN_EVIDENCE))
    best: list[tuple[str, float, float, int, list[str]]] = []
    shown: list[frozenset[str]] = []
    for negative, _, path in files:
        if len(best) >= SCAN_KEEP:
            break
        window = _best_window(held[path][0], terms, weights, shown)
        if window is not None:
            best.append((path, -negative, window[0] / total, window[1], window[2]))
            shown.append(word_set("\n".join(window[2])))
    asked = query_words(query)
    snippets = [_snippet(path, share, _coverage(asked, lines), start, lines, scrub, rank)
                for path, rank, share, start, lines in best]
    return Scan(snippets, list(terms), weights, searched, len(paths), measure, root)


def _read_head(path: str) -> bytes:
    """The file's bytes, or its first MAX_SCAN_BYTES + 1 when it is larger (the caller skips
    those). A file descriptor read to the size fstat gives: open() and a buffered
    read(MAX_SCAN_BYTES + 1) cost twice the CPU over fastapi's 2,855 files (0.08-0.14 s
    against 0.045 s), paid by every answer while files wait to be indexed."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, min(MAX_SCAN_BYTES, os.fstat(fd).st_size) + 1)
    finally:
        os.close(fd)


def _weights(terms: Sequence[Term], held: Mapping[str, tuple[bytes, tuple[int, ...]]],
             searched: int, indexed: int, frequency: Mapping[str, int]) -> list[float]:
    """Each term's BM25 IDF over the indexed chunks and the files scanned together (a term
    held by most of them weighs next to nothing; none is left out, since a question's
    plainest words, 'status code', 'validation error', are what its file holds most). A name
    written as code weighs at least as much as the heaviest word (on fastapi,
    ``HTTPException`` is in hundreds of files, and a README window holding "turned"
    outranked the module that raises it)."""
    documents = searched + indexed
    weights = []
    for i, term in enumerate(terms):
        df = sum(1 for _, counts in held.values() if counts[i]) \
            + frequency.get(light_stem(term.needle), 0)
        weights.append(math.log(1 + (documents - df + 0.5) / (df + 0.5)))
    heaviest = max((w for w, t in zip(weights, terms) if not t.identifier), default=0.0)
    return [max(w, heaviest) if t.identifier else w for w, t in zip(weights, terms)]


def scan_order(paths: Sequence[str], path_factor: PathFactor) -> list[str]:
    """The order files are searched in: by kind (source code first: :func:`_kind`), and in
    each kind those whose paths spell most of the query's words first: the path evidence
    the ranking's path factor (:class:`PathFactor`: its path words and the title's area;
    a factor without boosts still orders by their evidence). The budget
    may end before a kind's last file: on wagtail at load 17, 832 of 2,904 files were
    searched, and with every path that spelled any term alike (``import_redirects.py``
    spelt 'port'), ``models/sites.py`` was not among them for "how is the Site matched from
    the request hostname and port"."""
    def key(path: str) -> tuple[int, float, float]:
        words, area = path_factor.evidence(path)  # once: half of the ordering's time
        return _kind(path), -path_factor.boosted(words, area), -(words + area)

    return sorted(paths, key=key)


def _kind(path: str) -> int:
    """0 source code, 1 docs and their examples, 2 tests, 3 configuration (see _DOC_SUFFIXES).
    Code under a top folder of docs or examples (fastapi's 1,000 modules of ``docs_src/``)
    counts as docs: the package's own code answers first."""
    lowered = path.lower()
    suffix = lowered[lowered.rfind("."):] if "." in lowered[lowered.rfind("/") + 1:] else ""
    top = lowered.split("/", 1)[0] if "/" in lowered else ""
    if suffix in _DOC_SUFFIXES or "doc" in top or "example" in top:
        return 1
    if "test" in lowered:
        return 2
    return 3 if suffix in _CONFIG_SUFFIXES else 0


def _best_window(data: bytes, terms: Sequence[Term], weights: Sequence[float],
                 shown: Sequence[frozenset[str]] = ()
                 ) -> tuple[float, int, list[str]] | None:
    """(weight held, first line number, lines) of the WINDOW_LINES-line window of a file
    holding the most weight of the terms, opening on a line that holds one (the first such
    window), unless it is a near-copy of a window ``shown`` from another file (their word
    sets): then the next best that is not, if one of the next WINDOW_TRIES is; None when the
    file is not text or holds none. fastapi's routing.py and applications.py carry the same
    parameter docstrings; routing.py's best window for "where is response_model used to
    filter the response data" was applications.py's twice over, and the answer's
    near-duplicate step dropped it (the complete index has the file's other chunks). The
    lines holding each term are found by searching the lower-cased text, not by testing each
    term on each line (3 s of CPU for fastapi's 944 files holding 'OpenAPI')."""
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
    windows = []  # (weight, start) of each window opening on a line holding a term
    for start in sorted({n for found in held_at.values() for n in found}):
        weight = 0.0
        for i, found in held_at.items():
            k = bisect.bisect_left(found, start)
            if k < len(found) and found[k] < start + WINDOW_LINES:
                weight += weights[i]
        windows.append((weight, start))
    windows.sort(key=lambda window: (-window[0], window[1]))
    if not windows or not windows[0][0]:
        return None
    for weight, start in windows[:WINDOW_TRIES] if shown else ():
        words = word_set("\n".join(lines[start:start + WINDOW_LINES]))
        if weight and not any(near_copies(words, other) for other in shown):
            return weight, start + 1, lines[start:start + WINDOW_LINES]
    weight, start = windows[0]
    return weight, start + 1, lines[start:start + WINDOW_LINES]


def _coverage(asked: Sequence[str], lines: Sequence[str]) -> float:
    """The share of the query's words a window holds (its stems, as substrings)."""
    lower = "\n".join(lines).lower()
    return sum(1 for w in asked if _needle(w) in lower) / (len(asked) or 1)


def _snippet(path: str, share: float, coverage: float, start: int, lines: list[str],
             scrub: Callable[[str, str], str], rank: float) -> ContextSnippet:
    text = scrub("\n".join(lines), path)
    return ContextSnippet(
        chunk_id=f"{PROVIDER_ID}:{path}:{start}", score=share, file_path=path, label="",
        kind=ChunkKind.CODE_BLOCK.value, text=text, language=language_for(path) or "",
        start_line=start, end_line=start + len(lines) - 1, tokens=estimate_tokens(text),
        providers=(PROVIDER_ID,),
        metadata={"scan_evidence": round(share, 4), "scan_score": round(rank, 4),
                  "bm25_coverage": round(coverage, 4), "read_from_disk": True})


def _file_measure(measure: Measure, root: str, candidate: ContextSnippet,
                  files: dict[str, float]) -> float:
    """The measure of an indexed candidate's whole file as it is on disk (``files``: those
    measured already), as a scanned file is measured; its chunk's text when the file cannot
    be read. Measured by its chunk, fastapi's security/http.py (indexed, one chunk holding
    the question's words once or twice) went below a dozen scanned tests each saying
    "bearer", "token" and "authorization" throughout."""
    if candidate.file_path not in files:
        try:
            with open(os.path.join(root, candidate.file_path), "rb") as handle:
                data = handle.read(MAX_SCAN_BYTES + 1)
        except OSError:
            data = b""
        files[candidate.file_path] = measure.of_text(
            candidate.file_path, data.decode("utf-8", "replace")) \
            if root and data and len(data) <= MAX_SCAN_BYTES else -1.0
    known = files[candidate.file_path]
    return known if known >= 0 else measure.of_text(candidate.file_path, candidate.text)


def place_scanned(candidates: Sequence[ContextSnippet], scan: Scan) -> list[ContextSnippet]:
    """The indexed candidates and the scanned windows in one list, best first. A window goes
    below the scan's better windows and below every indexed candidate whose file measures at
    least as much as its own (:class:`Measure`: the same BM25 scale, role priors and path
    words for both, each file as it is on disk: :func:`_file_measure`), and above the rest;
    its score lies between its neighbours' (the indexed candidates keep theirs and their
    order), below the one above by their measures' ratio. The first, when above every
    indexed candidate, is as far above the best one as it measures more (at least 1%); with
    no indexed candidate at all, it scores its evidence. Placing by the share of the terms
    held put an indexed README chunk that says each word of a question once above the
    scanned module about them."""
    ranked = sorted(candidates, key=lambda s: -s.score)
    if not scan.snippets or scan.measure is None:
        return ranked
    measure = scan.measure
    # (measure, snippet, scanned)
    files: dict[str, float] = {}
    placed = [(_file_measure(measure, scan.root, c, files), c, False) for c in ranked]
    last = -1  # where the scan's previous window went: the scan's own order stays
    for hit in scan.snippets:  # best first
        rank = float(hit.metadata["scan_score"])
        last = max([last] + [i for i, (m, _, _) in enumerate(placed) if m >= rank]) + 1
        placed.insert(last, (rank, hit, True))
    out: list[ContextSnippet] = []
    for i, (rank, snippet, scanned) in enumerate(placed):
        if scanned:
            evidence = float(snippet.metadata["scan_evidence"])
            above = out[-1].score if out else None
            below, below_measure = next(((s.score, m) for m, s, later in placed[i + 1:]
                                         if not later), (None, 0.0))
            if above is None:  # as far above the indexed best as it measures more
                score = evidence if below is None else (
                    below * max(1.01, rank / below_measure if below_measure > 0 else 0.0)
                    or evidence)
            else:
                # Below the one above as much as it measures less: MMR reads a score against
                # the best one, and windows 1% apart each left the choice to word overlap
                # alone (fastapi's openapi/utils.py, second of the scan, was not shown).
                previous = placed[i - 1][0]
                score = above * min(1.0, rank / previous) if previous > 0 else above
                if below is not None and score <= below:
                    score = (above + below) / 2
            snippet = dataclasses.replace(snippet, score=score)
        out.append(snippet)
    return out
