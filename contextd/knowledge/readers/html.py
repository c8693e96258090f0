"""HTML with selectolax: the page's readable text as Markdown-like text.

selectolax (Lexbor, a compiled HTML5 parser, no other dependency) rather than trafilatura or
markitdown: those pull a dozen packages (lxml, BeautifulSoup, markdownify, ...) to find the
main text of *web pages*; documentation saved as HTML needs its headings, paragraphs, lists
and code kept in order, which a walk of the parsed tree gives in microseconds per page.
Headings become Markdown headings, so the Markdown chunker cuts one section per heading.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from contextd.chunkers.chunking import decode_text
from contextd.knowledge.readers.base import DocumentText, ReadFailure

_SKIPPED = ("script", "style", "noscript", "template", "svg", "nav", "head", "iframe")
_BLOCKS = {"p", "div", "section", "article", "li", "tr", "blockquote", "dd", "dt",
           "figcaption", "caption", "td", "th", "br", "table", "ul", "ol", "main", "header",
           "footer", "aside", "form", "dl"}


def _walk(node, out: list[str]) -> None:
    """Append the text of ``node``'s subtree to ``out`` in document order."""
    child = node.child
    while child is not None:
        tag = child.tag
        if tag == "-text":
            out.append(child.text(deep=False))
        elif tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
            text = " ".join(child.text(separator=" ").split())
            if text:
                out.append(f"\n\n{'#' * int(tag[1])} {text}\n\n")
        elif tag == "pre":
            out.append(f"\n\n```\n{child.text(deep=True).strip(chr(10))}\n```\n\n")
        elif tag == "li":
            out.append("\n- ")
            _walk(child, out)
            out.append("\n")
        elif tag in _BLOCKS:
            out.append("\n\n")
            _walk(child, out)
            out.append("\n\n")
        elif tag not in _SKIPPED and not tag.startswith("-"):
            _walk(child, out)
        child = child.next


def read_html(data: bytes, name: str) -> DocumentText:
    """The visible text of an HTML document, headings kept as Markdown headings."""
    from selectolax.lexbor import LexborHTMLParser

    html, _warnings = decode_text(data)
    try:
        tree = LexborHTMLParser(html)
    except Exception as exc:  # the parser is lenient; this is a broken file, say so
        raise ReadFailure(f"cannot parse HTML ({type(exc).__name__}: {exc})") from None
    body = tree.body or tree.root
    if body is None:
        raise ReadFailure("HTML without a body")
    for tag in _SKIPPED:
        for node in body.css(tag):
            node.decompose()
    pieces: list[str] = []
    _walk(body, pieces)
    text, blank, in_code = [], True, False
    for line in "".join(pieces).split("\n"):
        if line.strip() == "```":
            in_code = not in_code
        # Whitespace is collapsed as a browser would, except inside <pre> blocks.
        line = line.rstrip() if in_code else " ".join(line.split())
        if line or not blank or in_code:
            text.append(line)
        blank = not line
    result = "\n".join(text).strip()
    if not result:
        raise ReadFailure("HTML page without text")
    title_node = tree.css_first("title")
    title = title_node.text(strip=True) if title_node is not None else ""
    return DocumentText(text=result + "\n", format="html", chunk_as="document.md",
                        title=title or PurePosixPath(name).stem)
