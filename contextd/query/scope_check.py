"""Filters that cannot match are refused with the reason, instead of answering nothing.

``--lang py`` (the language is called ``python``), ``--kind function`` (the kind is
``CODE_FUNCTION``) or a ``--path`` naming no indexed file would otherwise give 0 hits and no
word why; a person retries other words, an agent concludes the code is not there. Each check names
the filter and the values it could take.
"""

from __future__ import annotations

from typing import Iterable

from contextd.errors import UsageError
from contextd.providers.base import path_matches
from contextd.records import ChunkKind, ContextScope

# At most this many known values are listed in a message.
MAX_LISTED = 30


def _listed(values: Iterable[str]) -> str:
    values = sorted(values)
    more = f" and {len(values) - MAX_LISTED} more" if len(values) > MAX_LISTED else ""
    return ", ".join(values[:MAX_LISTED]) + more


def check_scope(scope: ContextScope, indexed_languages: Iterable[str],
                indexed_paths: Iterable[str]) -> None:
    """Raise :class:`UsageError` for the first filter of ``scope`` that no indexed chunk can
    satisfy. Checked only on a non-empty index: an empty one is still being built, and says
    so through its own note."""
    languages = {lang.lower() for lang in indexed_languages}
    unknown = [lang for lang in scope.languages if lang.lower() not in languages]
    if unknown and languages:
        raise UsageError(f"language filter {', '.join(map(repr, unknown))} matches no indexed "
                         f"chunk (--lang, scope.languages); indexed languages: "
                         f"{_listed(languages)}")
    kinds = {kind.value for kind in ChunkKind}
    unknown = [kind for kind in scope.kinds if kind.upper() not in kinds]
    if unknown:
        raise UsageError(f"kind filter {', '.join(map(repr, unknown))} is not a chunk kind "
                         f"(--kind, scope.kinds); kinds: {_listed(kinds)}")
    if scope.paths:
        paths = list(indexed_paths)
        if paths and not any(path_matches(path, pattern) for path in paths
                             for pattern in scope.paths):
            raise UsageError(f"path filter {', '.join(map(repr, scope.paths))} matches no "
                             "indexed file (--path, scope.paths; paths are relative to the "
                             "project root, globs like 'src/**/*.py' work)")
