"""PDF: the text layer, page by page, with pypdf.

pypdf (pure Python, no native dependency, maintained) rather than pdfminer.six: it reads the
text layer of a generated 40-page PDF several times faster, tells an encrypted file apart
before extracting anything, and its per-page extraction is what we need for page numbers;
pdfminer's finer layout analysis buys nothing once the text is chunked. A page without a text
layer (a scan) is read by OCR from its images (:mod:`contextd.knowledge.readers.ocr`, offline);
``force_ocr`` reads every page that way, for PDFs whose text layer is wrong or partial.
"""

from __future__ import annotations

import io
import logging
from pathlib import PurePosixPath

from contextd.knowledge.readers.base import DocumentText, ReadFailure

# pypdf logs every malformed object it recovers from; one line per document is enough.
logging.getLogger("pypdf").setLevel(logging.ERROR)


def read_pdf(data: bytes, name: str, max_pages: int | None = None,
             force_ocr: bool = False) -> DocumentText:
    """The text of every page under a ``# Page N`` heading, pages separated by a blank
    line; ``page_starts`` holds the first line of each page so a chunk's page is known from
    its line. Pages without text (or all, with ``force_ocr``) are read by OCR."""
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted:
            # An empty user password still opens some "encrypted" PDFs (permissions only).
            try:
                opened = reader.decrypt("")
            except Exception:
                opened = 0
            if not opened:
                raise ReadFailure("encrypted PDF (a password is needed to read its text)")
        pages = reader.pages
        count = len(pages)
    except ReadFailure:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, OSError) as exc:
        raise ReadFailure(f"corrupt or unreadable PDF ({type(exc).__name__}: {exc})") from None
    if count == 0:
        raise ReadFailure("PDF without pages")
    if max_pages is not None and count > max_pages:
        raise ReadFailure(f"PDF of {count} pages, over knowledge.max_pages ({max_pages})")
    texts, starts, line, found = [], [], 1, False
    for number, page in enumerate(pages, start=1):
        try:
            text = "" if force_ocr else page.extract_text() or ""
            if not text.strip():
                text = _ocr(page, number)
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        except ReadFailure:
            raise
        except Exception as exc:  # one broken page: say which, keep nothing half-read
            raise ReadFailure(f"corrupt PDF page {number} "
                              f"({type(exc).__name__}: {exc})") from None
        # Each page opens with a heading, so the Markdown chunker never joins two pages
        # in one chunk and every chunk's first line tells its page.
        text = f"# Page {number}\n\n{text.strip(chr(10))}"
        found = found or bool(text.split("\n", 2)[-1].strip())
        starts.append(line)
        texts.append(text)
        line += text.count("\n") + 1 + 1  # the page's lines, then the blank separator
    if not found:
        raise ReadFailure("no text layer and no text OCR could read in its images")
    title = ""
    try:
        title = str((reader.metadata or {}).get("/Title") or "")
    except Exception:  # metadata is optional; a broken info dict must not cost the text
        title = ""
    return DocumentText(text="\n\n".join(texts) + "\n", format="pdf", chunk_as="document.md",
                        title=title or PurePosixPath(name).stem, page_starts=tuple(starts))


def _ocr(page, number: int) -> str:
    """OCR text of a page; a ReadFailure saying why when OCR cannot run here."""
    from contextd.knowledge.readers import ocr

    if not page.images:
        return ""
    why = ocr.unavailable()
    if why:
        raise ReadFailure(f"page {number} has no text layer (a scan) and OCR cannot run: "
                          f"{why}")
    return ocr.page_text(page)
