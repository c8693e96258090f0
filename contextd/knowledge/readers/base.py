"""What every reader shares: the formats by extension, the text a reader returns, and the
failure it raises."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath

from contextd.chunkers.chunking import chunker_for

# Extensions of each format; code is whatever our chunkers know and is not listed here.
FORMAT_EXTENSIONS: dict[str, tuple[str, ...]] = {
    "markdown": (".md", ".markdown", ".mdx"),
    "text": (".txt", ".text", ".log", ".adoc"),
    "rst": (".rst",),
    "html": (".html", ".htm", ".xhtml"),
    "pdf": (".pdf",),
    "docx": (".docx",),
}


class ReadFailure(Exception):
    """A document that cannot be read; the message says why, in one line."""


@dataclass(frozen=True)
class DocumentText:
    """A document's text and how to chunk it. ``page_starts``: the first line (1-based) of
    each page, for formats with pages; ``chunk_as``: a file name whose extension picks the
    chunker."""

    text: str
    format: str
    chunk_as: str
    title: str = ""
    page_starts: tuple[int, ...] = ()


def format_of(path: str) -> str | None:
    """The format of a file by its extension: one of FORMAT_EXTENSIONS, ``code`` for a file
    one of our chunkers claims, else None."""
    suffix = PurePosixPath(path).suffix.lower()
    for name, extensions in FORMAT_EXTENSIONS.items():
        if suffix in extensions:
            return name
    return "code" if suffix and chunker_for(path) is not None else None
