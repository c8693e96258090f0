"""Full-text provider: BM25 (Okapi) over code-aware tokens, in memory and incremental.

Tokenisation splits identifiers the way programmers read them (``parseHTTPResponse`` →
``parse``, ``http``, ``response``; ``max_retries`` → ``max``, ``retries``) and keeps the whole
identifier as a token too, so an exact identifier outranks a chance co-occurrence of its
parts. A light suffix stemmer lets "tokens"/"token" and "validated"/"validate" meet.

The index (:class:`BM25Index`) holds postings per term and document lengths per slot; files are
removed and re-added as the store changes, so it is never stale and never fully rebuilt after
the first load. Scores equal ``rank_bm25.BM25Okapi`` on the same tokens (tests/test_bm25.py),
including its treatment of negative IDF (replaced by ε × the average IDF), with one
difference: a zero IDF is replaced too, and the average never counts below MIN_AVERAGE_IDF.
In a project of one or two files every word's IDF is 0 or below, and rank_bm25 scores a
literal match 0: ``contextd query "value added tax"`` on a one-file project found nothing.

A query costs one vectorised add per query term: each term's BM25 contribution to every
document containing it (slots and weights as numpy arrays) is computed once and kept until
the next change of the index, and only the best ``limit`` scores are sorted.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import threading
import time
from itertools import chain, count
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from contextd.embedders.scratch_memory import large_transient, transient
from contextd.providers.base import (
    ContextProvider, ProviderQuery, ScopeFilter, snippet_from_row,
)
from contextd.providers.catalog import (FILES_PER_READ, CatalogFollower, ChunkCatalog,
                                        ChunkEntry)
from contextd.providers.saved_pair import snapshot_folder
from contextd.providers.source_share import is_source, with_source_share
from contextd.query.catch_up import wait_until_no_answer
from contextd.query.duplicates import (
    TRANSLATION_DEPTH, copies_last, own_language_first, translation_groups,
)
from contextd.records import ContextScope, ContextSnippet, ProviderType, TokenBudget
from contextd.text.stemming import light_stem
from contextd.store.base import ChunkRow

log = logging.getLogger(__name__)

# BM25 Okapi parameters: rank_bm25's defaults, the usual choice for short documents.
BM25_K1 = 1.5
BM25_B = 0.75
BM25_EPSILON = 0.25
# The floor of the average IDF behind the weight of a very common term: in a corpus of a few
# documents the average itself is 0 or below, and every term would weigh nothing.
MIN_AVERAGE_IDF = 1.0
MIN_TOKEN_LENGTH = 2
_SPLIT_CACHE_SIZE = 200_000
# The BM25 arrays kept beside the index (FullTextIndex); TOKENS_VERSION names the tokens they
# hold: bump it with any change to code_tokens or document_text, and saved indexes are rebuilt.
SAVED_INDEX = "bm25.npz"
TOKENS_VERSION = 1
# Fold the delta into the arrays and save again past this many added documents or this share
# of the frozen ones, at most once per RESAVE_INTERVAL_S: while an owner reads a large
# project (8k to 90k chunks in half a minute) every query found the delta past the share and
# paid a fold and a save (~0.7 s at 60k chunks) on top of its catch-up.
RESAVE_MIN_DOCS = 2000
RESAVE_SHARE = 0.1
RESAVE_INTERVAL_S = 30.0
# The most chunks tokenised ahead of the index's lock (FullTextIndex._prepare): a
# ``git checkout`` on fastapi re-wrote 30k; their tokens are held until applied (~1 KB
# a chunk), and the rest are tokenised under the lock as before.
PREPARE_MAX_CHUNKS = 16_384
# Documents counted together by BM25Index.build: big enough for numpy to pay, small enough
# that a batch's token arrays stay a few MB.
BUILD_BATCH_DOCS = 4096
# Frozen postings written together by BM25Index.fold: the scratch of one piece (its sort,
# ~30 bytes a posting) stays a few MB however large the index.
FOLD_PIECE_POSTINGS = 262_144
# Entries per block of the delta's log (12 bytes each): the log grows a block at a time, never
# by copying itself (a log of 3M postings grown by half again held 2.5 times itself while it
# was copied), and a block whose documents were all removed is handed back.
LOG_BLOCK_ENTRIES = 65_536
_NO_SLOTS = np.zeros(0, dtype=np.int64)
_NO_TF = np.zeros(0, dtype=np.float32)
_NO_ENTRIES = np.zeros(0, dtype=np.int32)

# A run of identifier characters (``[A-Za-z0-9_]+``): an identifier, or digits, or digits then
# an identifier. The runs of a text are its UTF-8 bytes with every other byte made a blank
# (one bytes.translate; a non-ASCII character's bytes are all >= 0x80, so it separates runs
# as it did for the pattern), split: a third of the time of the pattern's findall, which
# was most of the BM25 build (issue 37).
_RUN_BYTES = bytes(b if chr(b).isascii() and (chr(b).isalnum() or b == ord("_")) else 32
                   for b in range(256))
_DIGITS = "0123456789"
_CAMEL_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
STOPWORDS = frozenset("""
a an and are as at be by can do does for from how i if in into is it its of on or so that the
their then there these this to was what when where which while who why will with you your
""".split())


class _RunTokens(dict):
    """Run -> its tokens, made on first need and kept (cleared whole past
    _SPLIT_CACHE_SIZE runs): a plain dict, looked up in C by ``map``, where a hit of
    ``lru_cache`` (its key and its recency list) cost twice as much (issue 37)."""

    def __missing__(self, run: str) -> tuple[str, ...]:
        if len(self) >= _SPLIT_CACHE_SIZE:
            self.clear()
        tokens = self[run] = _run_tokens(run)
        return tokens


def _run_tokens(run: str) -> tuple[str, ...]:
    """The tokens of one run of identifier characters: its leading digits are a number of
    their own, the rest an identifier (``2fa`` is ``2`` and ``fa``, as the pattern
    ``[A-Za-z_][A-Za-z0-9_]*|[0-9]+`` reads it). Runs are found by a simpler rule than
    that alternation, and their tokens cached whole (_RUN_TOKENS)."""
    rest = run.lstrip(_DIGITS)
    if len(rest) == len(run):
        return _identifier_tokens(run)
    number = _identifier_tokens(run[:len(run) - len(rest)])
    return number + _identifier_tokens(rest) if rest else number


def _identifier_tokens(identifier: str) -> tuple[str, ...]:
    parts = [p.lower() for piece in identifier.split("_") for p in _CAMEL_RE.findall(piece)]
    whole = identifier.lower().strip("_")
    out = [whole] if len(whole) >= MIN_TOKEN_LENGTH and whole not in STOPWORDS else []
    if len(parts) > 1:
        out.extend(light_stem(p) for p in parts
                   if len(p) >= MIN_TOKEN_LENGTH and p not in STOPWORDS)
    elif out:
        out[0] = light_stem(whole)
    return tuple(out)


_RUN_TOKENS = _RunTokens()


def code_tokens(text: str) -> list[str]:
    """Code-aware tokens of a text: whole identifiers plus their camelCase/snake_case parts,
    lower-cased and lightly stemmed, stopwords and one-character tokens dropped."""
    # Chained in C: a Python loop over the identifiers was a third of the BM25 build.
    runs = text.encode("utf-8", "surrogatepass").translate(_RUN_BYTES).decode("ascii").split()
    return list(chain.from_iterable(map(_RUN_TOKENS.__getitem__, runs)))


def _batch_postings(batch: list[Sequence[str]], first_slot: int,
                    lookup: Callable[[str], int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The postings of a batch of documents' tokens, the first in slot ``first_slot``: term
    ids, slots and term frequencies, one entry per distinct term of a document, ordered by
    slot (then term id). ``lookup`` gives a term its id (a new term the next one)."""
    sizes = np.fromiter(map(len, batch), dtype=np.int64, count=len(batch))
    terms = np.fromiter(map(lookup, chain.from_iterable(batch)), dtype=np.int64,
                        count=int(sizes.sum()))
    docs = np.repeat(np.arange(len(batch), dtype=np.int64), sizes)
    pairs, tfs = np.unique((docs << 32) | terms, return_counts=True)
    slots = (pairs >> 32).astype(np.int32) + np.int32(first_slot)
    return pairs & 0xFFFFFFFF, slots, tfs


class BM25Index:
    """BM25 Okapi over documents that can be added and removed one at a time.

    Two parts, as a search engine's segments: a *frozen* part in numpy arrays (the postings
    of every term in compressed-sparse-row form: term → slots and term frequencies), built in
    one pass by :meth:`build` or read back from a file by :meth:`load`, and a *delta* of the
    documents added since: a log of (term id, slot, tf) postings in blocks of three int32
    arrays, each document's postings one span of a block. Removing a frozen document only
    marks its slot dead; removing a delta document blanks its span (term id -1).
    :meth:`freeze` folds the delta and the dead slots into new arrays. The arrays are what makes a 60k-chunk index cheap to
    hold (~8 bytes per frozen posting, 12 per delta one, instead of a Python dict entry of
    ~100: after a far ``git checkout`` wagtail's delta of dicts held ~100 MB, issue 37) and
    to persist (:meth:`save`; loading is a few array reads).

    Every term has one id (:attr:`terms`); the frozen arrays have a row for the ids below
    :attr:`frozen_term_count`, and terms first seen in the delta take the next ids.
    """

    def __init__(self, k1: float = BM25_K1, b: float = BM25_B, epsilon: float = BM25_EPSILON):
        self.k1, self.b, self.epsilon = k1, b, epsilon
        self.terms: dict[str, int] = {}
        # The frozen part: term id → row of (indptr, slots, tf); slots ascending in a row.
        self.indptr = np.zeros(1, dtype=np.int64)
        self.frozen_slots = np.zeros(0, dtype=np.int32)
        self.frozen_tf = np.zeros(0, dtype=np.float32)
        self.frozen_live = np.zeros(0, dtype=bool)  # per frozen slot
        # The delta: blocks of the log, each (term ids, slots, tfs), the entries written and
        # those still live in it; a removed document's term ids are -1.
        self._blocks: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self._block_used: list[int] = []
        self._block_live: list[int] = []
        self._span = np.zeros((0, 3), dtype=np.int64)  # per delta slot: block, start, end
        self.doc_len = np.zeros(0, dtype=np.float64)
        self.slot_ids: list[str | None] = []
        self.slot_of: dict[str, int] = {}
        self.free: list[int] = []
        self.total_len = 0
        # Per term: (slots, BM25 contribution) at the current N and average length.
        self._weights: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._average_idf: float | None = None

    def __len__(self) -> int:
        return len(self.slot_of)

    @property
    def frozen_count(self) -> int:
        """Slots of the frozen part (live or dead); delta documents use the slots above."""
        return len(self.frozen_live)

    @property
    def frozen_term_count(self) -> int:
        """Term ids with a row in the frozen arrays."""
        return len(self.indptr) - 1

    @property
    def delta_count(self) -> int:
        """Documents added since the last freeze."""
        return len(self.slot_of) - int(np.count_nonzero(self.frozen_live))

    def term_count(self) -> int:
        """Distinct terms seen since the last fold (one of all whose documents were removed
        since is counted until the next). ``stats`` asks without the index lock while the
        indexer's thread adds terms: ``len`` of a dict is one step under the GIL."""
        return len(self.terms)

    # ----- building -------------------------------------------------------------------------
    @classmethod
    def build(cls, documents: Iterable[tuple[str, Sequence[str]]], **params: float
              ) -> "BM25Index":
        """A frozen index of ``documents`` ((id, tokens) pairs), in one pass. Each batch of
        documents is counted in numpy (its (slot, term) pairs made unique) instead of a
        Counter per document: a third less time on a 53k-chunk project, and arrays in place
        of lists of Python ints while the pass goes on (issue 37)."""
        index = cls(**params)
        # A new term gets the next id, in the order terms are first seen, looked up in C.
        term_ids: defaultdict[str, int] = defaultdict(count().__next__)
        lookup = term_ids.__getitem__
        ids: list[str] = []
        lengths: list[int] = []
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        batch: list[Sequence[str]] = []
        for doc_id, tokens in documents:
            ids.append(doc_id)
            lengths.append(len(tokens))
            batch.append(tokens)
            if len(batch) == BUILD_BATCH_DOCS:
                parts.append(_batch_postings(batch, len(ids) - len(batch), lookup))
                batch = []
        parts.append(_batch_postings(batch, len(ids) - len(batch), lookup))
        term_arr, slots, tfs = (np.concatenate(column) for column in zip(*parts))
        order = np.argsort(term_arr, kind="stable")  # stable: slots stay ascending per term
        indptr = np.zeros(len(term_ids) + 1, dtype=np.int64)
        np.cumsum(np.bincount(term_arr, minlength=len(term_ids)), out=indptr[1:])
        index._set_frozen(dict(term_ids), indptr, slots[order],
                          tfs.astype(np.float32)[order],
                          np.asarray(lengths, dtype=np.float64), ids)
        return index

    def _set_frozen(self, terms: dict[str, int], indptr: np.ndarray, slots: np.ndarray,
                    tf: np.ndarray, doc_len: np.ndarray, ids: list[str]) -> None:
        self.terms, self.indptr = terms, indptr
        self.frozen_slots, self.frozen_tf = slots, tf
        self.frozen_live = np.ones(len(ids), dtype=bool)
        self._blocks, self._block_used, self._block_live = [], [], []
        self._span = np.zeros((len(ids), 3), dtype=np.int64)
        self.doc_len = doc_len.copy()
        self.slot_ids = list(ids)
        self.slot_of = {doc_id: slot for slot, doc_id in enumerate(ids)}
        self.free = []
        self.total_len = int(doc_len.sum())
        self._changed()

    @large_transient  # not beside an embedding batch: the owner's peak (issue 37)
    def freeze(self) -> dict[str, int]:
        """Fold the delta and the dead slots into new arrays (documents get new slots), in
        the process's turn for large transients; returns id → new slot."""
        return self.fold()

    def fold(self) -> dict[str, int]:
        """:meth:`freeze` for a caller that holds the turn already
        (:func:`~contextd.embedders.scratch_memory.transient`).

        The new arrays are written a piece of terms at a time (:data:`FOLD_PIECE_POSTINGS`
        frozen postings with the delta's of the same terms), each piece ordered by a stable
        sort of its own: beside the old and new arrays only one piece's scratch is held.
        Sorting all postings at once held ~25 bytes more per posting (issue 37: +61 MB over
        the index for 1.7M postings, 31k documents of wagtail, 80% re-added as after a far
        checkout; +28 MB in pieces, and 0.6 CPU s instead of 6.8). In each term's row the
        frozen slots come first: the delta's are all above the frozen ones, and renumbering
        keeps the slots' order. A term no live document holds is dropped."""
        live = [slot for slot, doc_id in enumerate(self.slot_ids) if doc_id is not None]
        remap = np.full(len(self.slot_ids), -1, dtype=np.int32)
        remap[live] = np.arange(len(live), dtype=np.int32)
        n_terms, n_frozen = len(self.terms), self.frozen_term_count
        keep = self.frozen_live[self.frozen_slots]
        kept_before = np.zeros(len(keep) + 1, dtype=np.int32)
        np.cumsum(keep, dtype=np.int32, out=kept_before[1:])
        per_term = np.zeros(n_terms, dtype=np.int64)
        per_term[:n_frozen] = kept_before[self.indptr[1:]] - kept_before[self.indptr[:-1]]
        del kept_before
        for log_term, _slots, _tf in self._log():
            per_term += np.bincount(log_term[log_term >= 0], minlength=n_terms)
        held = per_term > 0
        indptr = np.zeros(int(np.count_nonzero(held)) + 1, dtype=np.int64)
        np.cumsum(per_term[held], out=indptr[1:])
        total = int(indptr[-1])
        slots = np.empty(total, dtype=np.int32)
        tf = np.empty(total, dtype=np.float32)
        at = 0
        for first, last in self._fold_pieces():
            # The piece's frozen rows (none past the frozen terms) and the delta's entries.
            row_first, row_last = min(first, n_frozen), min(last, n_frozen)
            lo, hi = int(self.indptr[row_first]), int(self.indptr[row_last])
            mine = keep[lo:hi]
            piece_terms = np.repeat(np.arange(row_first, row_last, dtype=np.int32),
                                    np.diff(self.indptr[row_first:row_last + 1]))[mine]
            piece = [(piece_terms, self.frozen_slots[lo:hi][mine], self.frozen_tf[lo:hi][mine])]
            for log_term, log_slots, log_tf in self._log():
                entries = np.flatnonzero((log_term >= first) & (log_term < last))
                piece.append((log_term[entries], log_slots[entries],
                              log_tf[entries].astype(np.float32)))
            piece_terms, piece_slots, piece_tf = (np.concatenate(column) for column in zip(*piece))
            del piece
            order = np.argsort(piece_terms, kind="stable")
            del piece_terms
            slots[at:at + len(order)] = remap[piece_slots[order]]
            tf[at:at + len(order)] = piece_tf[order]
            at += len(order)
        kept_terms = [term for term, held_ in zip(self.terms, held.tolist()) if held_]
        self._set_frozen({term: i for i, term in enumerate(kept_terms)}, indptr, slots, tf,
                         self.doc_len[live], [self.slot_ids[slot] for slot in live])
        return self.slot_of

    def _fold_pieces(self) -> Iterator[tuple[int, int]]:
        """Ranges of term ids [first, last) holding about :data:`FOLD_PIECE_POSTINGS` frozen
        postings each; the last one runs to the newest term (the delta's own terms)."""
        n_frozen, n_terms = self.frozen_term_count, len(self.terms)
        first = 0
        while first < n_frozen:
            target = self.indptr[first] + FOLD_PIECE_POSTINGS
            last = max(first + 1, int(np.searchsorted(self.indptr, target, side="right")) - 1)
            last = min(last, n_frozen)
            yield first, (last if last < n_frozen else n_terms)
            first = last
        if n_frozen == 0 and n_terms:
            yield 0, n_terms

    # ----- persistence ----------------------------------------------------------------------
    def save(self, path: Path, extra: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        """Write the index (frozen first) with ``extra`` per-slot arrays and ``meta``, atomically."""
        if self.delta_count or self.frozen_count != len(self.slot_of):
            self.freeze()
        write_arrays(path, self.arrays(extra, meta))

    def arrays(self, extra: dict[str, np.ndarray], meta: dict[str, Any]
               ) -> dict[str, np.ndarray]:
        """What :meth:`save` writes of a frozen index (no delta, no dead slot), none of it
        shared with the index as later changes touch it: the frozen postings are replaced by
        the next fold, never changed in place, and the per-slot arrays are copies. So the
        file can be written without the index's lock (an answer searching meanwhile)."""
        if self.delta_count or self.frozen_count != len(self.slot_of):
            raise ValueError("only a frozen index is written (fold it first)")
        return {
            "terms": np.frombuffer("\0".join(self.terms).encode(), dtype=np.uint8),
            "ids": np.frombuffer("\0".join(self.slot_ids).encode(), dtype=np.uint8),
            "indptr": self.indptr, "slots": self.frozen_slots, "tf": self.frozen_tf,
            "doc_len": self.doc_len[:self.frozen_count].copy(),
            "meta": np.frombuffer(json.dumps({**meta, "params": [self.k1, self.b,
                                                                  self.epsilon]}).encode(),
                                  dtype=np.uint8), **extra}

    @classmethod
    def load(cls, path: Path) -> tuple["BM25Index", dict[str, Any], Any]:
        """(index, meta, the file's arrays) of a file :meth:`save` wrote; OSError or
        ValueError when it cannot be read."""
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
        meta = json.loads(arrays["meta"].tobytes().decode())
        k1, b, epsilon = meta["params"]
        index = cls(k1, b, epsilon)
        terms_blob = arrays["terms"].tobytes().decode()
        terms = terms_blob.split("\0") if terms_blob else []
        ids_blob = arrays["ids"].tobytes().decode()
        ids = ids_blob.split("\0") if ids_blob else []
        if len(terms) + 1 != len(arrays["indptr"]) or len(ids) != len(arrays["doc_len"]):
            raise ValueError(f"{path}: inconsistent arrays")
        index._set_frozen({t: i for i, t in enumerate(terms)}, arrays["indptr"],
                          arrays["slots"], arrays["tf"], arrays["doc_len"], ids)
        return index, meta, arrays

    # ----- changes --------------------------------------------------------------------------
    def add(self, doc_id: str, tokens: Sequence[str]) -> None:
        """Index a document (replacing one with the same id): its postings go to the end of
        the delta's log."""
        if doc_id in self.slot_of:
            self.remove(doc_id)
        counts = Counter(tokens)
        terms = self.terms
        ids = [terms.setdefault(term, len(terms)) for term in counts]
        slot = self.free.pop() if self.free else self._grow()
        if not self._blocks or self._block_used[-1] + len(ids) > len(self._blocks[-1][0]):
            self._new_block(len(ids))
        block = len(self._blocks) - 1
        start = self._block_used[block]
        end = start + len(ids)
        log_term, log_slot, log_tf = self._blocks[block]
        log_term[start:end] = ids
        log_slot[start:end] = slot
        log_tf[start:end] = list(counts.values())
        self._block_used[block] = end
        self._block_live[block] += len(ids)
        self._span[slot] = block, start, end
        self.slot_ids[slot] = doc_id
        self.slot_of[doc_id] = slot
        self.doc_len[slot] = len(tokens)
        self.total_len += len(tokens)
        self._changed()

    def _changed(self) -> None:
        """Forget what depends on N, the average length or the postings."""
        self._weights.clear()
        self._average_idf = None

    def _grow(self) -> int:
        slot = len(self.slot_ids)
        if slot >= len(self.doc_len):
            more = max(64, slot)
            self.doc_len = np.concatenate([self.doc_len, np.zeros(more, np.float64)])
            self._span = np.concatenate([self._span, np.zeros((more, 3), np.int64)])
        self.slot_ids.append(None)
        return slot

    def _new_block(self, entries: int) -> None:
        """Start a block of the log with room for at least ``entries``; the last one is
        handed back if its documents were all removed meanwhile (a file re-written again
        and again, never enough for a fold, so does not grow the log)."""
        if self._blocks and not self._block_live[-1]:
            self._drop_block(len(self._blocks) - 1)
        size = max(LOG_BLOCK_ENTRIES, entries)
        self._blocks.append((np.empty(size, dtype=np.int32), np.empty(size, dtype=np.int32),
                             np.empty(size, dtype=np.int32)))
        self._block_used.append(0)
        self._block_live.append(0)

    def _drop_block(self, block: int) -> None:
        self._blocks[block] = (_NO_ENTRIES, _NO_ENTRIES, _NO_ENTRIES)
        self._block_used[block] = 0

    def _log(self) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """(term ids, slots, tfs) of the entries written in each block of the log."""
        for (log_term, log_slot, log_tf), used in zip(self._blocks, self._block_used):
            if used:
                yield log_term[:used], log_slot[:used], log_tf[:used]

    def remove(self, doc_id: str) -> None:
        """Forget a document (no-op when unknown). A frozen document's slot stays dead until
        the next :meth:`freeze` (its postings are in the arrays); a delta document's span of
        the log is blanked and its slot taken by the next document added."""
        slot = self.slot_of.pop(doc_id, None)
        if slot is None:
            return
        if slot < self.frozen_count:
            self.frozen_live[slot] = False
        else:
            block, start, end = (int(n) for n in self._span[slot])
            self._blocks[block][0][start:end] = -1
            self._block_live[block] -= end - start
            if not self._block_live[block] and block < len(self._blocks) - 1:
                self._drop_block(block)
            self.free.append(slot)
        self.total_len -= int(self.doc_len[slot])
        self.doc_len[slot] = 0
        self.slot_ids[slot] = None
        self._changed()

    # ----- scoring --------------------------------------------------------------------------
    def _frozen_row(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        """(live slots, tf) of ``term`` in the frozen part."""
        row = self.terms.get(term)
        if row is None or row >= self.frozen_term_count:
            return _NO_SLOTS, _NO_TF
        lo, hi = self.indptr[row], self.indptr[row + 1]
        slots, tf = self.frozen_slots[lo:hi], self.frozen_tf[lo:hi]
        live = self.frozen_live[slots]
        return (slots, tf) if live.all() else (slots[live], tf[live])

    def _delta_row(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        """(slots, tf) of ``term`` in the delta: a scan of the log (a few ms per million
        entries, once per term until the index changes, :meth:`_term_weights`)."""
        term_id = self.terms.get(term)
        if term_id is None or not self._blocks:
            return _NO_ENTRIES, _NO_ENTRIES
        slots, tf = [], []
        for log_term, log_slot, log_tf in self._log():
            entries = np.flatnonzero(log_term == term_id)
            if len(entries):
                slots.append(log_slot[entries])
                tf.append(log_tf[entries])
        if not slots:
            return _NO_ENTRIES, _NO_ENTRIES
        return np.concatenate(slots), np.concatenate(tf)

    def _postings_of(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        """(slots, tf) of every live document holding ``term``."""
        slots, tf = self._frozen_row(term)
        delta_slots, delta_tf = self._delta_row(term)
        if len(delta_slots):
            slots = np.concatenate([slots, delta_slots])
            tf = np.concatenate([tf, delta_tf])
        return slots.astype(np.int64, copy=False), tf.astype(np.float64)

    def df(self, term: str) -> int:
        """Live documents holding ``term``."""
        cached = self._weights.get(term)
        if cached is not None:
            return len(cached[0])
        return len(self._frozen_row(term)[0]) + len(self._delta_row(term)[0])

    def idf(self, term: str) -> float:
        """rank_bm25's IDF: log((N − df + 0.5) / (df + 0.5)), negatives → ε × average IDF.

        Unlike rank_bm25, a term held by half the documents or more never weighs 0 or less:
        in a new two-file project every word is in one of two files (IDF exactly 0, average
        IDF ≤ 0), and a search for words of a docstring found nothing at all."""
        df = self.df(term)
        return self._idf_of(df) if df else 0.0

    def _idf_of(self, df: int) -> float:
        """The IDF of a term held by ``df`` live documents (see :meth:`idf`)."""
        n = len(self.slot_of)
        value = math.log(n - df + 0.5) - math.log(df + 0.5)
        return value if value > 0 else self.epsilon * max(self._average(), MIN_AVERAGE_IDF)

    def _document_frequencies(self) -> np.ndarray:
        """df of every term held by a live document."""
        dfs = np.zeros(len(self.terms), dtype=np.float64)
        if len(self.frozen_slots):
            kept_before = np.zeros(len(self.frozen_slots) + 1, dtype=np.int32)
            np.cumsum(self.frozen_live[self.frozen_slots], dtype=np.int32, out=kept_before[1:])
            dfs[:self.frozen_term_count] = \
                kept_before[self.indptr[1:]] - kept_before[self.indptr[:-1]]
        for log_term, _slots, _tf in self._log():
            dfs += np.bincount(log_term[log_term >= 0], minlength=len(self.terms))
        return dfs[dfs > 0]

    def _average(self) -> float:
        if self._average_idf is None:
            dfs = self._document_frequencies()
            n = len(self.slot_of)
            self._average_idf = float(np.mean(np.log(n - dfs + 0.5) - np.log(dfs + 0.5))) \
                if len(dfs) else 0.0
        return self._average_idf

    def _term_weights(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        """(slots containing ``term``, the term's BM25 contribution to each)."""
        cached = self._weights.get(term)
        if cached is None:
            slots, tf = self._postings_of(term)
            if not len(slots):
                cached = (slots, tf)
            else:
                avgdl = self.total_len / len(self.slot_of)
                norm = self.k1 * (1 - self.b + self.b * self.doc_len[slots] / avgdl)
                cached = (slots, self._idf_of(len(slots)) * tf * (self.k1 + 1) / (tf + norm))
            self._weights[term] = cached
        return cached

    def score_slots(self, query_tokens: Sequence[str]) -> np.ndarray:
        """BM25 score of every slot (free slots score 0); repeated query tokens count again,
        as in rank_bm25."""
        scores = np.zeros(len(self.slot_ids), dtype=np.float64)
        if not self.slot_of:
            return scores
        for term in query_tokens:
            slots, weights = self._term_weights(term)
            if len(slots):
                scores[slots] += weights
        return scores

    def holds(self, term: str, slot: int) -> bool:
        """Whether the document in ``slot`` holds ``term``."""
        term_id = self.terms.get(term)
        if term_id is None or self.slot_ids[slot] is None:
            return False
        if slot >= self.frozen_count:
            block, start, end = self._span[slot]
            return bool((self._blocks[block][0][start:end] == term_id).any())
        if term_id >= self.frozen_term_count:
            return False
        lo, hi = self.indptr[term_id], self.indptr[term_id + 1]
        at = lo + np.searchsorted(self.frozen_slots[lo:hi], slot)
        return bool(at < hi and self.frozen_slots[at] == slot)

    def coverage(self, query_tokens: Sequence[str], doc_ids: Sequence[str]) -> list[float]:
        """Per document: the IDF-weighted share of the distinct query terms it holds, a term
        found in no document weighing the most any term can (an absolute measure: a query
        for a name that does not exist scores low everywhere)."""
        terms = list(dict.fromkeys(query_tokens))
        if not terms or not self.slot_of:
            return [0.0] * len(doc_ids)
        ceiling = math.log(len(self.slot_of) + 0.5) - math.log(0.5)
        weights = [self.idf(t) if self.df(t) else ceiling for t in terms]
        total = sum(weights) or 1.0
        out = []
        for doc_id in doc_ids:
            slot = self.slot_of.get(doc_id)
            held = sum(w for t, w in zip(terms, weights)
                       if slot is not None and self.holds(t, slot))
            out.append(held / total)
        return out

    def scores(self, query_tokens: Sequence[str]) -> dict[str, float]:
        """BM25 score of every document, by id."""
        dense = self.score_slots(query_tokens)
        return {doc_id: float(dense[slot]) for doc_id, slot in self.slot_of.items()}

    def top(self, query_tokens: Sequence[str], limit: int,
            accept: Callable[[str], bool] | None = None) -> list[tuple[str, float]]:
        """The ``limit`` best (id, score) with a positive score, optionally filtered."""
        dense = self.score_slots(query_tokens)
        candidates = np.flatnonzero(dense > 0)
        if accept is None and len(candidates) > limit > 0:
            # Only the best ``limit`` (and any tied with the last) need sorting.
            values = dense[candidates]
            cut = np.partition(values, len(values) - limit)[len(values) - limit]
            candidates = candidates[values >= cut]
        order = candidates[np.argsort(-dense[candidates], kind="stable")]
        out = []
        for slot in order:
            doc_id = self.slot_ids[slot]
            if accept is None or accept(doc_id):
                out.append((doc_id, float(dense[slot])))
                if len(out) >= limit:
                    break
        return out


def write_arrays(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write ``arrays`` (:meth:`BM25Index.arrays`) to ``path`` atomically."""
    scratch = path.with_name(path.name + f".{os.getpid()}.part")
    try:
        with open(scratch, "wb") as out:
            np.savez(out, **arrays)
        os.replace(scratch, path)
    finally:  # a full disk must not leave the part behind
        scratch.unlink(missing_ok=True)


def document_text(row: ChunkRow) -> str:
    """What BM25 indexes for a chunk: its path and label (so file and symbol names count)
    and the indexed text (contextual prefix + chunk)."""
    return f"{row.file_path}\n{row.label or ''}\n{row.index_text or row.text}"


def saved_index_path(context: Any) -> Path | None:
    """Where the BM25 arrays of a project are kept between processes: beside its index, or
    nowhere when the index is sealed at rest (the arrays hold its words in the clear) or has
    no local folder (the same place as the saved catalog and vectors)."""
    folder = snapshot_folder(context.project)
    return folder / SAVED_INDEX if folder is not None else None


class FullTextIndex(CatalogFollower):
    """A BM25Index over the store's chunks, updated file by file (rows from the catalog).

    With ``saved`` (a file path) the index outlives its process: the first sync loads the
    arrays written last time and catches up only on the files written since (the store's
    ``changes_since``), so a 60k-chunk index is ready in a fraction of a second instead of
    being tokenised again (seconds). The file is written after a full build and whenever the
    delta has grown past :data:`RESAVE_MIN_DOCS` / :data:`RESAVE_SHARE`; one written at a
    later generation than the store's, with other tokens (:data:`TOKENS_VERSION`), or whose
    chunks turn out not to be the store's (a database re-created) is ignored and rebuilt.
    """

    def __init__(self, catalog: ChunkCatalog, saved: Path | None = None):
        super().__init__(catalog)
        self.saved = saved
        self.bm25 = BM25Index()
        self.file_chunks: dict[int, list[str]] = {}
        self._unsaved = False
        self._saved_at = -RESAVE_INTERVAL_S
        self._saver: threading.Thread | None = None
        # Tokens computed ahead of the lock: chunk id → (the catalog entry whose text they
        # are, tokens), for the files the catalog had taken in up to catalog version
        # ``_ready_version``. The catalog replaces a re-read chunk's entry, so while the
        # entry is the same its text is (and held here, the entry is not reused).
        self._preparing = threading.Lock()
        self._ready: dict[str, tuple[ChunkEntry, list[str]]] = {}
        self._ready_version = -1

    def sync(self, generation: int | None = None) -> None:
        """Bring the index up to the catalog; a save that has become due is left to a
        thread of its own (:meth:`_save_when_idle`): the answer that found it due does not
        wait for the fold and the write (issue 37: the first answer after a ``git
        checkout`` paid both). The chunks to take in are tokenised before the lock is
        taken (:meth:`_prepare`)."""
        self._prepare()
        with self.lock:
            if self.version < 0 and self.saved is not None:
                self._load_saved(generation)
            try:
                super().sync(generation)
            finally:
                self._ready, self._ready_version = {}, -1
            if self._save_due():
                self._save_when_idle()

    def _prepare(self) -> None:
        """Tokenise the chunks of the files the catalog has taken in since this index last
        followed it, without the index's lock: the background catch-up after a ``git
        checkout`` (30k chunks re-written on fastapi, seconds of tokenising) held it the
        whole time, and every answer meanwhile queued behind it (issue 37). :meth:`apply`
        then takes the tokens of each chunk whose text is still the same. Two syncs at once
        tokenise once: the second waits for the first's tokens."""
        with self._preparing:
            catalog = self.catalog
            with catalog.lock:
                version = catalog.version
                if self.version < 0 or version in (self.version, self._ready_version):
                    return
                changes = catalog.changes_after(self.version)
            if changes is None or any(change.loaded is None for change in changes):
                return  # a whole build: BM25Index.build tokenises as it goes
            files = list(dict.fromkeys(f for change in changes for f in change.loaded or ()))
            ready: dict[str, tuple[ChunkEntry, list[str]]] = {}
            catalog = self.catalog
            for entry, row in catalog.iter_read(catalog.entries_for_files(files)):
                ready[row.chunk_id] = (entry, code_tokens(document_text(row)))
                if len(ready) >= PREPARE_MAX_CHUNKS:
                    break
            self._ready, self._ready_version = ready, version

    def _add_files(self, file_ids: Sequence[int]) -> None:
        """Add the chunks the catalog holds for ``file_ids``: with the tokens
        :meth:`_prepare` made from the same entry, without reading the text again (after
        fastapi's checkout each of 30k texts was read from the spool twice, issue 37);
        the others read and tokenised now. Added in the catalog's order either way."""
        entries = self.catalog.entries_for_files(file_ids)
        ready = self._ready
        for start in range(0, len(entries), FILES_PER_READ):
            part = entries[start:start + FILES_PER_READ]
            unread = [e for e in part if ready.get(e.chunk_id, (None,))[0] is not e]
            read = {entry.chunk_id: (entry, code_tokens(document_text(row)))
                    for entry, row in self.catalog.iter_read(unread)}
            for entry in part:
                if ready.get(entry.chunk_id, (None,))[0] is entry:
                    taken = ready.pop(entry.chunk_id)
                else:
                    taken = read.get(entry.chunk_id)
                if taken is None:  # dropped since: its file's next update says so
                    continue
                entry = taken[0]
                self.bm25.add(entry.chunk_id, taken[1])
                self.file_chunks.setdefault(entry.file_id, []).append(entry.chunk_id)

    def _save_due(self) -> bool:
        grown = self.bm25.delta_count > max(RESAVE_MIN_DOCS, RESAVE_SHARE * self.bm25.frozen_count)
        return self.saved is not None and (self._unsaved or grown) \
            and time.monotonic() - self._saved_at >= RESAVE_INTERVAL_S

    def _save_when_idle(self) -> None:
        """Start the saving thread unless one runs: it waits until no answer of this
        process is searching (woken by the last one's end), then folds and writes the
        index (:meth:`_save`)."""
        if self._saver is not None and self._saver.is_alive():
            return
        self._saver = threading.Thread(target=self._save_in_background, daemon=True,
                                       name="contextd-bm25-save")
        self._saver.start()

    def _save_in_background(self) -> None:
        wait_until_no_answer()
        self._save()

    def flush(self) -> None:
        """Save now what is due (the process is closing), after a save under way."""
        saver = self._saver
        if saver is not None:
            saver.join()
        self._save()

    def apply(self, changed: Sequence[int] | None, removed: Sequence[int]) -> None:
        if changed is None:
            self.file_chunks = {}

            def documents() -> Iterator[tuple[str, list[str]]]:
                for row in self.catalog.iter_chunks():  # a batch of texts at a time
                    self.file_chunks.setdefault(row.file_id, []).append(row.chunk_id)
                    yield row.chunk_id, code_tokens(document_text(row))

            self.bm25 = BM25Index.build(documents())
            self._unsaved = True
            return
        for file_id in list(removed) + list(changed):
            for chunk_id in self.file_chunks.pop(file_id, ()):
                self.bm25.remove(chunk_id)
        self._add_files(changed)

    def _load_saved(self, generation: int | None) -> None:
        """Start from the saved index brought up to the catalog (the files written since it
        was saved re-read, those the catalog leaves waiting dropped), unless it is unreadable,
        of other tokens, from a later store, or not the store's chunks (a database
        re-created): then the caller builds it."""
        try:
            index, meta, arrays = BM25Index.load(self.saved)
            saved_at = int(meta["generation"])
            file_ids = arrays["file_ids"].tolist()
        except FileNotFoundError:
            return
        except (OSError, ValueError, KeyError, UnicodeDecodeError) as exc:
            log.info("saved BM25 index %s unreadable (%s): rebuilding it", self.saved, exc)
            return
        catalog = self.catalog
        with catalog.lock:
            catalog.sync(generation)
            if meta.get("tokens") != TOKENS_VERSION or saved_at > catalog.generation \
                    or len(file_ids) != len(index):
                return
            self.bm25 = index
            self.file_chunks = {}
            for chunk_id, file_id in zip(index.slot_ids, file_ids):
                self.file_chunks.setdefault(file_id, []).append(chunk_id)
            changes = self.store.changes_since(saved_at)
            self.apply(list(dict.fromkeys(changes.changed_file_ids)),
                       [*changes.removed_file_ids, *catalog.waiting])
            rows = catalog.rows
            if len(rows) != len(self.bm25) or any(cid not in rows for cid in self.bm25.slot_of):
                log.info("saved BM25 index %s does not match the store: rebuilding it",
                         self.saved)
                self.bm25, self.file_chunks = BM25Index(), {}
                return
            self.version = catalog.version

    def _save(self) -> None:
        """Write the index with the store generation it holds when a save is due, unless it
        is not the catalog's whole view (files left waiting, or the catalog moved on since).
        Only the fold holds the index's lock: the turn for large transients is taken before
        it (an answer must not wait through the lock for an embedding batch to end), and
        the file is written after it, from arrays no later change touches (issue 37: the
        answers after a ``git checkout`` waited for the whole save)."""
        with transient(), self.lock:
            if not self._save_due():
                return
            catalog = self.catalog
            with catalog.lock:
                if self.version != catalog.version or catalog.waiting:
                    return
                generation = catalog.generation
            self._unsaved, self._saved_at = False, time.monotonic()
            self.bm25.fold()
            file_of = {cid: fid for fid, ids in self.file_chunks.items() for cid in ids}
            file_ids = np.asarray([file_of[cid] for cid in self.bm25.slot_ids],
                                  dtype=np.int64)
            arrays = self.bm25.arrays({"file_ids": file_ids},
                                      {"generation": generation, "tokens": TOKENS_VERSION})
        try:
            write_arrays(self.saved, arrays)
        except OSError as exc:  # a read-only or full disk costs the next start its speed only
            log.warning("could not save the BM25 index to %s: %s", self.saved, exc)


class FullTextProvider(ContextProvider):
    """BM25 keyword search, no model needed."""

    id = "full_text"
    name = "Full-text search (BM25)"
    type = ProviderType.FULL_TEXT

    def __init__(self) -> None:
        super().__init__()
        self.index: FullTextIndex | None = None

    def initialize(self, context) -> None:
        super().initialize(context)
        self.index = FullTextIndex(context.catalog, saved_index_path(context))

    @property
    def memory_index(self) -> FullTextIndex | None:
        """The BM25 index over the catalog's chunks."""
        return self.index

    def answers_from_memory(self, generation: int | None) -> bool:
        return (self.index is not None and self.index.is_current(generation)
                and self.context.catalog.is_current(generation))

    def query(self, query: ProviderQuery | str, scope: ContextScope, budget: TokenBudget
              ) -> list[ContextSnippet]:
        query = ProviderQuery.of(query)
        tokens = code_tokens(query.text)
        if not tokens:
            return []
        index = self.index
        scope_filter = ScopeFilter(scope)
        with index.lock:
            index.sync(query.generation)
            rows = self.context.catalog.rows
            groups = translation_groups(self.context.catalog.file_paths(query.generation))
            accept = None if scope_filter.unrestricted else (
                lambda cid: (row := rows.get(cid)) is not None and scope_filter.accepts_row(row))
            hits = own_language_first(
                index.bm25.top(tokens, query.limit * TRANSLATION_DEPTH, accept),
                lambda hit: (row := rows.get(hit[0])) and row.file_path, groups, query.text,
                query.limit * TRANSLATION_DEPTH)
            hits = copies_last(hits, lambda hit: hit[1],
                               lambda hit: self.context.catalog.text_of(hit[0]),
                               lambda hit: (row := rows.get(hit[0])) and row.file_path,
                               query.limit)
            hits = with_source_share(hits, rows, query.limit, lambda n, seen: index.bm25.top(
                tokens, n, lambda cid: cid not in seen and is_source(rows, cid)
                and (accept is None or accept(cid))))
            coverage = index.bm25.coverage(tokens, [cid for cid, _ in hits])
        if not hits:
            return []
        best = hits[0][1]
        rows = self.context.catalog.rows_by_id([cid for cid, _ in hits], query.generation)
        results = [snippet_from_row(rows[cid], score / best, self.id,
                                    {"bm25": round(score, 4), "bm25_coverage": round(cov, 4)})
                   for (cid, score), cov in zip(hits, coverage) if cid in rows]
        return [s for s in results if s.score >= query.min_score]

    def stats(self) -> dict[str, Any]:
        if self.index is None:
            return {}
        return {"documents": len(self.index.bm25), "terms": self.index.bm25.term_count()}

    def shutdown(self) -> None:
        if self.index is not None:
            self.index.flush()  # the next process starts from it
