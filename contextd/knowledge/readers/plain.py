"""Markdown, plain text, reStructuredText and code: the text is the file's own, chunked by
the chunker its extension picks (exactly as the project index would)."""

from __future__ import annotations

from pathlib import PurePosixPath

from contextd.chunkers.chunking import decode_text
from contextd.knowledge.readers.base import DocumentText, ReadFailure, format_of


def read_plain(data: bytes, name: str) -> DocumentText:
    """Decode a text file (BOM, line endings and invalid UTF-8 handled as for project files);
    a file with NUL bytes is binary, not text."""
    if b"\0" in data[:8192]:
        raise ReadFailure("binary content (NUL bytes), not a text document")
    text, _warnings = decode_text(data)
    fmt = format_of(name) or "text"
    return DocumentText(text=text, format=fmt, chunk_as=PurePosixPath(name).name,
                        title=PurePosixPath(name).stem)
