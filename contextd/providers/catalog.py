"""In-memory views of the index that follow the store file by file.

Every database round trip costs ~1 ms on an idle machine and 7-12 ms on a loaded one, several
times the budget of a warm query, so the query path reads nothing from the store but its
generation counter:

- :class:`ChunkCatalog` is the one shared by the providers of a module: chunk entries by id
  (everything the scope filters and rankings read, but not the texts), the paths of indexed
  files, and the definitions and references of the symbols table and links table, looked up
  by lower-cased name the way the symbol provider asks. :meth:`~ChunkCatalog.sync` asks the
  store what changed since the generation it last saw and re-reads only those files, before
  every query, so a write is visible to the very next query (never stale);
- :class:`CatalogFollower` is the pattern of the indexes built from the catalog (BM25, the
  vectors): they follow the catalog's journal of files taken in and dropped, not the store.

Taking in a large write costs ~80 µs a chunk (the catalog ~26, BM25 ~54), so the first answer
after the background owner read 40k chunks of a large project would wait 3-4 s for all of it. A
:meth:`~ChunkCatalog.catch_up` drops removed files and the old chunks of re-written ones at
once (cheap: dictionary removals), so what is searchable is never stale, only not complete
yet; it loads the written files for a bounded time, or only when few are written, and leaves
the rest ``waiting`` (contextd.query.catch_up decides which). A ``git checkout`` re-writes
hundreds of held files at once: fastapi's 739 (30k chunks) made an answer that loaded them
wait 10-14 s (issue 37).

The texts are not held as Python strings. They were 85% of the catalog (two copies per
chunk, the text and the index text: ~280 MB of a 60k-chunk project such as fastapi); the
catalog writes them to a :class:`~contextd.providers.spool.Spool` (an unlinked file beside
the index) as it loads each file, keeps where each text lies, and reads back the few a query
shows (:meth:`ChunkCatalog.rows_by_id`: microseconds each, no database round trip).
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import itertools
import logging
import struct
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

from contextd.embedders.scratch_memory import release_scratch_memory
from contextd.providers import catalog_snapshot
from contextd.providers.saved_pair import copy_bytes
from contextd.providers.spool import Spool
from contextd.store.base import KNOWLEDGE_PREFIX, ChunkRow, IndexStore

log = logging.getLogger(__name__)

# (chunk_id, qualified name, kind, line): a definition as find_symbols returns it.
SymbolHit = tuple[str, str, str, int]
# Files whose chunks (texts included) a catalog load reads per store round trip: a few MB
# of text at a time, whatever the project's size.
FILES_PER_READ = 200
# Files a time-bounded catch-up (the background thread's step) loads per read: an answer that
# arrives meanwhile waits for one such read, and the indexes built from the catalog then take
# the same files in (fastapi's translated docs pages: ~40 chunks a file).
FILES_PER_STEP = 50
# The spool is rewritten with the live texts only when dead ones (of re-written or removed
# files) pass this many bytes and the live ones.
SPOOL_COMPACT_MIN_DEAD = 16 << 20
# The catalog's changes a follower that syncs less often can still catch up on; one further
# behind loads everything again.
JOURNAL_LENGTH = 4096


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


class _Postings:
    """Lower-cased key → entries, with removal of single entries in O(1). A key with one
    entry holds it alone (most names are defined or referenced once: a dict per key was
    18 MB of wagtail's catalog); a key with more holds them in a dict."""

    def __init__(self) -> None:
        self.entries: dict[str, tuple | dict[tuple, None]] = {}

    def add(self, key: str, entry: tuple) -> None:
        held = self.entries.get(key)
        if held is None:
            self.entries[key] = entry
        elif isinstance(held, dict):
            held[entry] = None
        elif held != entry:
            self.entries[key] = {held: None, entry: None}

    def remove(self, key: str, entry: tuple) -> None:
        held = self.entries.get(key)
        if isinstance(held, dict):
            held.pop(entry, None)
            if not held:
                del self.entries[key]
        elif held is not None and held == entry:
            del self.entries[key]

    def get(self, key: str) -> Iterable[tuple]:
        held = self.entries.get(key)
        if held is None:
            return ()
        return held.keys() if isinstance(held, dict) else (held,)


def _short(name: str) -> str:
    """The last dotted part of a name (``RateLimiter.allow`` → ``allow``)."""
    return name.rsplit(".", 1)[-1]


@dataclass(frozen=True, slots=True)
class CatalogChange:
    """What one catalog update did: the files it (re)loaded (None: all, after a reset) and
    dropped, and whether the store's generation moved (vectors may have been written)."""

    loaded: tuple[int, ...] | None
    removed: tuple[int, ...]
    store_moved: bool


class ChunkCatalog:
    """Chunk entries, file paths, definitions and references of the whole index, in memory;
    chunk texts in a spool.

    Shared by the providers of one module (~0.4 KB of memory per chunk) and by the in-memory
    indexes built from it (:meth:`entries_for_files`, :meth:`iter_chunks`). ``spool``: the
    folder of the texts' spool (None: in memory; see
    :func:`~contextd.providers.spool.spool_folder`). ``waiting``: written files not taken in
    yet (see the module's docstring); ``version`` counts the updates in ``journal``.
    """

    def __init__(self, store: IndexStore, spool: Path | None = None,
                 snapshot: Path | None = None):
        self.store = store
        # Where the catalog is saved at close and loaded from (None: never; see
        # contextd.providers.catalog_snapshot); its updates that loaded or dropped files, and
        # how many there were when it was last saved or loaded from there.
        self.snapshot_folder = snapshot
        self._file_updates = 0
        self._saved_updates: int | None = None
        self.loaded_from_snapshot = False  # for stats and tests: where the first load came from
        self.generation = -1  # the store's, as of the last sync
        # Held by syncs and by readers, so a query never sees a half-applied update.
        self.lock = threading.RLock()
        self.spool_folder = spool
        self.spool: Spool | None = None
        self.waiting: dict[int, None] = {}  # (re)set by _reset
        self.version = 0
        self.journal: collections.deque[CatalogChange] = collections.deque(maxlen=JOURNAL_LENGTH)
        self._reset()

    def sync(self, generation: int | None = None) -> None:
        """Take in every file written since the last sync (files left waiting by a
        :meth:`catch_up` wait on; one written again is taken in)."""
        self.catch_up(generation, defer=False)

    def catch_up(self, generation: int | None = None, within_s: float | None = None,
                 defer: bool = True, give_way: Callable[[], bool] = lambda: False,
                 load_at_most: int | None = None, chunks_at_most: int | None = None) -> None:
        """Take in what was written. Removed files are dropped at once. ``defer`` (an
        answer's catch-up or the background's): a re-written file's old chunks are dropped
        at once too and it waits with the new files, so the catalog never holds a chunk that
        is not the store's; then the waiting files are loaded, none of them when more than
        ``load_at_most`` wait (None: any number), for at most ``within_s`` (None: all) and
        until ``give_way()`` says to stop, and no further read once ``chunks_at_most``
        chunks are loaded. ``defer=False``: every written file at once, waiting ones left."""
        with self.lock:
            current = self.store.generation() if generation is None else generation
            # A reader at a generation the background catch-up has already passed finds
            # nothing to take in (it would load what was written since at once).
            moved = current > self.generation or (current < self.generation and generation is None)
            if not moved and not (defer and self.waiting):
                return
            if self.generation < 0:
                if not self._load_snapshot(current):
                    self.apply(None, ())
                    self.generation = current
                self._log(None, (), True)
                if self.loaded_from_snapshot:  # saving it again would write the same
                    self._saved_updates = self._file_updates
                moved = current != self.generation
                if not moved and not (defer and self.waiting):
                    return
            loaded: list[int] = []
            removed: list[int] = []
            if moved:
                changes = self.store.changes_since(self.generation)
                changed = dict.fromkeys(changes.changed_file_ids)
                removed = list(changes.removed_file_ids)
                for file_id in (*removed, *changed):
                    self.waiting.pop(file_id, None)
                if defer:
                    removed.extend(f for f in changed if self._holds(f))
                    self.waiting.update(changed)
                    self.apply([], removed)
                else:
                    self.apply(list(changed), removed)
                    loaded.extend(changed)
                self.generation = changes.generation
            if defer and (load_at_most is None or len(self.waiting) <= load_at_most):
                loaded.extend(self._take_waiting(within_s, give_way, chunks_at_most))
            self._log(tuple(loaded), tuple(removed), moved)

    def waiting_paths(self) -> list[str]:
        """The paths of the files written but not taken in yet (``waiting``). An answer
        searches their text as it does the files not indexed yet
        (:mod:`contextd.query.unread_scan`), so a file left waiting is not hidden from it.
        Read without the lock, from a copy (one C call: no other thread runs meanwhile): an
        answer waited up to 0.6 s here for the background catch-up's step to end."""
        waiting, file_path = self.waiting.copy(), self._file_path
        return [file_path[f] for f in waiting if f in file_path]

    def is_current(self, generation: int | None) -> bool:
        """Whether a query at ``generation`` finds nothing to take in (files left waiting
        aside)."""
        return generation is not None and generation == self.generation

    # ----- the snapshot ---------------------------------------------------------------------
    def _states(self) -> dict[int, tuple[str, str]]:
        """file_id → (path, content hash) of every file the store holds, knowledge included."""
        states = [*self.store.file_states().values(),
                  *self.store.file_states(KNOWLEDGE_PREFIX).values()]
        return {s.file_id: (s.path, s.content_hash) for s in states}

    def _load_snapshot(self, current: int) -> bool:
        """Start from the saved catalog (the caller then takes in what was written since);
        False, having loaded nothing, when there is none or it is not this store's."""
        if self.snapshot_folder is None:
            return False
        try:
            snapshot = catalog_snapshot.load(self.snapshot_folder)
        except (OSError, ValueError, KeyError, IndexError, UnicodeDecodeError) as exc:
            log.info("saved catalog in %s unreadable (%s): loading it from the store",
                     self.snapshot_folder, exc)
            return False
        if snapshot is None or snapshot.generation > current:
            return False
        changes = self.store.changes_since(snapshot.generation)
        touched = {*changes.changed_file_ids, *changes.removed_file_ids, *snapshot.waiting}
        states = self._states()
        if any(states.get(f) != state for f, state in snapshot.files.items() if f not in touched) \
                or any(f not in snapshot.files for f in states if f not in touched):
            log.info("saved catalog in %s is not the store's: loading it from the store",
                     self.snapshot_folder)
            return False
        self._reset()
        copy_bytes(snapshot.texts, snapshot.texts_size, self.spool.append)
        entries, intern = snapshot.entries, sys.intern
        for chunk_id, embed_hash, ints, at, kind, language in zip(
                entries["chunk_ids"], entries["embed_hashes"], entries["ints"], entries["at"],
                entries["kinds"], entries["languages"]):
            file_id, ordinal, start_line, end_line, tokens, size = ints
            self.rows[chunk_id] = ChunkEntry(
                chunk_id, file_id, intern(snapshot.files[file_id][0]), ordinal, intern(kind),
                intern(language), start_line, end_line, tokens, embed_hash, at, size)
            self._file_chunks.setdefault(file_id, []).append(chunk_id)
            self._live_bytes += size
        self._index_symbols(snapshot.symbols)
        self._index_links(snapshot.links)
        self._set_paths()
        self.generation = snapshot.generation
        # Files it held that were written since are dropped and read again by the caller;
        # those it had not taken in yet are read now.
        for file_id in touched:
            self._drop_file(file_id)
        self.apply([f for f in snapshot.waiting if f in states], ())
        self.loaded_from_snapshot = True
        return True

    def save(self) -> None:
        """Write the catalog beside the index for the next process (nothing when it has no
        snapshot folder, was never loaded, or has loaded or dropped no file since it was
        loaded or saved). A failure costs the next process its head start only."""
        with self.lock:
            if self.snapshot_folder is None or self.generation < 0 \
                    or self._file_updates == self._saved_updates:
                return
            try:
                symbols = [(fid, chunk_id, name, kind, line)
                           for fid, defined in self._file_symbols.items()
                           for name, chunk_id, kind, line in defined]
                links = [(fid, *entry) for fid, made in self._file_links.items()
                         for entry in made]
                # The store's files now; one removed since the last sync still has entries
                # here (its hash unknown: the next load drops it as removed since).
                files = self._states()
                for file_id, chunk_ids in self._file_chunks.items():
                    files.setdefault(file_id, (self.rows[chunk_ids[0]].file_path, ""))
                catalog_snapshot.save(
                    self.snapshot_folder, self.generation, list(self.waiting),
                    list(self.rows.values()), lambda e: self.spool.read(e.at, e.size),
                    files, symbols, links)
                self._saved_updates = self._file_updates
            except OSError as exc:
                log.warning("could not save the catalog to %s: %s", self.snapshot_folder, exc)

    def _holds(self, file_id: int) -> bool:
        return file_id in self._file_chunks or file_id in self._file_symbols \
            or file_id in self._file_links

    def _take_waiting(self, within_s: float | None, give_way: Callable[[], bool],
                      chunks_at_most: int | None = None) -> list[int]:
        """Load waiting files, FILES_PER_STEP at a time (at least once unless ``give_way()``),
        for at most ``within_s`` and until ``chunks_at_most`` chunks are loaded; within_s
        None: all in one update (one read of the file list, and the heap handed back after
        it)."""
        taken: list[int] = []
        deadline = None if within_s is None else time.monotonic() + within_s
        step = FILES_PER_STEP if deadline is not None else len(self.waiting)
        chunks_before = len(self.rows)
        while self.waiting and not give_way() \
                and (not taken or deadline is None or time.monotonic() < deadline) \
                and (not taken or chunks_at_most is None
                     or len(self.rows) - chunks_before < chunks_at_most):
            files = list(itertools.islice(self.waiting, step))
            self.apply(files, (), paths_known=True)
            # Waiting until loaded: an answer reads the waiting paths without the lock.
            for file_id in files:
                del self.waiting[file_id]
            taken.extend(files)
        return taken

    def _log(self, loaded: tuple[int, ...] | None, removed: tuple[int, ...],
             store_moved: bool) -> None:
        self.version += 1
        self._file_updates += loaded is None or bool(loaded) or bool(removed)
        self.journal.append(CatalogChange(loaded, removed, store_moved))

    def changes_after(self, version: int) -> list[CatalogChange] | None:
        """The updates since ``version``, oldest first; None when the journal no longer
        reaches back so far or one of them reloaded everything (the caller loads all)."""
        if version >= self.version:
            return []
        first = self.version - version  # updates to return
        if first > len(self.journal):
            return None
        changes = list(self.journal)[-first:]
        return None if any(c.loaded is None for c in changes) else changes

    def _reset(self) -> None:
        if self.spool is not None:
            self.spool.close()
        self.spool = Spool(self.spool_folder)
        self._live_bytes = 0
        self.waiting = {}
        self.rows: dict[str, ChunkEntry] = {}
        self.paths: dict[str, int] = {}
        self._file_path: dict[int, str] = {}
        self._file_chunks: dict[int, list[str]] = {}
        # Per file: the definitions and references it contributed, so a re-written file is
        # dropped exactly (their keys are computed again then: a (postings, key, entry)
        # tuple per key held ~20 MB more, and a copy of each key, on wagtail's 62k chunks).
        self._file_symbols: dict[int, list[tuple[str, str, str, int]]] = {}
        self._file_links: dict[int, list[tuple[str, str]]] = {}
        self._by_name = _Postings()
        self._by_short = _Postings()
        self._refs = _Postings()
        self._refs_by_short = _Postings()
        self._short_keys: list[str] | None = None

    def apply(self, changed: Sequence[int] | None, removed: Sequence[int],
              paths_known: bool = False) -> None:
        """Drop ``removed`` and (re)load ``changed`` files; ``changed is None``: load all.
        ``paths_known``: the files' paths were read when the store last moved (waiting
        files), so the paths of every file are not read again (a step of the background
        catch-up after a checkout: a sixth of its catalog time on fastapi)."""
        if changed is None:
            self._reset()
        for file_id in set(removed) | set(changed or ()):
            self._drop_file(file_id)
        if not paths_known:
            self._set_paths()
        # A full load reads the knowledge documents' chunks too (file_states leaves them out).
        files = list(changed) if changed is not None else sorted(
            {*self._file_path, *(s.file_id for s in
                                 self.store.file_states(KNOWLEDGE_PREFIX).values())})
        for start in range(0, len(files), FILES_PER_READ):
            self._load_rows(self.store.chunks_for_files(files[start:start + FILES_PER_READ]))
        # A change's definitions and references are read a batch of files at a time too: a
        # checkout far away re-read 2,292 of wagtail's files, ~140k rows in one list.
        for batch in ([None] if changed is None else
                      [files[i:i + FILES_PER_READ] for i in range(0, len(files), FILES_PER_READ)]):
            self._index_symbols(self.store.symbols_for_files(batch))
            self._index_links(self.store.links_for_files(batch))
        if self.spool.size - self._live_bytes > max(SPOOL_COMPACT_MIN_DEAD, self._live_bytes):
            self._compact_spool()
        if len(files) > FILES_PER_READ:
            # The rows read went to the spool; hand their freed heap back (glibc keeps it).
            release_scratch_memory()

    def _set_paths(self) -> None:
        """Every indexed file, chunks or not (a few thousand short rows; only after a write)."""
        self.paths = {path: state.file_id for path, state in self.store.file_states().items()}
        self._file_path = {file_id: path for path, file_id in self.paths.items()}

    def _index_symbols(self, symbols: Iterable[tuple[int, str, str, str, int]]) -> None:
        """Definitions (file_id, chunk_id, name, kind, line), by qualified and short name."""
        intern, same = sys.intern, self._same_chunk_id
        for file_id, chunk_id, name, kind, line in symbols:
            entry = (intern(name), same(chunk_id), intern(kind), line)
            self._file_symbols.setdefault(file_id, []).append(entry)
            self._by_name.add(name.lower(), entry)
            self._by_short.add(_short(name).lower(), entry)
        self._short_keys = None

    def _index_links(self, links: Iterable[tuple[int, str, str]]) -> None:
        """References (file_id, chunk_id, target), by full and short target."""
        intern, same = sys.intern, self._same_chunk_id
        for file_id, chunk_id, target in links:
            entry = (same(chunk_id), intern(target))
            self._file_links.setdefault(file_id, []).append(entry)
            self._refs.add(target.lower(), entry)
            self._refs_by_short.add(_short(target).lower(), entry)

    def _same_chunk_id(self, chunk_id: str) -> str:
        """The catalog entry's own string for ``chunk_id`` (a definition or reference read
        from the store brings a copy of it: 80 bytes each)."""
        entry = self.rows.get(chunk_id)
        return chunk_id if entry is None else entry.chunk_id

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

    def _drop_file(self, file_id: int) -> None:
        for chunk_id in self._file_chunks.pop(file_id, ()):
            entry = self.rows.pop(chunk_id, None)
            if entry is not None:
                self._live_bytes -= entry.size
        for entry in self._file_symbols.pop(file_id, ()):
            self._by_name.remove(entry[0].lower(), entry)
            self._by_short.remove(_short(entry[0]).lower(), entry)
        for entry in self._file_links.pop(file_id, ()):
            self._refs.remove(entry[1].lower(), entry)
            self._refs_by_short.remove(_short(entry[1]).lower(), entry)

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
        for _, row in self.iter_read(self.entries_for_files(file_ids, generation)):
            yield row

    def iter_read(self, entries: Sequence[ChunkEntry]) -> Iterator[tuple[ChunkEntry, ChunkRow]]:
        """The chunks of ``entries`` as the catalog holds them now, each with the entry it
        was read from (one a file re-read since replaces; one dropped since is left out),
        FILES_PER_READ entries' texts at a time. An index that keeps what it computed from
        a text by its entry knows the text is still the same while the entry is."""
        for start in range(0, len(entries), FILES_PER_READ):
            with self.lock:  # a compaction (under the lock) moves the texts
                current = [self.rows.get(e.chunk_id) for e in entries[start:start + FILES_PER_READ]]
                read = [(e, self._row(e)) for e in current if e is not None]
            yield from read

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

    def neighbour_definitions(self, chunk_ids: Iterable[str], generation: int | None = None
                              ) -> dict[str, list[str]]:
        """Per chunk: the qualified names of the definitions of the file that holds it (the
        symbol provider reads a guess's neighbours as evidence of what its file is about)."""
        with self.lock:
            self.sync(generation)
            out: dict[str, list[str]] = {}
            for chunk_id in chunk_ids:
                entry = self.rows.get(chunk_id)
                if entry is not None:
                    out[chunk_id] = [name for name, *_rest in
                                     self._file_symbols.get(entry.file_id, ())]
            return out

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


class CatalogFollower:
    """An in-memory index built from the catalog's chunks (BM25, the vectors), kept in step
    with the catalog rather than the store.

    :meth:`sync` first syncs the catalog, then hands the files the catalog (re)loaded and
    dropped since the last sync (its journal, :meth:`ChunkCatalog.changes_after`) to
    :meth:`apply`; ``changed is None``: load all. Following the store instead, a follower
    would look for files the catalog has left waiting and miss them for good.
    """

    def __init__(self, catalog: ChunkCatalog):
        self.catalog = catalog
        self.store = catalog.store
        self.version = -1
        self.lock = threading.RLock()

    def sync(self, generation: int | None = None) -> None:
        """Bring the index up to the catalog (thread-safe)."""
        with self.lock:
            catalog = self.catalog
            catalog.sync(generation)
            with catalog.lock:
                version = catalog.version
                if version == self.version:
                    return
                changes = None if self.version < 0 else catalog.changes_after(self.version)
            # Outside the catalog's lock, so the catalog's readers (the symbol provider, the
            # scope filters) do not wait for this. A file the catalog re-reads or drops
            # meanwhile is named again by its next update, and taken in again then.
            if changes is None:
                self.apply(None, ())
            else:
                changed = dict.fromkeys(f for change in changes for f in change.loaded)
                self.apply(list(changed), [f for change in changes for f in change.removed])
                if any(change.store_moved for change in changes):
                    self.store_moved()
            self.version = version

    def is_current(self, generation: int | None) -> bool:
        """Whether a query at ``generation`` finds nothing to catch up on."""
        return self.catalog.is_current(generation) and self.version == self.catalog.version

    def store_moved(self) -> None:
        """The store was written since the last sync (after :meth:`apply` took in the files
        the catalog re-read): what the index waits for that is not a file may be there now
        (the vectors of chunks still missing one)."""

    def apply(self, changed: Sequence[int] | None, removed: Sequence[int]) -> None:
        """Drop ``removed`` and (re)load ``changed`` files; ``changed is None``: load all."""
        raise NotImplementedError
