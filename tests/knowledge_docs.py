"""Real documents for the knowledge-base tests, made in the test: PDFs with fpdf2, Word
documents with python-docx, HTML and Markdown as text. Each page/section holds a distinct
topic, so a search can be checked against where the words really are."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence


def make_pdf(path: Path, pages: Sequence[str], lines_per_page: int = 4) -> Path:
    """A PDF with a text layer: page N holds ``pages[N-1]`` (repeated as a paragraph)."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    for text in pages:
        pdf.add_page()
        for number in range(lines_per_page):
            pdf.multi_cell(0, 5, f"{text} ({number + 1})", new_x="LMARGIN", new_y="NEXT")
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(path))
    return path


def make_encrypted_pdf(path: Path) -> Path:
    """A PDF whose text needs a user password."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    pdf.add_page()
    pdf.cell(0, 10, "confidential merger plans")
    pdf.set_encryption(owner_password="owner", user_password="user")
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(path))
    return path


def make_scanned_pdf(path: Path) -> Path:
    """A PDF with drawings and no text layer, as a scan looks to a text extractor."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.rect(10, 10, 120, 160, style="F")
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(path))
    return path


def make_image_pdf(path: Path, lines: list[str], text_layer: str = "") -> Path:
    """A scanned page: ``lines`` drawn into an image (no text layer for them), plus an
    optional (wrong or partial) ``text_layer`` as a scanner's OCR might have left it."""
    from fpdf import FPDF
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("RGB", (1400, 110 + 80 * len(lines)), "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=42)
    for number, line in enumerate(lines):
        draw.text((40, 50 + 80 * number), line, fill="black", font=font)
    png = path.with_suffix(".png")
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(png)
    pdf = FPDF()
    pdf.add_page()
    if text_layer:
        pdf.set_font("Helvetica", size=8)
        pdf.text(10, 290, text_layer)
    pdf.image(str(png), x=10, y=10, w=190)
    pdf.output(str(path))
    png.unlink()
    return path


def make_docx(path: Path, sections: dict[str, str]) -> Path:
    """A Word document: one Heading 1 and one paragraph per section, plus a table."""
    import docx

    document = docx.Document()
    for heading, body in sections.items():
        document.add_heading(heading, level=1)
        document.add_paragraph(body)
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "control", "owner"
    table.cell(1, 0).text, table.cell(1, 1).text = "encryption at rest", "platform team"
    path.parent.mkdir(parents=True, exist_ok=True)
    document.save(str(path))
    return path


def make_html(path: Path, title: str, sections: dict[str, str]) -> Path:
    """An HTML page with a script and a nav (to be left out) and one h2 per section."""
    body = "".join(f"<h2>{h}</h2><p>{text}</p>" for h, text in sections.items())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"<html><head><title>{title}</title><script>var tracking = 1;</script>"
                    f"</head><body><nav>Home | About</nav><h1>{title}</h1>{body}"
                    "<pre><code>def retry(n):\n    return n * 2</code></pre></body></html>")
    return path


def make_markdown(path: Path, sections: dict[str, str]) -> Path:
    """A Markdown file with one ## section per entry."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("# Notes\n\n" + "".join(f"## {h}\n\n{t}\n\n" for h, t in sections.items()))
    return path
