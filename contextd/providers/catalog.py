"""In-memory views of the index that follow the store file by file.

Every database round trip costs ~1 ms on an idle machine and 7-12 ms on a loaded one, several
times the budget of a warm query, so the query path reads nothing from the store but its
generation counter:

- :class:`IncrementalIndex` is the pattern: :meth:`~IncrementalIndex.sync` asks the store
  what changed since the generation it last saw and re-reads only those files, before every
  query, so a write is visible to the very next query (never stale);
- :class:`ChunkCatalog` is the one shared by the providers of a module: chunk rows by id, the
  paths of indexed files, and the definitions and references of the symbols table and links
  table, looked up by lower-cased name the way the symbol provider asks.
"""

from __future__ import annotations

import bisect
import threading
from collections import defaultdict
from typing import Iterable, Sequence

from contextd.store.base import ChunkRow, IndexStore

# (chunk_id, qualified name, kind, line): a definition as find_symbols returns it.
SymbolHit = tuple[str, str, str, int]


class IncrementalIndex:
    """Keeps an in-memory structure in step with the store, file by file.

    :meth:`sync` asks the store what changed since the last generation seen and hands the
    removed and re-written file ids to :meth:`apply`; it runs before every query, so a write
    is visible to the next query. Cost: nothing when the generation did not move (the store
    keeps it in memory), one small SQL query plus the changed files' rows when it did.
    """

    def __init__(self, store: IndexStore):
        self.store = store
        self.generation = -1
        # Held by sync and by readers, so a query never sees a half-applied update.
        self.lock = threading.RLock()

    def sync(self, generation: int | None = None) -> None:
        """Bring the structure up to date with the store (thread-safe); ``generation`` is the
        store's current one when the caller has just read it."""
        with self.lock:
            current = self.store.generation() if generation is None else generation
            if current == self.generation:
                return
            if self.generation < 0:
                self.apply(None, ())
                self.generation = current
                return
            changes = self.store.changes_since(self.generation)
            # Once each: a file re-written while still missing vectors is both changed and
            # an extra file, and loading its rows twice put each chunk in the index twice
            # (the next change of the file then failed with a KeyError on a chunk id).
            self.apply(list(dict.fromkeys([*changes.changed_file_ids,
                                           *self.extra_file_ids()])),
                       changes.removed_file_ids)
            self.generation = changes.generation

    def is_current(self, generation: int | None) -> bool:
        """Whether a query at ``generation`` finds nothing to catch up on."""
        return generation is not None and generation == self.generation

    def extra_file_ids(self) -> Sequence[int]:
        """Files to re-read on any change even if not re-written (e.g. still missing vectors)."""
        return ()

    def apply(self, changed: Sequence[int] | None, removed: Sequence[int]) -> None:
        """Drop ``removed`` and (re)load ``changed`` files; ``changed is None``: load all."""
        raise NotImplementedError


class _Postings:
    """Lower-cased key → entries, with removal of single entries in O(1)."""

    def __init__(self) -> None:
        self.entries: dict[str, dict[tuple, None]] = defaultdict(dict)

    def add(self, key: str, entry: tuple) -> None:
        self.entries[key][entry] = None

    def remove(self, key: str, entry: tuple) -> None:
        bucket = self.entries.get(key)
        if bucket is not None:
            bucket.pop(entry, None)
            if not bucket:
                del self.entries[key]

    def get(self, key: str) -> Iterable[tuple]:
        bucket = self.entries.get(key)
        return bucket.keys() if bucket else ()


def _short(name: str) -> str:
    """The last dotted part of a name (``RateLimiter.allow`` → ``allow``)."""
    return name.rsplit(".", 1)[-1]


class ChunkCatalog(IncrementalIndex):
    """Chunk rows, file paths, definitions and references of the whole index, in memory.

    Shared by the providers of one module (one copy of ~35 MB of text per 100k chunks) and by
    the in-memory indexes built from the rows (:meth:`chunks_for_files`).
    """

    def __init__(self, store: IndexStore):
        super().__init__(store)
        self._reset()

    def _reset(self) -> None:
        self.rows: dict[str, ChunkRow] = {}
        self.paths: dict[str, int] = {}
        self._file_path: dict[int, str] = {}
        self._file_chunks: dict[int, list[str]] = {}
        # Per file: the (entry, keys) it contributed, so a re-written file is dropped exactly.
        self._file_entries: dict[int, list[tuple[_Postings, str, tuple]]] = {}
        self._by_name = _Postings()
        self._by_short = _Postings()
        self._refs = _Postings()
        self._refs_by_short = _Postings()
        self._short_keys: list[str] | None = None

    def apply(self, changed: Sequence[int] | None, removed: Sequence[int]) -> None:
        if changed is None:
            self._reset()
        for file_id in set(removed) | set(changed or ()):
            self._drop_file(file_id)
        # Every indexed file, chunks or not (a few thousand short rows; only after a write).
        self.paths = {path: state.file_id for path, state in self.store.file_states().items()}
        self._file_path = {file_id: path for path, file_id in self.paths.items()}
        for row in self.store.chunks_for_files(changed):
            self._file_chunks.setdefault(row.file_id, []).append(row.chunk_id)
            self.rows[row.chunk_id] = row
        for file_id, chunk_id, name, kind, line in self.store.symbols_for_files(changed):
            entry = (name, chunk_id, kind, line)
            self._index(file_id, self._by_name, name.lower(), entry)
            self._index(file_id, self._by_short, _short(name).lower(), entry)
        for file_id, chunk_id, target in self.store.links_for_files(changed):
            entry = (chunk_id, target)
            self._index(file_id, self._refs, target.lower(), entry)
            self._index(file_id, self._refs_by_short, _short(target).lower(), entry)
        self._short_keys = None

    def _index(self, file_id: int, postings: _Postings, key: str, entry: tuple) -> None:
        postings.add(key, entry)
        self._file_entries.setdefault(file_id, []).append((postings, key, entry))

    def _drop_file(self, file_id: int) -> None:
        for chunk_id in self._file_chunks.pop(file_id, ()):
            self.rows.pop(chunk_id, None)
        for postings, key, entry in self._file_entries.pop(file_id, ()):
            postings.remove(key, entry)

    # ----- reading (each call first catches up with the store) ---------------------------
    def rows_by_id(self, chunk_ids: Iterable[str], generation: int | None = None
                   ) -> dict[str, ChunkRow]:
        """Stored chunks by id (ids no longer stored are left out)."""
        with self.lock:
            self.sync(generation)
            rows = self.rows
            return {cid: rows[cid] for cid in chunk_ids if cid in rows}

    def file_paths(self, generation: int | None = None) -> dict[str, int]:
        """Indexed paths → file ids (do not modify)."""
        with self.lock:
            self.sync(generation)
            return self.paths

    def chunks_for_files(self, file_ids: Sequence[int] | None = None,
                         generation: int | None = None) -> list[ChunkRow]:
        """Stored chunks of the given files (None: every chunk) in path and ordinal order,
        as :meth:`IndexStore.chunks_for_files` returns them."""
        with self.lock:
            self.sync(generation)
            wanted = self._file_chunks if file_ids is None else dict.fromkeys(file_ids)
            ordered = sorted((fid for fid in wanted if fid in self._file_chunks),
                             key=lambda fid: self._file_path.get(fid, ""))
            return [self.rows[cid] for fid in ordered for cid in self._file_chunks[fid]]

    def find_symbols(self, names_lower: Sequence[str], prefixes_lower: Sequence[str] = (),
                     generation: int | None = None) -> list[SymbolHit]:
        """Definitions whose qualified or short name equals one of ``names_lower`` or whose
        short name starts with one of ``prefixes_lower``, ordered by name and chunk id (as
        :meth:`IndexStore.find_symbols`)."""
        with self.lock:
            self.sync(generation)
            found: dict[tuple, None] = {}
            for name in names_lower:
                found.update(dict.fromkeys(self._by_name.get(name)))
                found.update(dict.fromkeys(self._by_short.get(name)))
            for prefix in prefixes_lower:
                for key in self._keys_starting_with(prefix):
                    found.update(dict.fromkeys(self._by_short.get(key)))
        return [(chunk_id, name, kind, line) for name, chunk_id, kind, line in sorted(found)]

    def _keys_starting_with(self, prefix: str) -> list[str]:
        """Short names starting with ``prefix``, by binary search in the sorted names (sorted
        again only after a write)."""
        if self._short_keys is None:
            self._short_keys = sorted(self._by_short.entries)
        keys = self._short_keys
        start = bisect.bisect_left(keys, prefix)
        end = start
        while end < len(keys) and keys[end].startswith(prefix):
            end += 1
        return keys[start:end]

    def find_references(self, targets_lower: Sequence[str], generation: int | None = None
                        ) -> list[tuple[str, str]]:
        """Chunks referencing one of the names, by full or short (last dotted part) target:
        (src_chunk_id, target), ordered (as :meth:`IndexStore.find_references`)."""
        with self.lock:
            self.sync(generation)
            found: dict[tuple, None] = {}
            for name in targets_lower:
                found.update(dict.fromkeys(self._refs.get(name)))
                found.update(dict.fromkeys(self._refs_by_short.get(name)))
        return sorted(found)
