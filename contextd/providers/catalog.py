"""In-memory views of the index that follow the store file by file.

Every database round trip costs ~1 ms on an idle machine and 7-12 ms on a loaded one, several
times the budget of a warm query, so the query path reads nothing from the store but its
generation counter:

- :class:`IncrementalIndex` is the pattern: :meth:`~IncrementalIndex.sync` asks the store
  what changed since the generation it last saw and re-reads only those files, before every
  query, so a write is visible to the very next query (never stale);
- :class:`ChunkCatalog` is the one shared by the providers of a module: chunk entries by id
  (everything the scope filters and rankings read, but not the texts), the paths of indexed
  files, and the definitions and references of the symbols table and links table, looked up
  by lower-cased name the way the symbol provider asks.

The texts are not held as Python strings. They were 85% of the catalog (two copies per
chunk, the text and the index text: ~280 MB of a 60k-chunk project such as fastapi); the
catalog writes them to a :class:`~contextd.providers.spool.Spool` (an unlinked file beside
the index) as it loads each file, keeps where each text lies, and reads back the few a query
shows (:meth:`ChunkCatalog.rows_by_id`: microseconds each, no database round trip).
"""

from __future__ import annotations

import bisect
import dataclasses
import struct
import sys
import threading
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from contextd.embedders.common import release_scratch_memory
from contextd.providers.spool import Spool
from contextd.store.base import KNOWLEDGE_PREFIX, ChunkRow, IndexStore

# (chunk_id, qualified name, kind, line): a definition as find_symbols returns it.
SymbolHit = tuple[str, str, str, int]
# Files whose chunks (texts included) a catalog load reads per store round trip: a few MB
# of text at a time, whatever the project's size.
FILES_PER_READ = 200
# The spool is rewritten with the live texts only when dead ones (of re-written or removed
# files) pass this many bytes and the live ones.
SPOOL_COMPACT_MIN_DEAD = 16 << 20


@dataclass(frozen=True, slots=True)
class ChunkEntry:
    """A stored chunk as the catalog keeps it: the fields of a
    :class:`~contextd.store.base.ChunkRow` that scopes, rankings and loads read, and where
    the rest lies in the spool (``size`` bytes at ``at``: see :func:`_packed`)."""

    chunk_id: str
    file_id: int
    file_path: str
    ordinal: int
    kind: str
    language: str
    start_line: int
    end_line: int
    tokens: int
    embed_hash: str
    at: int
    size: int


# The lengths of the text, the index text (0: the same as the text) and the label, before them.
_HEADER = struct.Struct("<III")


def _packed(row: ChunkRow) -> bytes:
    """What the spool holds of a chunk: its text, index text, label and parent (UTF-8)."""
    text, label = row.text.encode(), row.label.encode()
    index = b"" if row.index_text == row.text else row.index_text.encode()
    return b"".join((_HEADER.pack(len(text), len(index), len(label)), text, index, label,
                     row.parent.encode()))


def _unpacked(entry: ChunkEntry, data: bytes) -> ChunkRow:
    """The ChunkRow of an entry and its packed bytes."""
    text_end, index_bytes, label_bytes = _HEADER.unpack_from(data)
    text_end += _HEADER.size
    text = data[_HEADER.size:text_end].decode()
    index_end = text_end + index_bytes
    label_end = index_end + label_bytes
    return ChunkRow(entry.chunk_id, entry.file_id, entry.file_path, entry.ordinal, entry.kind,
                    data[index_end:label_end].decode(), entry.language, entry.start_line,
                    entry.end_line, entry.tokens, text,
                    data[text_end:index_end].decode() if index_bytes else text,
                    entry.embed_hash, data[label_end:].decode())


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
    """Chunk entries, file paths, definitions and references of the whole index, in memory;
    chunk texts in a spool.

    Shared by the providers of one module (~0.4 KB of memory per chunk) and by the in-memory
    indexes built from it (:meth:`entries_for_files`, :meth:`iter_chunks`). ``spool``: the
    folder of the texts' spool (None: in memory; see
    :func:`~contextd.providers.spool.spool_folder`).
    """

    def __init__(self, store: IndexStore, spool: Path | None = None):
        super().__init__(store)
        self.spool_folder = spool
        self.spool: Spool | None = None
        self._reset()

    def _reset(self) -> None:
        if self.spool is not None:
            self.spool.close()
        self.spool = Spool(self.spool_folder)
        self._live_bytes = 0
        self.rows: dict[str, ChunkEntry] = {}
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
        # A full load reads the knowledge documents' chunks too (file_states leaves them out).
        files = list(changed) if changed is not None else sorted(
            {*self._file_path, *(s.file_id for s in
                                 self.store.file_states(KNOWLEDGE_PREFIX).values())})
        for start in range(0, len(files), FILES_PER_READ):
            self._load_rows(self.store.chunks_for_files(files[start:start + FILES_PER_READ]))
        for file_id, chunk_id, name, kind, line in self.store.symbols_for_files(changed):
            entry = (name, chunk_id, kind, line)
            self._index(file_id, self._by_name, name.lower(), entry)
            self._index(file_id, self._by_short, _short(name).lower(), entry)
        for file_id, chunk_id, target in self.store.links_for_files(changed):
            entry = (chunk_id, target)
            self._index(file_id, self._refs, target.lower(), entry)
            self._index(file_id, self._refs_by_short, _short(target).lower(), entry)
        self._short_keys = None
        if self.spool.size - self._live_bytes > max(SPOOL_COMPACT_MIN_DEAD, self._live_bytes):
            self._compact_spool()
        if len(files) > FILES_PER_READ:
            # The rows read went to the spool; hand their freed heap back (glibc keeps it).
            release_scratch_memory()

    def _load_rows(self, rows: list[ChunkRow]) -> None:
        """Keep the entries of ``rows`` and append the rest to the spool (one write)."""
        blobs = [_packed(row) for row in rows]
        at = self.spool.append(b"".join(blobs))
        self._live_bytes += sum(map(len, blobs))
        intern = sys.intern
        for row, blob in zip(rows, blobs):
            # Path, kind and language interned: one string per file and value, not per chunk.
            self.rows[row.chunk_id] = ChunkEntry(
                row.chunk_id, row.file_id, intern(row.file_path), row.ordinal, intern(row.kind),
                intern(row.language), row.start_line, row.end_line, row.tokens, row.embed_hash,
                at, len(blob))
            self._file_chunks.setdefault(row.file_id, []).append(row.chunk_id)
            at += len(blob)

    def _compact_spool(self) -> None:
        """Rewrite the spool with the live texts only."""
        old, self.spool = self.spool, Spool(self.spool_folder)
        for chunk_id, entry in self.rows.items():
            at = self.spool.append(old.read(entry.at, entry.size))
            self.rows[chunk_id] = dataclasses.replace(entry, at=at)
        self._live_bytes = self.spool.size
        old.close()

    def _index(self, file_id: int, postings: _Postings, key: str, entry: tuple) -> None:
        postings.add(key, entry)
        self._file_entries.setdefault(file_id, []).append((postings, key, entry))

    def _drop_file(self, file_id: int) -> None:
        for chunk_id in self._file_chunks.pop(file_id, ()):
            entry = self.rows.pop(chunk_id, None)
            if entry is not None:
                self._live_bytes -= entry.size
        for postings, key, entry in self._file_entries.pop(file_id, ()):
            postings.remove(key, entry)

    def _row(self, entry: ChunkEntry) -> ChunkRow:
        """The stored chunk of an entry, read back from the spool (caller holds the lock: a
        compaction swaps the spool)."""
        return _unpacked(entry, self.spool.read(entry.at, entry.size))

    # ----- reading (each call first catches up with the store) ---------------------------
    def rows_by_id(self, chunk_ids: Iterable[str], generation: int | None = None
                   ) -> dict[str, ChunkRow]:
        """Stored chunks by id, texts included (ids no longer stored are left out)."""
        with self.lock:
            self.sync(generation)
            rows = self.rows
            return {cid: self._row(rows[cid]) for cid in chunk_ids if cid in rows}

    def text_of(self, chunk_id: str) -> str | None:
        """The stored text of one chunk (None: not stored), read back from the spool: for a
        ranking step that compares a few texts (near-copies), without a whole row's read."""
        with self.lock:
            entry = self.rows.get(chunk_id)
            return None if entry is None else self._row(entry).text

    def file_paths(self, generation: int | None = None) -> dict[str, int]:
        """Indexed paths → file ids (do not modify)."""
        with self.lock:
            self.sync(generation)
            return self.paths

    def entries_for_files(self, file_ids: Sequence[int] | None = None,
                          generation: int | None = None) -> list[ChunkEntry]:
        """Chunk entries (no texts) of the given files (None: every chunk) in path and
        ordinal order."""
        with self.lock:
            self.sync(generation)
            rows = self.rows
            return [rows[cid] for fid in self._ordered_files(file_ids)
                    for cid in self._file_chunks[fid]]

    def _ordered_files(self, file_ids: Sequence[int] | None) -> list[int]:
        """The given files (None: all) that have chunks, in path order."""
        wanted = self._file_chunks if file_ids is None else dict.fromkeys(file_ids)
        return sorted((fid for fid in wanted if fid in self._file_chunks),
                      key=lambda fid: self._file_path.get(fid, ""))

    def chunks_for_files(self, file_ids: Sequence[int], generation: int | None = None
                         ) -> list[ChunkRow]:
        """Stored chunks of the given files, texts included, in path and ordinal order (as
        :meth:`IndexStore.chunks_for_files`)."""
        with self.lock:
            return [self._row(entry) for entry in self.entries_for_files(file_ids, generation)]

    def iter_chunks(self, file_ids: Sequence[int] | None = None,
                    generation: int | None = None) -> Iterator[ChunkRow]:
        """Stored chunks of the given files (None: every chunk), texts included, in path and
        ordinal order, one at a time: a caller that reads every text (an index build) holds
        one at a time, not all. The entries are those of the moment of the call."""
        entries = self.entries_for_files(file_ids, generation)
        for start in range(0, len(entries), FILES_PER_READ):
            with self.lock:  # a compaction (under the lock) moves the texts
                current = [self.rows.get(e.chunk_id) for e in entries[start:start + FILES_PER_READ]]
                rows = [self._row(e) for e in current if e is not None]
            yield from rows

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
