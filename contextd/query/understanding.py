"""From an agent's task description to a query for each kind of provider, and the ranking
adjustments that turn chunk hits into the files a change needs.

Agents ask with issue-like or commit-message-like paragraphs ("Fix: retries ignore the
Retry-After header when ..."). Each provider wants something different from that text:

- the semantic provider embeds prose best: the task with tracker boilerplate (``Fix:``,
  ``feat(scope):``, issue numbers, Markdown markers) removed;
- the lexical (BM25) provider wants the content words: identifiers (kept whole and split into
  their parts, since code spells ``retry_after`` and prose "retry after"), file names, quoted
  terms, other words, with stop words out;
- the symbol provider wants the names that look like code: ``snake_case``, ``camelCase``,
  ``Dotted.names``, ``call()`` and quoted single words.

The boosts are factors named in ``[ranking]`` (no magic numbers): definitions of a named symbol
over mere references, source over tests and vendored code (unless the task is about tests),
code over documentation when the task names symbols, source over documentation, tests and
config when the query asks for an implementation or a change (:mod:`contextd.query.intent`, file
roles from :mod:`contextd.boundary.roles`), the chunk that holds the query verbatim or the names
it writes above its neighbours (:mod:`contextd.query.evidence`), a definition whose name the
query's own words spell (:func:`name_words_share`), and a code file whose path they spell
(:mod:`contextd.query.path_words`).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import re
from dataclasses import dataclass
from typing import Sequence

from contextd.config.sections import DEFAULT_ALLOWED_EXTENSIONS, RankingConfig
from contextd.query.file_stem import query_keywords, stem_share
from contextd.query.evidence import ExactQuery, echoes_query, exact_evidence, quotation_tier
from contextd.query.intent import QueryIntent, classify, title_area
from contextd.records import ChunkKind, ContextSnippet, ProviderType
from contextd.boundary.roles import FileRole, file_role
from contextd.query.path_words import PathFactor, PathWords
from contextd.text.stemming import light_stem
from contextd.text.stop_words import STOP_WORDS

# Score factor of a non-source chunk that merely repeats the query between quotes.
ECHO_FACTOR = 0.3
_QUOTED_RE = re.compile(r"`([^`]+)`|\"([^\"]+)\"|'([^'\s][^']*[^'\s])'")
_FILE_RE = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+(\.[A-Za-z][A-Za-z0-9]{0,5}))(?![\w/])")
# Names as written: a leading ``_``, ``$`` or ``#`` (JS private) belongs to the name.
_TOKEN_RE = re.compile(r"#?[A-Za-z_$][\w$]*(?:\.#?[A-Za-z_$][\w$]*)*(?:\(\))?")
_CAMEL_PARTS_RE = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_BOILERPLATE_RE = re.compile(
    r"^\s*(?:(?:fix(?:es|ed)?|feat(?:ure)?|bug|chore|refactor|perf|docs|test|issue|todo)"
    r"(?:\([^)]*\))?!?\s*:\s*)+", re.I)
# A link is where to read more, not words of the task: its host and path segments
# ("swagger.io", "v3_0", "specification") read as names and words matched nothing of the code.
_URL_RE = re.compile(r"\b(?:https?|ftp)://\S+|\bwww\.\S+", re.I)
_ISSUE_REF_RE = re.compile(r"(?:\b(?:closes|fixes|resolves|see)\s+)?#\d+\b", re.I)
_MARKDOWN_RE = re.compile(r"[`*]+|^\s*[#>]+", re.M)
# What is left of "(#42)" or "[closes #42]" once the reference is gone (not the "()" of a call).
_EMPTY_BRACKETS_RE = re.compile(r"(?<!\w)(?:\(\s*\)|\[\s*\])")
# Cross-references as docstrings write them: Sphinx roles (:class:`~pkg.Name`, :meth:`title
# <target>`) and JSDoc links ({@link Name}). The role word is markup, not a word of the query.
_CROSS_REFERENCE_RE = re.compile(
    r":(?:[\w-]+:)?[\w-]+:`[~!]?(?:[^`<]*<([^`>]+)>|([^`]+))`"
    r"|\{@link(?:code|plain)?\s+([^}\s|]+)[^}]*\}")
_FILE_EXTENSIONS = frozenset(DEFAULT_ALLOWED_EXTENSIONS)
_TEST_WORDS = frozenset({"test", "tests", "testing", "pytest", "unittest", "spec", "fixture",
                         "fixtures"})
# Chunks that define what their label names (not a module's code or docstring).
_DEFINITION_KINDS = frozenset({ChunkKind.CODE_FUNCTION.value, ChunkKind.CODE_CLASS.value})
_DOC_LANGUAGES = frozenset({"markdown", "rst", "text"})
# Files whose path words the path boost reads: a module's name is often the only place its
# topic is written, while a document's headings and a config file's keys already say theirs
# to BM25 (a docs page named after the question outranked the code with it). A test file's
# path names the code it tests, not the code a change request changes: for one it is not read
# (saleor's test_clearorders.py came before management/commands/clearorders.py).
_CODE_ROLES = frozenset({FileRole.SOURCE, FileRole.TEST})
MIN_WORD_LENGTH = 2


@dataclass(frozen=True)
class UnderstoodQuery:
    """What a task description asks for, per provider kind."""

    original: str
    dense: str
    lexical: str
    symbols: tuple[str, ...]
    files: tuple[str, ...]
    quoted: tuple[str, ...]
    about_tests: bool
    intent: QueryIntent = QueryIntent.NEUTRAL
    exact: ExactQuery = ExactQuery((), ())
    # The stems of the words the task writes as prose (not as names): what a definition's
    # name is compared with (:func:`name_words_share`).
    prose_stems: frozenset[str] = frozenset()
    # The stems of every word the task writes, each word's parts included (HTTPException ->
    # http, exception): what a file's path is compared with (contextd.query.path_words).
    word_stems: frozenset[str] = frozenset()
    # The stems of the area a change request's title names before its colon (``cmd/promtool:
    # add …``, ``fix(clearorders): …``): where the change is (contextd.query.intent.title_area).
    area_stems: frozenset[str] = frozenset()

    def texts_by_kind(self) -> dict[ProviderType, str]:
        """The text each kind of provider is sent (see the module docstring); a kind whose
        text came out empty is left out, so its provider falls back to the original.

        The symbol provider also gets the file names (it has a tier for named files) and,
        when the task names no code, the lexical words: it joins adjacent words the way
        identifiers are written. The git history provider gets the dense query: it tokenises
        for itself, and needs names in their original case (``RateLimiter``, which the
        lower-cased lexical query loses) to find the files that define them."""
        symbol = " ".join((*self.symbols, *self.files)) or self.lexical
        texts = {ProviderType.SEMANTIC: self.dense, ProviderType.FULL_TEXT: self.lexical,
                 ProviderType.SYMBOL: symbol, ProviderType.GIT_HISTORY: self.dense}
        return {kind: text for kind, text in texts.items() if text}


def split_identifier(name: str) -> list[str]:
    """``retry_after`` / ``RetryAfter`` / ``Session.send`` -> their lower-case word parts."""
    parts = []
    for piece in re.split(r"[._$#]+", name.rstrip("()")):
        parts += [p.lower() for p in _CAMEL_PARTS_RE.findall(piece)]
    return parts


def looks_like_code(token: str) -> bool:
    """A token a human would only write when naming code: snake_case, camelCase, PascalCase
    with an inner capital, dotted names and calls."""
    core = token.rstrip("()")
    return (token.endswith("()") or "_" in core.strip("_") or "." in core
            or (len(core) > 1 and core[0] in "_#$")
            or bool(re.search(r"[a-z][A-Z]", core)) or bool(re.match(r"[A-Z][a-z]+[A-Z]", core)))


def is_file_name(token: str) -> bool:
    """``testing.py``, ``src/a.ts``: a name ending in an indexable file extension."""
    return "." in token and "." + token.rsplit(".", 1)[1].lower() in _FILE_EXTENSIONS


def dense_query(task: str) -> str:
    """The task as prose for the embedder: tracker boilerplate and Markdown markers removed."""
    text = _BOILERPLATE_RE.sub("", task.strip())
    text = _ISSUE_REF_RE.sub("", text)
    text = _EMPTY_BRACKETS_RE.sub(" ", _MARKDOWN_RE.sub(" ", text))
    return " ".join(text.split())


def plain_cross_references(text: str) -> str:
    """Docstring cross-references as plain quoted names: ``:class:`~pkg.Name``` and
    ``{@link Name}`` become ```Name``` (``pkg.Name``), ``:meth:`title <target>``` the
    target. Without this, the role words (class, func, meth) reach BM25 as query words and
    pull up every chunk that says ``class``."""
    return _CROSS_REFERENCE_RE.sub(lambda m: f"`{next(g for g in m.groups() if g)}`", text)


def understand(task: str, settings: RankingConfig) -> UnderstoodQuery:
    """Build the dense query, the lexical query and the symbol candidates of a task.
    Exact evidence and intent read the task as written (a quotation keeps its markup)."""
    original, task = task, _URL_RE.sub(" ", plain_cross_references(task))
    quoted = tuple(next(g for g in m.groups() if g) for m in _QUOTED_RE.finditer(task))
    files = tuple(dict.fromkeys(m.group(1) for m in _FILE_RE.finditer(task)
                                if m.group(2).lower() in _FILE_EXTENSIONS))
    tokens = _TOKEN_RE.findall(_ISSUE_REF_RE.sub("", _BOILERPLATE_RE.sub("", task))
                               .replace("::", "."))
    symbols: list[str] = []
    for token in [*tokens, *(q for q in quoted if _TOKEN_RE.fullmatch(q))]:
        name = token.rstrip("()")
        if (looks_like_code(token) or token in quoted) and name.lower() not in STOP_WORDS \
                and name not in symbols and not is_file_name(name):
            symbols.append(name)
    prose = frozenset(light_stem(t.lower()) for t in tokens
                      if not (looks_like_code(t) or t in quoted) and len(t) >= MIN_WORD_LENGTH
                      and t.lower() not in STOP_WORDS)
    every_word = frozenset(light_stem(w) for t in tokens
                           for w in (t.lower(), *split_identifier(t))
                           if len(w) >= MIN_WORD_LENGTH and w not in STOP_WORDS)
    lexical: list[str] = []
    for token in tokens + [w for q in quoted for w in _TOKEN_RE.findall(q)]:
        # Quoted names are identifiers too: a lower-cased `LRUCache` no longer shows BM25
        # where its parts begin.
        named = looks_like_code(token) or token in quoted
        words = [token.rstrip("()")] + (split_identifier(token) if named else [])
        for word in words:
            low = word.lower()
            if len(low) >= MIN_WORD_LENGTH and low not in STOP_WORDS and low not in lexical:
                lexical.append(low)
    lexical += [f.lower() for f in files if f.lower() not in lexical]
    about_tests = asks_about_tests(task)
    symbols = symbols[:settings.max_symbol_candidates]
    return UnderstoodQuery(original, dense_query(task), " ".join(lexical), tuple(symbols),
                           files, quoted, about_tests, classify(original, about_tests),
                           ExactQuery.of(original, symbols), prose, every_word,
                           frozenset(light_stem(w) for w in title_area(original)))


def asks_about_tests(task: str) -> bool:
    """Whether the task's first line names tests ("Add a test for merge_cookies",
    ``test_retry`` is flaky). A commit message's or an issue's body lists what came with the
    change ("- Add tests for omitted lines"): that does not make the change about its tests,
    and read so, saleor's ``checkoutCreate`` change ranked its test file first."""
    title = _BOILERPLATE_RE.sub("", task.strip()).split("\n", 1)[0]
    return any(w in _TEST_WORDS for token in _TOKEN_RE.findall(title)
               for w in (token.rstrip("()").lower(), *split_identifier(token)))


def matches_any(path: str, patterns: Sequence[str]) -> bool:
    """True when the root-relative POSIX ``path`` matches one of the globs (memoised: a
    query checks the same few hundred paths against the same patterns)."""
    return _matches_any(path, tuple(patterns))


@functools.lru_cache(maxsize=16_384)
def _matches_any(path: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(path, p) for p in patterns)


def boost_factor(snippet: ContextSnippet, query: UnderstoodQuery, settings: RankingConfig,
                 path_words: PathWords | None = None) -> float:
    """The product of the [ranking] factors that apply to one snippet (``path_words``: the
    project's, for the path boost; without them no path counts)."""
    factor = 1.0
    wanted = {s.rsplit(".", 1)[-1].lower() for s in query.symbols}
    defined = snippet.label.rsplit(".", 1)[-1].lower() if snippet.label else ""
    if defined and defined in wanted:
        factor *= definition_factor(snippet.label, query.symbols,
                                    settings.definition_over_reference)
    if not query.about_tests and matches_any(snippet.file_path, settings.test_path_patterns):
        factor *= settings.source_over_tests
    if matches_any(snippet.file_path, settings.vendored_path_patterns):
        factor *= settings.vendored_penalty
    if query.symbols and snippet.language in _DOC_LANGUAGES:
        factor *= settings.docs_penalty
    if defined and snippet.kind in _DEFINITION_KINDS and query.prose_stems:
        factor *= 1 + settings.name_words_boost * name_words_share(snippet.label,
                                                                   query.prose_stems)
    role = file_role(snippet.file_path, snippet.language)
    if role in _CODE_ROLES and not (
            role is FileRole.TEST and query.intent is QueryIntent.IMPLEMENTATION):
        factor *= path_factor(query, settings, path_words)(snippet.file_path)
    if query.intent is QueryIntent.IMPLEMENTATION:
        factor *= _implementation_factor(role, settings)
    if query.exact:
        factor *= 1 + settings.exact_evidence_boost * exact_evidence(query.exact, snippet.text)
    return factor


def path_factor(query: UnderstoodQuery, settings: RankingConfig,
                path_words: PathWords | None) -> PathFactor:
    """The path factor of code files for ``query`` (:class:`PathFactor`), as the ranking's
    ``[ranking]`` boosts set it; the scan of files not indexed yet applies the same one."""
    return PathFactor(path_words, query.word_stems, query.area_stems,
                      settings.path_words_boost, settings.area_path_boost)


def definition_factor(label: str, symbols: Sequence[str], factor: float) -> float:
    """The step forward of a definition whose last name part the query names: ``factor``
    when the query writes its name whole (``order_created`` for the module's function,
    ``Manager.order_created`` for the method), its square root when the query names only
    the last part of a qualified name (``order_created`` for ``Manager.order_created``).

    A name defined once at a module's top level and again as methods of other classes (a
    plugin interface: saleor's ``order_created`` in ``order/actions.py`` and in each
    plugin) is asked for by its plain name to find the function; at equal factors the
    methods' files, which say the name more often, came first for 5 of 60 lookups."""
    written = {s.lower() for s in symbols}
    return factor if label.lower() in written else factor ** 0.5


def name_words_share(label: str, prose_stems: frozenset[str]) -> float:
    """The share of a definition name's words (``Session.get_adapter`` -> adapter: stop
    words such as get and the test of ``test_merge`` out, stemmed as the BM25 index stems)
    that the query writes as prose.

    Names say what code does, and a description of it tends to use the same words ("Return
    a copy of this jar" -> ``copy``, "Writes a heading into the buffer" ->
    ``write_heading``): the definition so named is likelier the answer than the class header
    or the caller that merely mentions the same things. Only the last part of a dotted
    label counts (the method, not its class)."""
    parts = _name_stems(label.rsplit(".", 1)[-1])
    return sum(1 for p in parts if p in prose_stems) / len(parts) if parts else 0.0


@functools.lru_cache(maxsize=16_384)
def _name_stems(name: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(light_stem(p) for p in split_identifier(name)
                               if len(p) >= MIN_WORD_LENGTH and p not in STOP_WORDS
                               and p not in _TEST_WORDS))


def _implementation_factor(role: FileRole, settings: RankingConfig) -> float:
    """Source first when a query asks for an implementation or a change."""
    return {FileRole.DOC: settings.implementation_doc_factor,
            FileRole.TEST: settings.implementation_test_factor,
            FileRole.CONFIG: settings.implementation_config_factor}.get(role, 1.0)


def _echo(snippet: ContextSnippet, query: UnderstoodQuery) -> bool:
    return (file_role(snippet.file_path, snippet.language) is not FileRole.SOURCE
            and echoes_query(query.exact, snippet.text))


def apply_boosts(snippets: Sequence[ContextSnippet], query: UnderstoodQuery,
                 settings: RankingConfig, path_words: PathWords | None = None
                 ) -> list[ContextSnippet]:
    """Snippets re-scored by :func:`boost_factor` and re-sorted; scores are divided by the
    best one when it passes 1 (not clipped: two boosted chunks keep their order).

    A chunk quoting the query (:func:`contextd.query.evidence.quotation_tier`) ranks above every
    chunk that does not, whatever its fused score: its score is lifted by its tier times the
    best score, then all are scaled back into [0, 1]. Except an *echo*: a file that is not
    source code holding the query between quotes (the project's README showing the very
    command, an example's sample input) repeats the question instead of answering it; it
    steps back (ECHO_FACTOR) behind the code it describes. A lookup's definition
    (:func:`defines_written_name`) is lifted the same way, by one tier. Before those tiers,
    any query but a lookup adds to a source chunk the share of its keywords that the file's
    name and folder spell (:mod:`contextd.query.file_stem`), times ``file_stem_share_boost``
    times the best score: a quoting chunk still ranks above every chunk lifted so."""
    scored = [(s, s.score * boost_factor(s, query, settings, path_words)) for s in snippets]
    top = max((score for _, score in scored), default=1.0) or 1.0
    if settings.file_stem_share_boost and not is_symbol_lookup(query.original):
        # Before the tiers, which then still lift every quoting chunk above it.
        scored = _add_stem_share(scored, query, top * settings.file_stem_share_boost)
        top = max((score for _, score in scored), default=1.0)
    if is_symbol_lookup(query.original):
        scored = [(s, score + top) if defines_written_name(s, query.original) else (s, score)
                  for s, score in scored]
        top = max((score for _, score in scored), default=1.0)
    if query.exact.phrases:
        scored = [(s, score * ECHO_FACTOR) if _echo(s, query) else
                  (s, score + top * quotation_tier(query.exact, s.text)) for s, score in scored]
        top = max((score for _, score in scored), default=1.0)
    scale = 1.0 / top if top > 1.0 else 1.0
    boosted = [dataclasses.replace(s, score=score * scale) for s, score in scored]
    return sorted(boosted, key=lambda s: -s.score)


def _add_stem_share(scored: list[tuple[ContextSnippet, float]], query: UnderstoodQuery,
                    weight: float) -> list[tuple[ContextSnippet, float]]:
    """``scored`` with each source chunk's score raised by ``weight`` times its file's
    :func:`stem_share` of the query's keywords (tests, docs and config keep theirs: a
    test file is named after the code it tests)."""
    keywords = query_keywords(query.original)
    return [(s, score + weight * stem_share(keywords, s.file_path))
            if file_role(s.file_path, s.language) is FileRole.SOURCE else (s, score)
            for s, score in scored]


@dataclass(frozen=True)
class FileHit:
    """A file ranked by the chunk hits inside it."""

    file_path: str
    score: float
    snippets: tuple[ContextSnippet, ...]


def is_symbol_lookup(query: str) -> bool:
    """A query that is one name and nothing else (``is_scalar_field``, ``Session.send``,
    ``Response``): it asks where that name is defined, not which files talk about it."""
    return bool(_TOKEN_RE.fullmatch(query.strip()))


def defines_written_name(snippet: ContextSnippet, lookup: str) -> bool:
    """Whether the chunk defines the very name a lookup writes, whole (its label is
    ``order_created`` for the lookup ``order_created``, ``Session.send`` for
    ``Session.send``): it is what the lookup asks for, so it ranks above every chunk that
    does not, however often those repeat the name (the import block of a schema that
    re-exports it, the method of the same name in each plugin, whose three providers' votes
    outweighed the function's two)."""
    return bool(snippet.label) and snippet.label.lower() == lookup.strip().rstrip("()").lower()


def aggregate_files(snippets: Sequence[ContextSnippet], settings: RankingConfig,
                    lookup: bool = False) -> list[FileHit]:
    """Files ranked by their best chunk plus a bounded step forward for a file whose further
    chunks match too (file coherence): a file with several relevant chunks beats one lucky
    hit of equal strength, never a clearly stronger one.

    A file's further chunks make up its *mass*: each counts in proportion to its own
    relevance (its score over the best candidate's) and decays geometrically
    (``file_aggregation_decay``): fused scores are rank-based and flat (with RRF's k = 60 the
    50th candidate keeps over half the score of the first), so four chunks from the tail,
    each a weak match, outweighed the file holding the two best ones (wagtail's
    ``api/v2/router.py`` came first that way for three commits about other endpoints). The
    step forward is ``file_coherence_share`` of the best candidate's score times the file's
    mass over the largest mass: the many references to a name in a caller's file once
    summed past the one chunk that defines it (fastapi: ``dependencies/utils.py`` over
    ``_compat/v2.py`` for the lookup ``is_scalar_field``). For a ``lookup``
    (:func:`is_symbol_lookup`) a file counts its best chunk alone: the file that defines the
    name is the answer, however often the others use it."""
    by_file: dict[str, list[ContextSnippet]] = {}
    for snippet in snippets:
        by_file.setdefault(snippet.file_path, []).append(snippet)
    top = max((s.score for s in snippets), default=0.0) or 1.0
    masses = {}
    for path, items in by_file.items():
        items.sort(key=lambda s: -s.score)
        masses[path] = sum(s.score * (s.score / top) * settings.file_aggregation_decay ** i
                           for i, s in enumerate(items[1:], start=1))
    largest = max(masses.values(), default=0.0) or 1.0
    step = 0.0 if lookup else settings.file_coherence_share * top / largest
    hits = [FileHit(path, items[0].score + step * masses[path], tuple(items))
            for path, items in by_file.items()]
    return sorted(hits, key=lambda h: (-h.score, h.file_path))
