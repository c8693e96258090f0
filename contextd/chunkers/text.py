"""Plain text, and the fallback for every file no other chunker claims: paragraphs packed
into chunks under the token cap, each labelled with its first words."""

from __future__ import annotations

from contextd.chunkers.core import Source, split_span
from contextd.chunkers.markdown import paragraph_starts
from contextd.config.sections import LanguageChunking
from contextd.records import Chunk, ChunkKind
from contextd.text.languages import extensions_of

LABEL_CHARS = 60


def first_words(text: str) -> str:
    """A short label: the first non-blank line, cut to ``LABEL_CHARS``."""
    line = next((s.strip() for s in text.split("\n") if s.strip()), "")
    return line if len(line) <= LABEL_CHARS else line[: LABEL_CHARS - 1].rstrip() + "…"


class TextChunker:
    name = "text"
    language = "text"
    extensions = extensions_of("text", "rst", "asciidoc")
    filenames = ("README", "LICENSE", "NOTICE", "AUTHORS", "CHANGES")

    def chunk(self, text: str, path: str, settings: LanguageChunking) -> list[Chunk]:
        """Paragraph-packed chunks (see the module docstring)."""
        src = Source(text, path, self.language)
        bounds = paragraph_starts(text.split("\n"), 1, src.line_count)
        chunks = []
        for start, end in split_span(src, 0, len(src.data), settings.max_tokens, bounds):
            body = src.slice(start, end)
            chunks.append(src.chunk(start, end, ChunkKind.PARAGRAPH, first_words(body),
                                    text=body))
        return chunks
