"""Readers: a document file → its text, ready for our chunkers.

One module per format; each turns bytes into a :class:`DocumentText` whose ``chunk_as``
names the chunker that cuts it (a PDF's text as plain text, a Word document or an HTML page
as Markdown so its headings become sections, Markdown, reStructuredText and code as
themselves). A reader raises :class:`ReadFailure` with one line saying why a file cannot be
read (corrupt, encrypted, no text layer), which the add reports per file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Callable

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
    from contextd.chunking import chunker_for

    return "code" if suffix and chunker_for(path) is not None else None


def _reader(fmt: str) -> Callable[[bytes, str], DocumentText]:
    if fmt == "docx":
        from contextd.knowledge.readers.docx import read_docx
        return read_docx
    if fmt == "html":
        from contextd.knowledge.readers.html import read_html
        return read_html
    from contextd.knowledge.readers.plain import read_plain
    return read_plain


def read_document(data: bytes, name: str, fmt: str, max_pages: int | None = None
                  ) -> DocumentText:
    """The text of a document's bytes (``name``: its file name, for titles and messages);
    a PDF of more than ``max_pages`` pages is refused."""
    if fmt == "pdf":
        from contextd.knowledge.readers.pdf import read_pdf
        return read_pdf(data, name, max_pages)
    return _reader(fmt)(data, name)
