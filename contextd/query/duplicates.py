"""Copies that crowd out the source: translations of one page and near-duplicate chunks.

A large project often holds the same text many times: fastapi's documentation exists in
fourteen languages (``docs/en/docs/tutorial/x.md``, ``docs/hi/docs/tutorial/x.md``...) whose
code blocks and English identifiers are the same, wagtail ships a ``locale/<lang>/`` catalog
per language, and vendored or generated copies repeat a file under another folder. Ranked as
they are, ten copies of one paragraph fill the top ten and push the code out.

Two rules, applied to the candidate pool after fusion and boosts:

- **translations step back**: a path whose folders hold a language code (``docs/hi/...``,
  ``locale/pt_BR/...``) belongs to a *translation group* when the same path exists under at
  least :data:`MIN_LANGUAGES` language codes (or under ``en`` and one other). In a group only
  the variant in the query's own language keeps its score (English when the group has no
  variant in it); the other variants are multiplied by :data:`TRANSLATION_FACTOR`. The
  query's language is read from its script (Devanagari, CJK, Cyrillic...) and, for Latin
  script, from a few function words, English by default;
- **near-duplicates collapse**: a chunk whose words are nearly those of a better-ranked chunk
  of another file (Jaccard similarity of their word sets at least
  :data:`NEAR_DUPLICATE_JACCARD`) is merged into it (its path named in
  ``metadata["duplicates"]``), as :func:`contextd.query.fusion.deduplicate` merges the
  overlapping chunks of one file.

Both rules read paths and texts only, never lists kept per repository.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections import defaultdict
from typing import Callable, Iterable, Mapping, Sequence, TypeVar

from contextd.query.per_catalog import derived_once
from contextd.records import ContextSnippet
from contextd.text.stemming import light_stem

# The same path under this many language codes makes a translation group (or under "en"
# and one other language).
MIN_LANGUAGES = 3
# Score factor of a translation the query did not ask for.
TRANSLATION_FACTOR = 0.25
# Word-set similarity from which two chunks of different files are one text twice.
NEAR_DUPLICATE_JACCARD = 0.8
# Chunks with fewer distinct words are too short to call copies (a one-line import).
MIN_DUPLICATE_WORDS = 12
# Only the best candidates are compared pairwise (what the answer can show).
NEAR_DUPLICATE_WINDOW = 80
DEFAULT_LANGUAGE = "en"
# How many times its limit a provider fetches when the project has translations, so that
# the copies it puts last do not leave it short of candidates.
TRANSLATION_DEPTH = 4
# Hits whose scores differ by at most this share are compared as possible copies
# (copies_last).
COPY_SCORE_TOLERANCE = 0.01
# Word-set similarity from which two chunks of one file are copies (copies_last): two small
# functions of one module share most of their words and still do different things.
COPY_JACCARD = 0.95

# ISO 639-1 codes (the two letters before an optional region or script: pt-BR, zh-hant,
# pt_BR, sr@latin).
_ISO_639_1 = frozenset("""
aa ab af ak am an ar as av ay az ba be bg bh bi bm bn bo br bs ca ce ch co cr cs cu cv cy da
de dv dz ee el en eo es et eu fa ff fi fj fo fr fy ga gd gl gn gu gv ha he hi ho hr ht hu hy
hz ia id ie ig ii ik io is it iu ja jv ka kg ki kj kk kl km kn ko kr ks ku kv kw ky la lb lg
li ln lo lt lu lv mg mh mi mk ml mn mr ms mt my na nb nd ne ng nl nn no nr nv ny oc oj om or
os pa pi pl ps pt qu rm rn ro ru rw sa sc sd se sg si sk sl sm sn so sq sr ss st su sv sw ta
te tg th ti tk tl tn to tr ts tt tw ty ug uk ur uz ve vi vo wa wo xh yi yo za zh zu
""".split())
_LOCALE_RE = re.compile(r"^([a-z]{2})(?:[-_@][A-Za-z]{2,8})*$")
_WORD_RE = re.compile(r"[^\W\d_]{2,}|\d+", re.UNICODE)

# Scripts that name a language by themselves (first match wins; kana before CJK ideographs).
_SCRIPTS = (
    (re.compile(r"[\u3040-\u30ff]"), "ja"),
    (re.compile(r"[\uac00-\ud7af]"), "ko"),
    (re.compile(r"[\u4e00-\u9fff]"), "zh"),
    (re.compile(r"[\u0900-\u097f]"), "hi"),
    (re.compile(r"[\u0600-\u06ff]"), "ar"),
    (re.compile(r"[\u0590-\u05ff]"), "he"),
    (re.compile(r"[\u0e00-\u0e7f]"), "th"),
    (re.compile(r"[\u0370-\u03ff]"), "el"),
    (re.compile(r"[\u0400-\u04ff]"), "ru"),
)
# Function words that tell the Latin-script languages apart (a query names code in English
# whatever its language, so only these count).
_FUNCTION_WORDS = {
    "es": frozenset("cómo como dónde donde qué por para los las del una uno cuando".split()),
    "fr": frozenset("comment où est les des une dans pour avec quand quel quelle".split()),
    "de": frozenset("wie wo ist der die das ein eine und wird werden mit nicht".split()),
    "pt": frozenset("como onde está os as um uma para com não quando são".split()),
    "tr": frozenset("nasıl nerede nedir bir ve ile için mı mi".split()),
    "it": frozenset("come dove il gli una per con quando sono".split()),
}
# Cyrillic script languages told apart by their own letters.
_UKRAINIAN_RE = re.compile(r"[іїєґІЇЄҐ]")


def locale_code(segment: str) -> str | None:
    """The language of a folder name that is a locale (``pt-BR`` → ``pt``, ``zh-hant`` →
    ``zh``), else None."""
    match = _LOCALE_RE.match(segment)
    if match and match.group(1) in _ISO_639_1:
        return match.group(1)
    return None


def _variants(path: str) -> Iterable[tuple[str, str]]:
    """(group key, language) for each folder of ``path`` that is a locale code."""
    parts = path.split("/")
    for i, part in enumerate(parts[:-1]):
        language = locale_code(part)
        if language:
            yield "/".join(parts[:i] + ["*"] + parts[i + 1:]), language


class TranslationGroups:
    """The translation groups of a set of paths: path → (group key, its language)."""

    def __init__(self, paths: Iterable[str]):
        members: dict[str, dict[str, str]] = defaultdict(dict)
        for path in paths:
            for key, language in _variants(path):
                members[key][path] = language
        self.member: dict[str, tuple[str, str]] = {}
        self.languages: dict[str, frozenset[str]] = {}
        for key, paths_by in members.items():
            languages = frozenset(paths_by.values())
            if len(languages) >= MIN_LANGUAGES or (
                    len(languages) >= 2 and DEFAULT_LANGUAGE in languages):
                self.languages[key] = languages
                for path, language in paths_by.items():
                    self.member.setdefault(path, (key, language))

    def preferred(self, path: str, query_language: str) -> bool:
        """Whether ``path`` is the variant a query in ``query_language`` should see (True
        for paths in no group)."""
        found = self.member.get(path)
        if found is None:
            return True
        key, language = found
        languages = self.languages[key]
        wanted = query_language if query_language in languages else DEFAULT_LANGUAGE
        return language == wanted or wanted not in languages


def translation_groups(paths: Mapping[str, int]) -> TranslationGroups:
    """The translation groups of a catalog's path mapping, found once per mapping (the
    catalog makes a new one after every write)."""
    return derived_once(paths, TranslationGroups)


Hit = TypeVar("Hit")


def own_language_first(hits: Sequence[Hit], path_of: Callable[[Hit], str | None],
                       groups: TranslationGroups, query: str, limit: int) -> list[Hit]:
    """A provider's hits (best first, fetched :data:`TRANSLATION_DEPTH` times deeper) with
    the translations the query did not ask for moved behind the others, cut to ``limit``:
    fourteen copies of one page must not use up its candidates."""
    if not groups.member:
        return list(hits[:limit])
    language = query_language(query)
    first, last = [], []
    for hit in hits:
        path = path_of(hit)
        (first if path is None or groups.preferred(path, language) else last).append(hit)
    return (first + last)[:limit]


@functools.lru_cache(maxsize=4096)
def query_language(text: str) -> str:
    """The natural language a query is written in (ISO 639-1), English by default."""
    for pattern, language in _SCRIPTS:
        if pattern.search(text):
            if language == "ru" and _UKRAINIAN_RE.search(text):
                return "uk"
            return language
    words = {w.lower() for w in _WORD_RE.findall(text)}
    best, hits = DEFAULT_LANGUAGE, 1  # two function words at least
    for language, function_words in _FUNCTION_WORDS.items():
        count = len(words & function_words)
        if count > hits:
            best, hits = language, count
    return best


def step_back_translations(snippets: Sequence[ContextSnippet], groups: TranslationGroups,
                           query: str) -> list[ContextSnippet]:
    """Snippets of translations the query did not ask for scored down
    (:data:`TRANSLATION_FACTOR`), then all re-sorted best first."""
    if not groups.member:
        return list(snippets)
    language = query_language(query)
    out = [s if groups.preferred(s.file_path, language) else dataclasses.replace(
        s, score=s.score * TRANSLATION_FACTOR,
        metadata={**s.metadata, "translation": groups.member[s.file_path][1]})
        for s in snippets]
    return sorted(out, key=lambda s: -s.score)


def word_set(text: str) -> frozenset[str]:
    """A text's light-stemmed lower-case words: what :func:`near_copies` compares."""
    return frozenset(light_stem(w.lower()) for w in _WORD_RE.findall(text))


def near_copies(mine: frozenset[str], other: frozenset[str],
                similarity: float = NEAR_DUPLICATE_JACCARD) -> bool:
    """Two word sets that are one text twice (Jaccard at least ``similarity``)."""
    return (len(mine) >= MIN_DUPLICATE_WORDS and len(other) >= MIN_DUPLICATE_WORDS
            and len(mine & other) >= similarity * len(mine | other))


def copies_last(hits: Sequence[Hit], score_of: Callable[[Hit], float],
                text_of: Callable[[Hit], str | None], file_of: Callable[[Hit], str | None],
                limit: int) -> list[Hit]:
    """A provider's hits (best first, fetched deeper than ``limit``) with the near-copies
    of a better hit of the same file moved behind the others, cut to ``limit``.

    fastapi's ``APIRouter.get``, ``.put``, ``.post``... (and ``FastAPI.get``...) carry the
    same long docstring eight times per class: for a question about OpenAPI, 32 of BM25's
    best 50 chunks were four texts, and the code that answers it was never a candidate.
    Copies score alike (same words, same length), so a hit is compared only with the better
    hits whose score is within :data:`COPY_SCORE_TOLERANCE` of its own. Copies in other
    files stay candidates: the pipeline merges them into the best one, naming their paths
    (:func:`collapse_near_duplicates`), and the one a query wants may be either (a module
    and its ``.pyi`` stub)."""
    first: list[Hit] = []
    last: list[Hit] = []
    words: dict[int, frozenset[str]] = {}  # of kept hits, made only when one scores alike

    def word_set(hit: Hit) -> frozenset[str]:  # copies share their words as written
        text = text_of(hit)
        return frozenset(_WORD_RE.findall(text.lower())) if text else frozenset()

    def kept_words(index: int) -> frozenset[str]:
        if index not in words:
            words[index] = word_set(first[index])
        return words[index]

    for hit in hits:
        if len(first) >= limit:
            last.append(hit)
            continue
        score = score_of(hit)
        path = file_of(hit)
        alike = [i for i, other in enumerate(first)
                 if abs(score - score_of(other)) <= COPY_SCORE_TOLERANCE * abs(score)
                 and file_of(other) == path]
        if alike:
            mine = word_set(hit)
            if any(near_copies(mine, kept_words(i), COPY_JACCARD) for i in alike):
                last.append(hit)
                continue
        first.append(hit)
    return (first + last)[:limit]


def collapse_near_duplicates(snippets: Sequence[ContextSnippet]) -> list[ContextSnippet]:
    """Snippets (best first) without the near-copies of a better one in another file: the
    better one keeps its place and names the copies' paths in ``metadata["duplicates"]``."""
    kept: list[ContextSnippet] = []
    words: list[frozenset[str]] = []
    for position, snippet in enumerate(snippets):
        if position >= NEAR_DUPLICATE_WINDOW:
            kept.append(snippet)
            continue
        mine = word_set(snippet.text)
        target = None
        if len(mine) >= MIN_DUPLICATE_WORDS:
            for index, other in enumerate(words):
                if kept[index].file_path != snippet.file_path and near_copies(mine, other):
                    target = index
                    break
        if target is None:
            kept.append(snippet)
            words.append(mine)
            continue
        first = kept[target]
        copies = list(first.metadata.get("duplicates", ())) + [snippet.file_path]
        kept[target] = dataclasses.replace(
            first, providers=tuple(dict.fromkeys(first.providers + snippet.providers)),
            metadata={**first.metadata, "duplicates": list(dict.fromkeys(copies))})
    return kept
