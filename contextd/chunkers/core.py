"""Machinery shared by every built-in chunker: line/byte bookkeeping, cutting an oversize span
under the token cap, and assembling definition units plus the code between them into chunks.

Chunkers describe *units* (a function, a heading section, a YAML key) as byte spans; the helpers
here guarantee the two invariants every chunker promises: each non-blank line lands in a chunk
(gaps between units become chunks of their own) and no chunk's estimated tokens pass the cap
(oversize units are cut at preferred line boundaries, then line windows, then character windows).
"""

from __future__ import annotations

import functools
import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import Callable

import numpy as np

from contextd.records import Chunk, ChunkKind, SymbolDef
from contextd.text.tokens import (DIGIT_WEIGHT, PUNCT_WEIGHT, WORD_CHAR_WEIGHT, WORD_WEIGHT,
                             combine_counts)

# Extra weight of a non-ASCII byte in the byte-level estimate: a CJK character (3 bytes) then
# costs more than estimate_tokens gives it, so cuts made on byte costs stay under the cap.
HIGH_BYTE_WEIGHT = 0.6


class UnparsableFile(Exception):
    """Raised by a chunker that cannot make sense of a file (a tree that is mostly syntax
    errors). The file is then cut into line windows and the reason is recorded, so it stays
    searchable and the user can see why it was not cut by structure."""


# Per byte value: is it a blank (what estimate_tokens does not count).
_IS_BLANK = np.isin(np.arange(256), (9, 10, 13, 32))


def _byte_tables() -> tuple[np.ndarray, np.ndarray]:
    """Per byte value: is it part of a word, and its weight in the estimate (word starts are
    added separately): the byte-level twin of estimate_tokens's counts."""
    values = np.arange(256)
    digit = (values >= 48) & (values <= 57)
    letter = ((values | 32) >= 97) & ((values | 32) <= 122)
    high = values >= 128
    space = _IS_BLANK
    word = digit | letter | high
    weights = (PUNCT_WEIGHT * (~space & ~word) + WORD_CHAR_WEIGHT * word
               + DIGIT_WEIGHT * digit + HIGH_BYTE_WEIGHT * high)
    return word, weights.astype(np.float64)


_IS_WORD, _BYTE_WEIGHTS = _byte_tables()
# The weight of a byte after a byte (flat index ``previous + 256 * byte``): its own weight,
# plus a word's when it starts one. One look-up per byte, where the byte table, the word
# flags and the word starts took five passes over the file (issue 37); the sums are
# the same floating-point additions, so every cost is unchanged.
_PAIR_WEIGHTS = (_BYTE_WEIGHTS[:, None]
                 + WORD_WEIGHT * (_IS_WORD[:, None] & ~_IS_WORD[None, :])).ravel()

_ALNUM_RE = re.compile(r"[^\W_]")


@functools.lru_cache(maxsize=1)
def _bmp_alnum() -> np.ndarray:
    """``str.isalnum`` of every code point of the Basic Multilingual Plane, made once per
    process (a few milliseconds): a look-up per character, where a CJK file asked Python
    about each of its thousand distinct characters again (issue 37)."""
    return np.array([chr(c).isalnum() for c in range(0x10000)], dtype=bool)


def _char_counts(text: str, data: bytes) -> tuple[np.ndarray, np.ndarray]:
    """What ``estimate_tokens`` counts, as running sums over a non-ASCII file's bytes, so any
    span's estimate is O(1) and equal to the estimator's: columns are characters, blanks, word
    characters, digits, wide characters and word starts, each character counted at its first
    byte. Also returns per-byte "in a word" flags (continuation bytes carry their character's),
    for a word that a span cuts at its start."""
    b = np.frombuffer(data, dtype=np.uint8)
    first = (b & 0xC0) != 0x80
    lead = b >= 0xC0
    # The code points of the characters whose first byte is a lead byte, in order, read
    # from one UTF-32 copy of the text: a regex's list of them, a tuple per character and
    # an array built from those tuples were most of a non-ASCII file's estimate (issue 37).
    points = np.frombuffer(text.encode("utf-32-le"), dtype="<u4")
    others = points[points >= 128]
    alnum = _bmp_alnum()[np.minimum(others, 0xFFFF)]
    astral = others > 0xFFFF
    if astral.any():  # an emoji, a historic script: asked one by one
        alnum[astral] = [chr(c).isalnum() for c in others[astral].tolist()]
    word = _IS_WORD[b] & ~(b >= 128)
    word[lead] = alnum
    wide = np.zeros(len(b), dtype=bool)
    wide[lead] = (others >= 0x2E80) & (others <= 0xFFFF)
    word = word[np.maximum.accumulate(np.where(first, np.arange(len(b)), 0))]
    starts = word & first
    starts[1:] &= ~word[:-1]
    columns = (first, _IS_BLANK[b], word & first, (b >= 48) & (b <= 57), wide, starts)
    # One running sum per column, each over contiguous memory, read as rows by position
    # (the transpose is a view): summing the stacked (bytes x 6) array down its columns
    # took four times as long, most of a non-ASCII file's estimate (issue 37).
    prefix = np.zeros((len(columns), len(b) + 1), dtype=np.int64)
    for row, column in zip(prefix, columns):
        np.cumsum(column, out=row[1:])
    return prefix.T, word


class Source:
    """One decoded file: its text, UTF-8 bytes and line table, and a chunk factory.

    Offsets are byte offsets into ``data`` (tree-sitter's unit); lines are 1-based.
    """

    __slots__ = ("text", "path", "language", "data", "line_starts", "line_bounds", "ascii",
                 "_prefix", "_counts")

    def __init__(self, text: str, path: str, language: str):
        self.text = text
        self.path = path
        self.language = language
        self.data = text.encode("utf-8")
        newlines = np.flatnonzero(np.frombuffer(self.data, dtype=np.uint8) == 10)
        # One entry per element of text.split("\n"): a final newline opens an empty line.
        self.line_starts: list[int] = [0, *(newlines + 1).tolist()]
        # line_starts as an array made once per file, closed by the start a line after the
        # last would have: an oversize unit's line costs are then two slices, where
        # converting its part of line_starts for every unit took a third of split_span's
        # own time on long Go files (issue 37).
        self.line_bounds = np.concatenate(([0], newlines + 1, [len(self.data) + 1]))
        self.ascii = text.isascii()
        self._prefix: np.ndarray | None = None
        self._counts: tuple[np.ndarray, np.ndarray] | None = None

    def tokens(self, start: int, end: int) -> int:
        """``estimate_tokens`` of bytes ``[start, end)`` in O(1): from the byte table for ASCII
        files (the same formula), from running counts of what the estimator counts otherwise."""
        if self.ascii:
            return self.cost(start, end)
        if start >= end:
            return 0
        if self._counts is None:
            self._counts = _char_counts(self.text, self.data)
        prefix, word = self._counts
        chars, blank, word_chars, digits, wide, words = (prefix[end] - prefix[start]).tolist()
        if start and word[start] and word[start - 1]:
            words += 1  # the span starts inside a word: the estimator sees a word start there
        return combine_counts(chars - blank - word_chars, words, word_chars, digits, wide)

    def cost(self, start: int, end: int) -> int:
        """Token estimate of bytes ``[start, end)`` in O(1), never below ``estimate_tokens``
        of the same text (up to a word cut in two): what cutting decisions are made on."""
        prefix = self.cost_prefix()
        return int(prefix[end] - prefix[start]) + 1

    def cost_prefix(self) -> np.ndarray:
        """Running sum of per-byte token weights, computed once per file on first need."""
        if self._prefix is None:
            # Each byte with the one before it (a blank before the first: no word yet), as
            # one little-endian number: an overlapping view, nothing copied.
            padded = np.frombuffer(b" " + self.data, dtype=np.uint8)
            pairs = np.ndarray((len(self.data),), dtype="<u2", buffer=padded, strides=(1,))
            prefix = np.empty(len(self.data) + 1)
            prefix[0] = 0.0
            np.cumsum(_PAIR_WEIGHTS[pairs], out=prefix[1:])
            self._prefix = prefix
        return self._prefix

    @property
    def line_count(self) -> int:
        return len(self.line_starts)

    def line_of(self, offset: int) -> int:
        """1-based line holding the byte at ``offset``."""
        return bisect_right(self.line_starts, offset)

    def line_start(self, line: int) -> int:
        return self.line_starts[line - 1]

    def line_end(self, line: int) -> int:
        """Byte offset of the end of ``line``, its newline excluded."""
        return self.line_starts[line] - 1 if line < len(self.line_starts) else len(self.data)

    def slice(self, start: int, end: int) -> str:
        """The text of bytes ``[start, end)``: in an ASCII file bytes are characters, so the
        text is sliced where decoding a copy of the bytes cost every chunk twice (issue 37)."""
        if self.ascii:
            return self.text[start:end]
        return self.data[start:end].decode("utf-8")

    def chunk(self, start: int, end: int, kind: ChunkKind, label: str, *,
              defines: tuple[SymbolDef, ...] = (), references: tuple[str, ...] = (),
              context: str = "", parent: str = "", text: str | None = None,
              tokens: int | None = None) -> Chunk:
        """Build a chunk of the bytes ``[start, end)``; lines and tokens are derived unless the
        caller already has them (``text``, ``tokens``)."""
        if text is None:
            text = self.slice(start, end)
        if tokens is None:
            tokens = self.tokens(start, end)
        return Chunk(text=text, kind=kind, label=label, language=self.language,
                     start_line=self.line_of(start), end_line=self.line_of(max(start, end - 1)),
                     start_byte=start, end_byte=end, tokens=tokens,
                     defines=defines, references=references, context=context, parent=parent)


def has_words(text: str) -> bool:
    """True when ``text`` holds a letter or digit (a gap of braces alone is not worth a chunk)."""
    return _ALNUM_RE.search(text) is not None


def trim_span(src: Source, start: int, end: int) -> tuple[int, int]:
    """Shrink a span to its first and last non-blank lines (whole lines, indentation kept)."""
    raw = src.data[start:end]
    content = raw.lstrip()
    if not content:
        return start, start
    first = src.line_of(start + len(raw) - len(content))
    return max(start, src.line_start(first)), start + len(raw.rstrip())


def split_span(src: Source, start: int, end: int, cap: int, boundaries: dict[int, int] | None = None,
               overlap_tokens: int = 0) -> list[tuple[int, int]]:
    """Cut ``[start, end)`` into spans of at most ``cap`` estimated tokens.

    Cuts fall on line boundaries, preferring a line in ``boundaries`` (line -> depth, lower is
    better: statement starts, paragraph starts) in the back half of a window; a single line over
    the cap is cut into character windows. Consecutive spans share up to ``overlap_tokens`` of
    lines so a reader of one piece sees how the previous ended.
    """
    first, last = src.line_of(start), src.line_of(max(start, end - 1))
    if first == last:
        return _char_windows(src, start, end, cap)
    bounds = boundaries or {}
    bound_lines = sorted(bounds)
    spans: list[tuple[int, int]] = []
    line_start, line_end = src.line_start, src.line_end
    # totals[k]: cost of lines first..first+k-1; every line costs at least 1, so the longest
    # run of lines from i under the cap ends where a bisection of the running totals says.
    totals = _line_totals(src, start, end, first, last)
    i = covered = first
    while i <= last:
        j = bisect_right(totals, totals[i - first] + cap, i - first) + first - 1
        if j == i:  # one line alone is over the cap
            spans.extend(_char_windows(src, max(start, line_start(i)), min(end, line_end(i)), cap))
            i += 1
            continue
        cut = j if j > last else _best_cut(i, j, bounds, bound_lines, covered)
        spans.append((max(start, line_start(i)), min(end, line_end(cut - 1))))
        if cut > last:
            break
        covered = cut
        i = _overlap_start(i - first, cut - first, totals, overlap_tokens) + first
    trimmed = (trim_span(src, s, e) for s, e in spans)
    return [(s, e) for s, e in trimmed if e > s]


def _line_totals(src: Source, start: int, end: int, first: int, last: int) -> list[int]:
    """Running totals of the byte-table token cost of lines ``first..last`` clipped to
    ``[start, end)``, starting at 0 (one entry more than there are lines)."""
    prefix = src.cost_prefix()
    starts = np.maximum(start, src.line_bounds[first - 1:last])
    ends = np.minimum(end, src.line_bounds[first:last + 1] - 1)
    costs = (prefix[ends] - prefix[starts]).astype(np.int64) + 1
    return [0, *np.cumsum(costs).tolist()]


def _best_cut(i: int, j: int, bounds: dict[int, int], lines: list[int], covered: int) -> int:
    """The line that starts the next piece, for a piece spanning lines ``i .. j-1`` whose
    lines before ``covered`` the previous piece already holds (the overlap); ``lines`` are
    the keys of ``bounds`` in order, so only the preferred lines in the window are looked at,
    not every line of it (issue 37).

    ``j`` itself is a candidate: when the first line that does not fit opens a paragraph or
    statement, the whole window fits and cutting earlier would only make pieces smaller. A
    cut at or before ``covered`` would make a piece of overlap alone, so none is taken."""
    half = max(i + max(1, (j - i) // 2), covered + 1)
    inside = lines[bisect_left(lines, half):bisect_right(lines, j)]
    if not inside:
        inside = lines[bisect_left(lines, max(i, covered) + 1):bisect_left(lines, j)]
    return -min((bounds[n], -n) for n in inside)[1] if inside else j


def _overlap_start(i: int, cut: int, totals: list[int], overlap_tokens: int) -> int:
    """Start of the next piece (as an index into ``totals``): ``cut`` moved back over at most
    ``overlap_tokens`` of lines, always after ``i`` so the cutting advances."""
    return bisect_left(totals, totals[cut] - overlap_tokens, i + 1, cut)


def _char_windows(src: Source, start: int, end: int, cap: int) -> list[tuple[int, int]]:
    """Cut one long line (minified code, a huge literal) into windows under the cap, preferring
    to end a window after whitespace or a closing bracket."""
    prefix = src.cost_prefix()
    data = src.data
    spans: list[tuple[int, int]] = []
    pos = start
    while pos < end:
        stop = int(np.searchsorted(prefix, prefix[pos] + cap - 1, side="right")) - 1
        stop = min(end, max(stop, pos + 1))
        while stop < end and stop > pos + 1 and data[stop] & 0xC0 == 0x80:
            stop -= 1  # never cut inside a UTF-8 sequence
        if stop < end:
            window = data[pos:stop]
            brk = max(window.rfind(b) for b in (b" ", b",", b";", b")", b"}", b"]"))
            if brk > (stop - pos) * 4 // 5:
                stop = pos + brk + 1
        spans.append((pos, stop))
        pos = stop
    return spans


@dataclass
class Unit:
    """A span a chunker wants as one chunk (or, when over the cap, as several pieces)."""

    start: int
    end: int
    kind: ChunkKind
    label: str
    defines: tuple[SymbolDef, ...] = ()
    context: str = ""
    parent: str = ""
    # Computed only when the unit is over the cap: line -> depth of preferred cuts.
    boundaries: Callable[[], dict[int, int]] | None = None
    # Context given to the second and later pieces of a split unit (e.g. a signature).
    piece_context: str = ""
    references: tuple[str, ...] = ()


def emit_unit(src: Source, unit: Unit, cap: int, overlap_tokens: int = 0,
              references: Callable[[int, int], tuple[str, ...]] | None = None) -> list[Chunk]:
    """Chunks of one unit: itself when under the cap, else its pieces (all with its label).

    ``references(start, end)``, when given, names what each chunk's bytes use (instead of
    ``unit.references``), so a chunk is built once with everything it carries.
    """
    tokens = src.tokens(unit.start, unit.end)
    if tokens <= cap:
        refs = unit.references if references is None else references(unit.start, unit.end)
        return [src.chunk(unit.start, unit.end, unit.kind, unit.label, defines=unit.defines,
                          references=refs, context=unit.context, parent=unit.parent,
                          tokens=tokens)]
    bounds = unit.boundaries() if unit.boundaries is not None else None
    pieces = split_span(src, unit.start, unit.end, cap, bounds, overlap_tokens)
    chunks = []
    for n, (start, end) in enumerate(pieces):
        first, last = src.line_of(start), src.line_of(max(start, end - 1))
        defines = tuple(d for d in unit.defines if first <= d.line <= last)
        context = unit.context if n == 0 else (unit.piece_context or unit.context)
        refs = unit.references if references is None else references(start, end)
        chunks.append(src.chunk(start, end, unit.kind, unit.label, defines=defines,
                                references=refs, context=context,
                                parent=unit.parent))
    return chunks


def fill_gaps(src: Source, units: list[Unit], start: int, end: int, gap_unit) -> list[Unit]:
    """Units covering ``[start, end)``: ``units`` (sorted, disjoint) plus one unit per stretch
    of non-blank text between them, made by ``gap_unit(start, end)``. A stretch without a
    letter or digit (closing braces) is absorbed by its neighbour instead of becoming a chunk.
    """
    out: list[Unit] = []
    pos = start
    for unit in [*units, None]:
        gap_end = unit.start if unit is not None else end
        if gap_end > pos:
            g_start, g_end = trim_span(src, pos, gap_end)
            if g_end > g_start:
                if has_words(src.slice(g_start, g_end)):
                    out.append(gap_unit(g_start, g_end))
                elif out:
                    out[-1].end = g_end
                elif unit is not None:
                    unit.start = g_start
                else:
                    out.append(gap_unit(g_start, g_end))
        if unit is not None:
            out.append(unit)
            pos = unit.end
    return out
