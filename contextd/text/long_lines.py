"""Overlong lines cut to a bounded share of the index, their line numbers kept.

The boundary refuses a minified file from its first block (:mod:`contextd.boundary.generated`),
but a file of ordinary code that ends in one 2 MB line (a data blob, an inlined bundle) passes
that check, and the chunkers then cut the line into windows of the model's size: 2,140 chunks
of text no agent can use, embedded at the cost of the whole rest of the project. A line past
:data:`MAX_LINE_CHARS` keeps its first :data:`MAX_LINE_CHARS` characters in the index (enough
to recognise what it is) and the file a warning naming the line; the line break stays, so
every later line keeps its number. The file's digest is that of its bytes on disk, so an
unchanged file is not read again.
"""

from __future__ import annotations

# Characters of one line that reach the index; hand-written code lines average ~40 and a long
# literal (a regular expression, a URL, a short base64 key) fits well under it.
MAX_LINE_CHARS = 2000


def cap_long_lines(text: str, limit: int = MAX_LINE_CHARS) -> tuple[str, tuple[str, ...]]:
    """``text`` with every line longer than ``limit`` characters cut to ``limit``, and one
    warning naming the cut lines (their number, the longest one's length)."""
    if len(text) <= limit:
        return text, ()
    lines = text.split("\n")
    cut = [number for number, line in enumerate(lines, 1) if len(line) > limit]
    if not cut:
        return text, ()
    longest = max(len(lines[number - 1]) for number in cut)
    for number in cut:
        lines[number - 1] = lines[number - 1][:limit]
    which = ", ".join(str(n) for n in cut[:5]) + (", ..." if len(cut) > 5 else "")
    plural = "s" if len(cut) > 1 else ""
    return "\n".join(lines), (
        f"line{plural} {which} longer than {limit:,} characters (the longest {longest:,}): "
        f"only the first {limit:,} of each indexed",)
