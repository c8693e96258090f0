"""A knowledge search's hits as a person reads them: scored by their own evidence, cut at a
relevance floor, placed on the lines of the file they came from, previewed at the line that
matched.

The query path ranks by fused scores, which are relative: below the best hit they fall with
the rank alone (0.61, 0.60, 0.59 … for chunks that share no word and no meaning with the
question, the same for every query), and a small context returned every chunk it holds. A
knowledge search scores each hit by what the providers measured for it (cosine, BM25
coverage; :func:`contextd.query.calibration.measured_evidence`) and leaves out the hits with
no such evidence.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any, Sequence

from contextd.query.calibration import measured_evidence

# Hits whose measured evidence is below this are unrelated to the question.
MIN_RELEVANCE = 0.05
# HTML files larger than this are not re-read to place a hit on its lines.
MAX_HTML_BYTES = 8 * 2**20
_TAG = re.compile(r"<[^>]*>")
_MARKUP = re.compile(r"^[#>*\-+\s|]+|[*_`|]+")
_SPACE = re.compile(r"\s+")


def relevance(metadata: dict[str, Any]) -> float:
    """A hit's own score: the strongest evidence measured for it."""
    return round(measured_evidence(metadata), 6)


def _plain(line: str) -> str:
    return _SPACE.sub(" ", _MARKUP.sub("", line)).strip().lower()


def html_source_lines(source: str, snippet: str) -> tuple[int, int] | None:
    """The lines of the HTML file ``source`` that hold a hit's extracted ``snippet`` (its
    first and last lines of text, found in order among the file's lines with their tags
    taken out), or None when the file is gone, too large or changed."""
    path = Path(source)
    try:
        if path.stat().st_size > MAX_HTML_BYTES:
            return None
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return None
    texts = [_SPACE.sub(" ", html.unescape(_TAG.sub(" ", line))).strip().lower()
             for line in lines]
    wanted = [p[:80] for p in (_plain(line) for line in snippet.splitlines()) if p]
    if not wanted:
        return None
    start = _find(texts, wanted[0], 0)
    if start is None:
        return None
    end = start
    for text in wanted[1:]:
        found = _find(texts, text, end)
        if found is not None:
            end = found
    return start + 1, end + 1


def _find(texts: Sequence[str], wanted: str, start: int) -> int | None:
    return next((i for i in range(start, len(texts)) if wanted in texts[i]), None)


def preview(snippet: str, start_line: int, metadata: dict[str, Any], count: int,
            query: str = "") -> list[str]:
    """``count`` lines of a hit to show under it, from the line that best matches: the line
    of text (not a heading) holding most of the query's words, else the first line the full
    text provider matched, else the first line of text."""
    lines = snippet.splitlines()
    text = [i for i, line in enumerate(lines)
            if line.strip() and not line.lstrip().startswith("#")]
    words = {w for w in _WORD.findall(query.lower()) if len(w) > 2}
    held = {i: len(words.intersection(_WORD.findall(lines[i].lower()))) for i in text}
    matched = [n - start_line for n in metadata.get("matched_lines") or ()
               if n - start_line in held]
    if held and max(held.values()) > 0:
        first = max(text, key=lambda i: (held[i], -i))
    else:
        first = min(matched) if matched else (text[0] if text else 0)
    return lines[first:first + count]


_WORD = re.compile(r"[a-z0-9]+")
