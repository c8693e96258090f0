"""Readers: a document file → its text, ready for our chunkers.

One module per format; each turns bytes into a :class:`DocumentText` whose ``chunk_as``
names the chunker that cuts it (a PDF's text as plain text, a Word document or an HTML page
as Markdown so its headings become sections, Markdown, reStructuredText and code as
themselves). A reader raises :class:`ReadFailure` with one line saying why a file cannot be
read (corrupt, encrypted, no text layer), which the add reports per file.
"""

from __future__ import annotations

from typing import Callable

from contextd.knowledge.readers.base import DocumentText

def _reader(fmt: str) -> Callable[[bytes, str], DocumentText]:
    if fmt == "docx":
        from contextd.knowledge.readers.docx import read_docx
        return read_docx
    if fmt == "html":
        from contextd.knowledge.readers.html import read_html
        return read_html
    from contextd.knowledge.readers.plain import read_plain
    return read_plain


def read_document(data: bytes, name: str, fmt: str, max_pages: int | None = None,
                  force_ocr: bool = False) -> DocumentText:
    """The text of a document's bytes (``name``: its file name, for titles and messages);
    a PDF of more than ``max_pages`` pages is refused; ``force_ocr`` reads a PDF's pages by
    OCR even where they have a text layer."""
    if fmt == "pdf":
        from contextd.knowledge.readers.pdf import read_pdf
        return read_pdf(data, name, max_pages, force_ocr)
    return _reader(fmt)(data, name)
