"""Word documents (.docx) with python-docx: paragraphs in order, headings as Markdown
headings (so the Markdown chunker cuts one section per heading), tables as rows of cells."""

from __future__ import annotations

import io
import zipfile
from pathlib import PurePosixPath

from contextd.knowledge.readers.base import DocumentText, ReadFailure


def _heading_level(style_name: str) -> int:
    """1-6 for 'Heading N' and 'Title' styles, else 0."""
    if style_name == "Title":
        return 1
    if style_name.startswith("Heading "):
        level = style_name.removeprefix("Heading ").strip()
        return min(int(level), 6) if level.isdigit() else 0
    return 0


def read_docx(data: bytes, name: str) -> DocumentText:
    """The body of a .docx as Markdown-like text."""
    import docx
    from docx.opc.exceptions import PackageNotFoundError

    try:
        document = docx.Document(io.BytesIO(data))
    except (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise ReadFailure(f"corrupt or not a Word document ({type(exc).__name__}: {exc})") \
            from None
    blocks: list[str] = []
    title = ""
    body = document.element.body
    for child in body.iterchildren():
        tag = child.tag.rsplit("}", 1)[-1]
        if tag == "p":
            paragraph = docx.text.paragraph.Paragraph(child, document)
            text = paragraph.text.strip()
            if not text:
                continue
            level = _heading_level(paragraph.style.name if paragraph.style else "")
            if level:
                title = title or text
                blocks.append(f"{'#' * level} {text}")
            else:
                blocks.append(text)
        elif tag == "tbl":
            table = docx.table.Table(child, document)
            rows = [" | ".join(cell.text.strip() for cell in row.cells) for row in table.rows]
            blocks.append("\n".join(r for r in rows if r.strip(" |")))
    text = "\n\n".join(b for b in blocks if b)
    if not text.strip():
        raise ReadFailure("Word document without text")
    core_title = (document.core_properties.title or "").strip()
    return DocumentText(text=text + "\n", format="docx", chunk_as="document.md",
                        title=core_title or title or PurePosixPath(name).stem)
