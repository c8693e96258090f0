"""Symbol provider: names in the query looked up in the symbols and links tables.

Candidates are pulled from the query text: `backticked` words, dotted names
(``RateLimiter.allow``, ``Client.#retryDelay``, ``Foo::bar`` read as ``Foo.bar``), CamelCase and
snake_case identifiers, names with a leading ``_``, ``#`` or ``$`` kept as written
(``_parse_opts`` is not ``parse_opts``), file names (``settings.yaml``, ``src/auth``), and — at a lower weight — plain words and adjacent word pairs joined the way
identifiers are written ("rate limiter" → ``ratelimiter``, ``rate_limiter``, and the prefix
``ratelimit``). Names are
matched exactly, case-insensitively and (for identifiers) by prefix; definitions come first,
then the chunks that reference them (callers, importers, subclasses) through the links table.
Both tables are read from the module's in-memory catalog, not from the database.

A definition found only through a plain prose word is a guess: in a change request ("handle
iterators in partial document forms") the word ``handle`` finds every ``Command.handle`` of a
project and ``document`` every ``class Document``. Such a match already scores half, but
reciprocal rank fusion reads only the rank, so the guess got the full first-rank vote of a name
written as code and outvoted the file the message is about: 5 of the 17 lost change-request
cases traced in benchmarks/scale/results_issue36.md (category A). Such a hit now carries a
trust below 1 (``vote_trust`` in its metadata, :data:`~contextd.query.fusion.VOTE_TRUST`) that
scales its vote in the fusion, not its rank here. Names written as code, joined word pairs,
references and one-word queries keep full trust, and so does a corroborated guess, because
some prose guesses are right (scaling every guess down lost them on held-out windows):
- its qualified name and its kind spell two or more of the message's words
  (``RelationLoader.load`` for "eager load relation strategy"; the ``table`` named ``orders``
  for "orders table schema": the kind is how a message names what it wants);
- or another definition of its file spells two of them by itself (``cancel_order`` beside
  ``class Order`` for "cancelling an order does not refund the payment": the file is about
  the message, the guess is its entry point). Read from the catalog's definitions of the
  file, not from a second look at the query.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from contextd.providers.base import (
    ContextProvider, ProviderQuery, ScopeFilter, snippet_from_row,
)
from contextd.providers.fulltext import STOPWORDS
from contextd.query.fusion import VOTE_TRUST
from contextd.query.understanding import split_identifier
from contextd.records import ContextScope, ContextSnippet, ProviderType, TokenBudget
from contextd.text.stemming import light_stem

# Match strengths, best first (scores in [0, 1]).
EXACT_CASE_SCORE = 1.0
EXACT_SCORE = 0.9
PREFIX_SCORE = 0.6
FILE_SCORE = 0.7
# Factors for weaker evidence that a word is meant as a name.
DOTTED_TAIL_FACTOR = 0.8
JOINED_WORDS_FACTOR = 0.8
PLAIN_WORD_FACTOR = 0.5
REFERENCE_FACTOR = 0.5
# Only names written as identifiers (not plain words) lead on to their references.
STRONG_NAME_WEIGHT = DOTTED_TAIL_FACTOR
MIN_PREFIX_LENGTH = 4
# How many of the query's words a plain-word guess's qualified name must spell to be trusted.
CORROBORATING_WORDS = 2
# A name's part and a query's word shorter than this spell each other only when equal.
MIN_SHARED_STEM = 5
MIN_PLAIN_WORD_LENGTH = 4
FILE_CHUNKS_PER_MATCH = 3

_BACKTICK_RE = re.compile(r"`([^`\n]+)`")
_WORD_RE = re.compile(r"[\w./\-#$:]+")
# What may wrap a name in prose ("see `x`.", "(foo)", "a::b:") but never belongs to it. A
# leading ``_``, ``#`` or ``$`` does: it is part of the name (private, JS private, PHP).
_NAME_EDGES = ".-/:"
_SIGILS = "_#$"
_CAMEL_RE = re.compile(r"[a-z0-9][A-Z]|[A-Z]{2,}[a-z]")


@dataclass(frozen=True)
class Candidate:
    """A name taken from the query: ``text`` as written, how much it is trusted to be a name,
    and whether prefix matches count."""

    text: str
    weight: float
    prefix: bool = False
    lower: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Lowered once: every stored name of a query's catalog scan is compared with it.
        object.__setattr__(self, "lower", self.text.lower())


def extract_candidates(query: str, extensions: frozenset[str], limit: int
                       ) -> tuple[list[Candidate], list[str]]:
    """(symbol candidates, file-name candidates) of a query, strongest first."""
    symbols: dict[str, Candidate] = {}
    files: list[str] = []

    def add(text: str, weight: float, prefix: bool = False) -> None:
        text = text.strip(_NAME_EDGES)
        key = text.lower()
        if text and (key not in symbols or symbols[key].weight < weight):
            symbols[key] = Candidate(text, weight, prefix and len(text) >= MIN_PREFIX_LENGTH)

    for quoted in _BACKTICK_RE.findall(query):
        add(quoted.strip("()").replace("::", "."), 1.0, prefix=True)
    plain: list[str] = []
    for raw in _WORD_RE.findall(_BACKTICK_RE.sub(" ", query)):
        word = raw.replace("::", ".").strip(_NAME_EDGES)
        suffix = "." + word.rsplit(".", 1)[-1].lower() if "." in word else ""
        if "/" in word or suffix in extensions:
            files.append(word)
            plain.append("")
        elif "." in word:
            add(word, 1.0)
            add(word.rsplit(".", 1)[-1], DOTTED_TAIL_FACTOR, prefix=True)
            plain.append("")
        elif "_" in word or word[:1] in _SIGILS or _CAMEL_RE.search(word):
            add(word, 1.0, prefix=True)
            plain.append("")
        elif word.lower() not in STOPWORDS:  # stopwords neither count nor break word pairs
            plain.append(word.lower())
            if len(word) >= MIN_PLAIN_WORD_LENGTH:
                add(word.lower(), PLAIN_WORD_FACTOR)
    for first, second in zip(plain, plain[1:]):
        if first and second:
            add(first + second, JOINED_WORDS_FACTOR)
            add(f"{first}_{second}", JOINED_WORDS_FACTOR)
            # "rate limiting" → prefix "ratelimit", which finds RateLimiter
            add(first + light_stem(second), JOINED_WORDS_FACTOR, prefix=True)
    ranked = sorted(symbols.values(), key=lambda c: -c.weight)
    return ranked[:limit], files


def _match_score(candidate: Candidate, name: str) -> float:
    """How well a stored qualified name matches a candidate (0: not at all)."""
    short = name.rsplit(".", 1)[-1]
    if candidate.text in (name, short):
        return EXACT_CASE_SCORE * candidate.weight
    if candidate.lower in (name.lower(), short.lower()):
        return EXACT_SCORE * candidate.weight
    if candidate.prefix and short.lower().startswith(candidate.lower):
        return PREFIX_SCORE * candidate.weight
    return 0.0


def query_stems(query: str) -> frozenset[str] | None:
    """The stemmed words of a query a plain-word guess is checked against; None for a
    one-word query, whose single word is meant as a name and is trusted in full."""
    words = _WORD_RE.findall(query)
    if len(words) <= 1:
        return None
    return frozenset(light_stem(word.lower()) for word in words)


def spelled(parts: Iterable[str], stems: frozenset[str]) -> int:
    """How many of the query's stemmed words the parts of a name spell: equal stems, or one
    the start of the other from :data:`MIN_SHARED_STEM` letters on ("cancelling" is stemmed
    ``cancell``, the part of ``cancel_order`` ``cancel``)."""
    count = 0
    part_stems = {light_stem(part.lower()) for part in parts}
    for stem in stems:
        if stem in part_stems or any(
                min(len(stem), len(part)) >= MIN_SHARED_STEM
                and (stem.startswith(part) or part.startswith(stem)) for part in part_stems):
            count += 1
    return count


def vote_trust(candidate: Candidate, name: str, kind: str, stems: frozenset[str] | None
               ) -> float:
    """How far a definition named ``name``, matched by ``candidate``, is believed in the fusion.

    Only a plain prose word is doubted (its weight, :data:`PLAIN_WORD_FACTOR`), unless the
    name's parts and its kind spell :data:`CORROBORATING_WORDS` or more of the query's words
    (the table ``orders`` for "orders table schema"). :meth:`SymbolProvider._corroborate`
    may still lift the doubt from what the file's other definitions spell.
    """
    if stems is None or candidate.weight > PLAIN_WORD_FACTOR:
        return 1.0
    parts = [*split_identifier(name), kind]
    return 1.0 if spelled(parts, stems) >= CORROBORATING_WORDS else candidate.weight


def corroborated_by_neighbours(neighbours: Iterable[str], stems: frozenset[str]) -> bool:
    """Whether another definition of a guess's file spells :data:`CORROBORATING_WORDS` of
    the query's words by itself (``OrderService.cancel_order`` beside ``class Order`` for
    "cancelling an order does not refund the payment"): the file is about the message."""
    return any(spelled(split_identifier(name), stems) >= CORROBORATING_WORDS
               for name in neighbours)


class SymbolProvider(ContextProvider):
    """Definitions and references of the names a query mentions."""

    id = "symbol"
    name = "Symbols (definitions and references)"
    type = ProviderType.SYMBOL

    def answers_from_memory(self, generation: int | None) -> bool:
        return self.context is not None and self.context.catalog.is_current(generation)

    def is_available(self) -> bool:
        """Not with ``index_ast = false``: the provider is then left out of every query."""
        return super().is_available() and self.settings.index_ast

    def stats(self) -> dict[str, Any]:
        return {} if self.context is None or self.settings.index_ast else {
            "disabled": "index_ast = false in [providers.symbol]"}

    @property
    def memory_index(self) -> Any:
        """The chunk catalog: definitions and references are looked up in its rows."""
        return self.context.catalog

    def query(self, query: ProviderQuery | str, scope: ContextScope, budget: TokenBudget
              ) -> list[ContextSnippet]:
        query = ProviderQuery.of(query)
        config = self.context.config
        extensions = frozenset(e.lower() for e in config.indexing.allowed_extensions)
        candidates, files = extract_candidates(query.text, extensions,
                                               config.ranking.max_symbol_candidates)
        scored: dict[str, tuple[int, float, dict[str, Any]]] = {}
        self._definitions(candidates, query_stems(query.text), scored, query.generation)
        self._files(files, scored, query.generation)
        if not scored:
            return []
        rows = self.context.catalog.rows_by_id(list(scored), query.generation)
        scope_filter = ScopeFilter(scope)
        ranked = sorted((cid for cid in scored if cid in rows and scope_filter.accepts_row(rows[cid])),
                        key=lambda cid: (scored[cid][0], -scored[cid][1], cid))
        return [snippet_from_row(rows[cid], scored[cid][1], self.id, scored[cid][2])
                for cid in ranked if scored[cid][1] >= query.min_score][:query.limit]

    def _definitions(self, candidates: list[Candidate], stems: frozenset[str] | None,
                     scored: dict[str, tuple[int, float, dict[str, Any]]],
                     generation: int | None) -> None:
        """Definitions (tier 0), each with the trust of the candidate that matched it
        (:func:`vote_trust`), then chunks referencing names written as identifiers (tier 2)."""
        if not candidates:
            return
        catalog = self.context.catalog
        exact = [c.lower for c in candidates]
        prefixes = [c.lower for c in candidates if c.prefix]
        found_names: dict[str, float] = {}
        for chunk_id, name, kind, _line in catalog.find_symbols(exact, prefixes, generation):
            best = max(candidates, key=lambda c: _match_score(c, name))
            score = _match_score(best, name)
            if score > 0 and score > scored.get(chunk_id, (0, 0.0))[1]:
                facts = {"symbol": name, "symbol_kind": kind, "symbol_score": round(score, 4)}
                trust = vote_trust(best, name, kind, stems)
                if trust < 1.0:
                    facts[VOTE_TRUST] = trust
                scored[chunk_id] = (0, score, facts)
            if any(c.weight >= STRONG_NAME_WEIGHT and _match_score(c, name) for c in candidates):
                short = name.rsplit(".", 1)[-1].lower()
                found_names[short] = max(found_names.get(short, 0.0), score)
        if stems is not None:
            self._corroborate(scored, stems, generation)
        for chunk_id, target in catalog.find_references(list(found_names), generation):
            if chunk_id in scored:
                continue
            short = target.rsplit(".", 1)[-1].lower()
            score = found_names.get(target.lower(), found_names.get(short, 0.0))
            scored[chunk_id] = (2, score * REFERENCE_FACTOR,
                                {"references": target,
                                 "symbol_score": round(score * REFERENCE_FACTOR, 4)})

    def _corroborate(self, scored: dict[str, tuple[int, float, dict[str, Any]]],
                     stems: frozenset[str], generation: int | None) -> None:
        """Full trust back to each doubted definition whose file holds another definition
        that spells the message (:func:`corroborated_by_neighbours`)."""
        doubted = [cid for cid, (_tier, _score, facts) in scored.items() if VOTE_TRUST in facts]
        if not doubted:
            return
        neighbours = self.context.catalog.neighbour_definitions(doubted, generation)
        verdicts: dict[tuple[str, ...], bool] = {}  # one per file: its chunks share the list
        for chunk_id, names in neighbours.items():
            key = tuple(names)
            if key not in verdicts:
                verdicts[key] = corroborated_by_neighbours(names, stems)
            if verdicts[key]:
                del scored[chunk_id][2][VOTE_TRUST]

    def _files(self, names: list[str], scored: dict[str, tuple[int, float, dict[str, Any]]],
               generation: int | None) -> None:
        """The first chunks of files the query names (tier 1)."""
        if not names:
            return
        catalog = self.context.catalog
        paths = catalog.file_paths(generation)
        wanted = [fid for path, fid in paths.items()
                  if any(path == n or path.endswith("/" + n) or path.startswith(n.rstrip("/") + "/")
                         for n in names)]
        shown: dict[int, int] = {}
        for row in catalog.entries_for_files(wanted, generation):
            shown[row.file_id] = shown.get(row.file_id, 0) + 1
            if shown[row.file_id] <= FILE_CHUNKS_PER_MATCH and row.chunk_id not in scored:
                scored[row.chunk_id] = (1, FILE_SCORE, {"file_match": row.file_path})
