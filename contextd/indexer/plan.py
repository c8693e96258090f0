"""Scan and plan: which files a run must read, in which order, and which are gone.

Change detection has two levels. The fast path compares size and mtime with ``file_state``:
equal means unchanged and the file is not even opened. Otherwise the worker reads the file and
compares the BLAKE3 of its bytes with the stored hash (the truth): equal content only refreshes
the stored mtime, it is never re-chunked or re-embedded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Callable, Iterable, Mapping, Sequence

from contextd.boundary.roles import FileRole, file_role
from contextd.boundary.walk import FileEntry
from contextd.chunkers.chunking import language_for
from contextd.store.base import FileState
from contextd.text.languages import path_suffix

# The mtime recorded for content pushed through the service (``add_context``): no file on
# disk has it, so the next change or catch-up of a file that exists re-indexes it from disk,
# and a pushed document with no file behind it is not taken for a deleted file.
PUSHED_MTIME_NS = -1
LARGE_FILE_BYTES = 1024 * 1024


@dataclass(frozen=True)
class FileTask:
    """One file a worker must read; ``known_hash`` is the stored content hash (None: new
    file, or a forced re-index)."""

    path: str
    abs_path: str
    size: int
    mtime_ns: int
    known_hash: str | None = None


@dataclass
class Plan:
    """The work of one run."""

    tasks: list[FileTask] = field(default_factory=list)
    unchanged: int = 0
    removed: list[str] = field(default_factory=list)
    seen: int = 0


# Bootstrap buckets by a file's role: source code first (what a first answer cut short by
# [owner] index_within_seconds must hold), then docs, tests, configuration.
ROLE_ORDER = {FileRole.SOURCE: 0, FileRole.DOC: 1, FileRole.TEST: 2, FileRole.CONFIG: 3}
LARGE_BUCKET = len(ROLE_ORDER)
EMPTY: Mapping[str, int] = MappingProxyType({})


def priority(entry: FileEntry | FileTask, source_extensions: frozenset[str],
             recent: Mapping[str, int] = EMPTY) -> tuple:
    """Sort key of the bootstrap order: source code, documentation, tests, configuration,
    large files last; within each, the ``bootstrap.priority_extensions`` first, then the
    files changed most often in recent git history (the code being worked on), then the
    smaller first (more files sooner). Roles come before size: on a 3,000-file project
    whose first answer must come within seconds, small files of any kind first would read
    translated docs and examples before the package they describe (issue 26)."""
    large = entry.size >= LARGE_FILE_BYTES
    bucket = LARGE_BUCKET if large else \
        ROLE_ORDER[file_role(entry.path, language_for(entry.path) or "")]
    preferred = path_suffix(entry.path).lower() in source_extensions
    return bucket, not preferred, -recent.get(entry.path, 0), entry.size, entry.path


def order_by_priority(entries: Iterable[FileEntry], source_extensions: Sequence[str],
                      recent: Mapping[str, int] = EMPTY) -> list[FileEntry]:
    """``entries`` in bootstrap priority order (``recent``: how often each path changed in
    recent git history, see :mod:`contextd.indexer.recency`). The embedding stage follows
    the same order, as it embeds chunks in the order their files were first written."""
    exts = frozenset(e.lower() for e in source_extensions)
    return sorted(entries, key=lambda e: priority(e, exts, recent))


def in_scope(path: str, prefixes: Sequence[str] | None) -> bool:
    """Whether ``path`` is one of ``prefixes`` or lies under one (None: everything)."""
    return scope(prefixes)(path)


def scope(prefixes: Sequence[str] | None) -> Callable[[str], bool]:
    """:func:`in_scope` for many paths against the same ``prefixes``: one set lookup per
    ancestor of a path instead of a comparison per prefix. A ``git checkout``'s watcher
    batch names ~750 paths; planning it against the stored files one prefix at a time was
    quadratic (issue 37)."""
    if prefixes is None or any(p in ("", ".") for p in prefixes):
        return lambda path: True
    wanted = frozenset(p.rstrip("/") for p in prefixes)

    def test(path: str) -> bool:
        if path in wanted:
            return True
        cut = path.rfind("/")
        while cut > 0:
            if path[:cut] in wanted:
                return True
            cut = path.rfind("/", 0, cut)
        return False

    return test


def plan_changes(entries: Iterable[FileEntry], states: Mapping[str, FileState],
                 force: bool = False, prefixes: Sequence[str] | None = None) -> Plan:
    """Compare the files on disk (``entries``, already through the Boundary) with the index.

    Files of ``states`` in scope but no longer among ``entries`` are removed (deleted, moved,
    or newly excluded by an ignore rule), except documents pushed through the service with no
    file on disk (``PUSHED_MTIME_NS``; ``delete_context`` removes those). ``force`` re-reads
    every file in scope.
    """
    plan = Plan()
    present: set[str] = set()
    inside = scope(prefixes)
    for entry in entries:
        if not inside(entry.path):
            continue
        plan.seen += 1
        present.add(entry.path)
        state = states.get(entry.path)
        if state is not None and not force and state.size_bytes == entry.size \
                and state.mtime_ns == entry.mtime_ns:
            plan.unchanged += 1
            continue
        known = None if force or state is None else state.content_hash
        plan.tasks.append(FileTask(entry.path, str(entry.abs_path), entry.size,
                                   entry.mtime_ns, known))
    plan.removed = sorted(p for p, state in states.items()
                          if p not in present and inside(p)
                          and state.mtime_ns != PUSHED_MTIME_NS)
    return plan
