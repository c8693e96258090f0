"""Which lines of a text the scrubber reads: those holding a keyword (any ASCII case) or a
provider token's marker (exact case), found in one pass over the text.

Every indexed byte passes through here, so the search is shaped for it (issue 37). One
``str.find`` pass per keyword and marker (59 of them) cost more than every rule the
scrubber then runs; a regular expression alternation of the same words was slower still
(Python's engine tries each word at each position). Instead numpy reads the two characters
at every position as one number and looks it up in a table of the words' first two (in
every case a keyword may be written in), which also says whether they are a whole word: a
few percent of positions pass. At those, the four characters from there (lower-cased for
the keywords) are looked up, hashed, in a table of the longer words' first four (a
three-character word with every possible fourth). No word is missed; a hash collision only
adds a line, and each line found is then checked word by word, exactly as before.
"""

from __future__ import annotations

import string

import numpy as np

from contextd.scrub.rules import KEYWORDS, TOKEN_MARKERS

_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
_LOWER_BYTES = np.frombuffer(bytes(range(256)).translate(
    bytes.maketrans(string.ascii_uppercase.encode(), string.ascii_lowercase.encode())),
    dtype=np.uint8)
# Four characters are read as one little-endian number and hashed into this many bits.
_HASH_BITS = 20
_HASH_MULTIPLIER = np.uint32(2654435761)
# What the first look-up says about two characters: they begin a longer word, or they are a
# whole keyword (in some case) or marker.
_BEGINS, _KEYWORD_PAIR, _MARKER_PAIR = 1, 2, 4


def _hash(numbers: np.ndarray) -> np.ndarray:
    hashed = numbers * _HASH_MULTIPLIER
    hashed >>= 32 - _HASH_BITS
    return hashed


def _number(text: bytes) -> int:
    return int.from_bytes(text, "little")


def _spellings(word: str, is_keyword: bool) -> set[bytes]:
    """The first two characters of ``word``, in every ASCII case for a keyword."""
    if not is_keyword:
        return {word[:2].encode("ascii")}
    return {(a + b).encode("ascii") for a in {word[0].lower(), word[0].upper()}
            for b in {word[1].lower(), word[1].upper()}}


def _first_pairs() -> np.ndarray:
    """Flags per number of two characters (as written): see _BEGINS."""
    table = np.zeros(1 << 16, dtype=np.uint8)
    for words, is_keyword in ((KEYWORDS, True), (TOKEN_MARKERS, False)):
        flag = _BEGINS if len(words) else 0
        for word in words:
            whole = _KEYWORD_PAIR if is_keyword else _MARKER_PAIR
            for pair in _spellings(word, is_keyword):
                table[_number(pair)] |= whole if len(word) == 2 else flag
    return table


def _beginnings(words: tuple[str, ...]) -> np.ndarray:
    """True at the hash of the first four characters of every word of three or more (a
    three-character one followed by any character)."""
    numbers = set()
    for word in words:
        begin = word[:4].encode("ascii")
        if len(begin) == 3:
            numbers.update(_number(begin + bytes([n])) for n in range(256))
        elif len(begin) == 4:
            numbers.add(_number(begin))
    table = np.zeros(1 << _HASH_BITS, dtype=bool)
    table[_hash(np.array(sorted(numbers), dtype=np.uint32))] = True
    return table


_FIRST_PAIRS = _first_pairs()
_KEYWORD_BEGINNINGS = _beginnings(KEYWORDS)
_MARKER_BEGINNINGS = _beginnings(TOKEN_MARKERS)


def _codes(text: str) -> np.ndarray:
    """One byte per character of ``text`` (index for index: a non-ASCII character reads as
    DEL, which no word holds), then three NULs so that every position has four."""
    if text.isascii():
        return np.frombuffer(text.encode("ascii") + b"\0\0\0", dtype=np.uint8)
    wide = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    codes = np.zeros(len(wide) + 3, dtype=np.uint8)
    np.minimum(wide, 127, out=codes[:len(wide)], casting="unsafe")
    return codes


def _numbers(codes: np.ndarray, width: int, count: int) -> np.ndarray:
    """Element i: the ``width`` bytes of ``codes`` from position i as one little-endian
    number (an overlapping view, nothing copied), for the first ``count`` positions."""
    return np.ndarray((count,), dtype="<u2" if width == 2 else "<u4", buffer=codes,
                      strides=(1,))


def candidate_lines(text: str) -> list[tuple[tuple[int, int], bool]]:
    """Sorted (start, end) of the lines holding a keyword or a token marker, each with
    whether it holds a marker (only those can match a provider format)."""
    size = len(text)
    codes = _codes(text)
    flags = _FIRST_PAIRS[_numbers(codes, 2, size)]
    at = np.flatnonzero(flags)
    if not len(at):
        return []
    flags = flags[at]
    lowered = _numbers(_LOWER_BYTES[codes], 4, size)[at]
    keyword = _KEYWORD_BEGINNINGS[_hash(lowered)]
    keyword |= (flags & _KEYWORD_PAIR) != 0
    marker = _MARKER_BEGINNINGS[_hash(_numbers(codes, 4, size)[at])]
    marker |= (flags & _MARKER_PAIR) != 0
    newlines = np.flatnonzero(codes == 10)
    keyword_rows = set(np.searchsorted(newlines, at[keyword]).tolist())
    marker_rows = set(np.searchsorted(newlines, at[marker]).tolist())
    rows = sorted(keyword_rows | marker_rows)
    starts = np.concatenate(([0], newlines + 1))[rows].tolist()
    ends = np.concatenate((newlines, [size]))[rows].tolist()
    spans = []
    for row, start, end in zip(rows, starts, ends):
        line = text[start:end]
        found_marker = row in marker_rows and any(word in line for word in TOKEN_MARKERS)
        if not found_marker:
            if row not in keyword_rows:
                continue
            # ASCII letters only (the keywords are ASCII): str.lower() makes Turkish "İ"
            # two characters; a line's own lower() is the same when it is all ASCII.
            line = line.lower() if line.isascii() else line.translate(_ASCII_LOWER)
        if found_marker or any(word in line for word in KEYWORDS):
            spans.append(((start, end), found_marker))
    return spans
