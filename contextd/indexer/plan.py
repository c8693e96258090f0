"""Scan and plan: which files a run must read, in which order, and which are gone.

Change detection has two levels. The fast path compares size and mtime with ``file_state``:
equal means unchanged and the file is not even opened. Otherwise the worker reads the file and
compares the BLAKE3 of its bytes with the stored hash (the truth): equal content only refreshes
the stored mtime, it is never re-chunked or re-embedded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Iterable, Mapping, Sequence

from contextd.boundary.walk import FileEntry
from contextd.store.base import FileState

# The mtime recorded for content pushed through the service (``add_context``): no file on
# disk has it, so the next change or catch-up of a file that exists re-indexes it from disk,
# and a pushed document with no file behind it is not taken for a deleted file.
PUSHED_MTIME_NS = -1
SMALL_FILE_BYTES = 10 * 1024
LARGE_FILE_BYTES = 1024 * 1024
DOC_EXTENSIONS = frozenset({".md", ".markdown", ".rst", ".txt", ".adoc"})
TEST_DIRS = frozenset({"test", "tests", "testing", "__tests__", "spec", "specs"})
CONFIG_EXTENSIONS = frozenset({".yaml", ".yml", ".toml", ".json", ".xml", ".properties",
                               ".ini", ".cfg", ".csv"})


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


def is_test_path(path: str) -> bool:
    """Whether a path looks like a test (a ``test``/``tests`` directory, ``test_*``,
    ``*_test.*``, ``*.spec.*``, ``*.test.*``): tests answer fewer questions than the code
    they test, so they come after it."""
    parts = PurePosixPath(path).parts
    name = parts[-1].lower() if parts else ""
    stem = name.split(".", 1)[0]
    return (any(p.lower() in TEST_DIRS for p in parts[:-1]) or stem.startswith("test_")
            or stem.endswith("_test") or ".spec." in name or ".test." in name)


def priority(entry: FileEntry | FileTask, source_extensions: frozenset[str],
             recent: frozenset[str] = frozenset()) -> tuple:
    """Sort key of spec 004 §8.0 step 3: files touched recently in git first (the code being
    worked on), then small files (quick wins), source code, documentation, tests,
    configuration, other text, and large files last."""
    size = entry.size
    suffix = PurePosixPath(entry.path).suffix.lower()
    if size < SMALL_FILE_BYTES:
        bucket = 0
    elif size >= LARGE_FILE_BYTES:
        bucket = 6
    elif suffix in DOC_EXTENSIONS:
        bucket = 2
    elif suffix in source_extensions and not is_test_path(entry.path):
        bucket = 1
    elif suffix in source_extensions:
        bucket = 3  # tests
    elif suffix in CONFIG_EXTENSIONS:
        bucket = 4
    else:
        bucket = 5
    return entry.path not in recent, bucket, size, entry.path


def order_by_priority(entries: Iterable[FileEntry], source_extensions: Sequence[str],
                      recent: frozenset[str] = frozenset()) -> list[FileEntry]:
    """``entries`` in bootstrap priority order (``recent``: paths touched recently in git,
    see :mod:`contextd.indexer.recency`). The embedding stage follows the same order, as
    it embeds chunks in the order their files were first written."""
    exts = frozenset(e.lower() for e in source_extensions)
    return sorted(entries, key=lambda e: priority(e, exts, recent))


def in_scope(path: str, prefixes: Sequence[str] | None) -> bool:
    """Whether ``path`` is one of ``prefixes`` or lies under one (None: everything)."""
    if prefixes is None:
        return True
    return any(path == p or path.startswith(p.rstrip("/") + "/") or p in ("", ".")
               for p in prefixes)


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
    for entry in entries:
        if not in_scope(entry.path, prefixes):
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
                          if p not in present and in_scope(p, prefixes)
                          and state.mtime_ns != PUSHED_MTIME_NS)
    return plan
