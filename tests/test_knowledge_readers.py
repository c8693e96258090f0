"""The knowledge base's readers on real documents made here: text, pages, headings, and one
clear reason for each document that cannot be read."""

from __future__ import annotations

import pytest

from contextd.knowledge.readers import read_document
from contextd.knowledge.readers.base import ReadFailure, format_of
from contextd.knowledge.scope import page_of
from knowledge_docs import (
    make_docx, make_encrypted_pdf, make_html, make_pdf, make_scanned_pdf,
)


def test_pdf_text_is_read_page_by_page_with_page_starts(tmp_path):
    pdf = make_pdf(tmp_path / "a.pdf", ["alpha topic", "bravo topic", "charlie topic"])
    doc = read_document(pdf.read_bytes(), "a.pdf", "pdf")
    assert doc.format == "pdf" and len(doc.page_starts) == 3
    lines = doc.text.splitlines()
    for number, word in enumerate(("alpha", "bravo", "charlie"), start=1):
        first = doc.page_starts[number - 1]
        assert lines[first - 1] == f"# Page {number}" and word in lines[first + 1]
        assert page_of(doc.page_starts, first) == number
        found = [i + 1 for i, line in enumerate(lines) if word in line]
        assert {page_of(doc.page_starts, line) for line in found} == {number}


def test_pdf_page_limit(tmp_path):
    pdf = make_pdf(tmp_path / "long.pdf", ["x"] * 4)
    with pytest.raises(ReadFailure, match="4 pages, over knowledge.max_pages"):
        read_document(pdf.read_bytes(), "long.pdf", "pdf", max_pages=3)


@pytest.mark.parametrize("maker, reason", [
    (make_encrypted_pdf, "encrypted PDF"),
    (make_scanned_pdf, "no text layer"),
    (lambda p: (p.write_bytes(b"%PDF-1.4\n" + b"\x00garbage" * 40), p)[1], "corrupt"),
    (lambda p: (p.write_bytes(b"not a pdf at all"), p)[1], "corrupt"),
])
def test_unreadable_pdfs_say_why(tmp_path, maker, reason):
    path = maker(tmp_path / "bad.pdf")
    with pytest.raises(ReadFailure, match=reason):
        read_document(path.read_bytes(), "bad.pdf", "pdf")


def test_docx_headings_become_markdown_sections_and_tables_are_kept(tmp_path):
    path = make_docx(tmp_path / "policy.docx", {"Access control": "Least privilege always.",
                                                "Backups": "Nightly, kept 35 days."})
    doc = read_document(path.read_bytes(), "policy.docx", "docx")
    assert doc.chunk_as.endswith(".md") and doc.title == "Access control"
    assert "# Access control\n\nLeast privilege always." in doc.text
    assert "# Backups" in doc.text and "encryption at rest | platform team" in doc.text
    with pytest.raises(ReadFailure, match="not a Word document"):
        read_document(b"PK\x03\x04 broken zip", "x.docx", "docx")


def test_html_keeps_headings_text_and_code_and_drops_scripts(tmp_path):
    path = make_html(tmp_path / "guide.html", "Ops guide", {"Deploys": "Blue green deploys.",
                                                            "Rollback": "Revert the release."})
    doc = read_document(path.read_bytes(), "guide.html", "html")
    assert doc.title == "Ops guide"
    assert "# Ops guide" in doc.text and "## Rollback\n\nRevert the release." in doc.text
    assert "tracking" not in doc.text and "Home | About" not in doc.text
    assert "def retry(n):\n    return n * 2" in doc.text  # <pre> keeps its indentation


def test_formats_by_extension():
    assert [format_of(n) for n in ("a.md", "b.TXT", "c.rst", "d.htm", "e.pdf", "f.docx",
                                   "g.py", "h.go", "i.xyz", "noext")] == [
        "markdown", "text", "rst", "html", "pdf", "docx", "code", "code", None, None]
    with pytest.raises(ReadFailure, match="binary"):
        read_document(b"\x00\x01\x02", "x.txt", "text")
