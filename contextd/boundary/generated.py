"""Generated and minified files: recognised by name and by the shape of their first bytes.

Indexed, a 4 MB minified JavaScript bundle becomes 27,401 chunks and 82 s of embedding, for
text no agent can use (one line, no names worth finding). The boundary refuses such files
(reason ``generated``) from their name (``.min.js``, source maps, bundles) or from the block
it already reads to tell text from binary: a head with no line break at all, or lines
averaging over :data:`MAX_AVERAGE_LINE` characters, is machine output. Prose files are only
judged by the first rule (an unwrapped Markdown paragraph is a long line, not a bundle).
"""

from __future__ import annotations

import re

_GENERATED_NAME = re.compile(
    r"(?i)(?:[.-]min\.(?:js|mjs|cjs|css)|\.(?:js|mjs|cjs|css)\.map|\.map"
    r"|[.-]bundle\.(?:js|mjs|css)|\.chunk\.(?:js|css))$")
PROSE_SUFFIXES = (".md", ".markdown", ".mdx", ".rst", ".txt", ".adoc")
MIN_HEAD_BYTES = 4096       # smaller heads say too little about line lengths
MAX_AVERAGE_LINE = 1000     # characters; hand-written code averages ~40


def generated_by_name(name: str) -> str | None:
    """Why a file called ``name`` is generated (a minified file, a source map, a bundle)."""
    if _GENERATED_NAME.search(name):
        return "a minified file, bundle or source map (by its name)"
    return None


def generated_by_content(name: str, head: bytes) -> str | None:
    """Why a file whose first bytes are ``head`` is minified or generated, or None."""
    if len(head) < MIN_HEAD_BYTES:
        return None
    newlines = head.count(b"\n")
    if newlines == 0:
        return f"minified or generated: no line break in the first {len(head):,} bytes"
    if name.lower().endswith(PROSE_SUFFIXES):
        return None
    average = len(head) // newlines
    if average > MAX_AVERAGE_LINE:
        return (f"minified or generated: lines of {average:,} characters on average in the "
                f"first {len(head):,} bytes")
    return None
