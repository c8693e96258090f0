"""Markdown: one chunk per ATX heading section, labelled with the heading
path ("Install > From source"); long sections cut at paragraphs; code fences as CODE_BLOCK
chunks labelled with their language, the heading path as their parent and context. A section
that holds only its heading ("# Guide" straight before "## Install") joins the section or
code block that follows: a chunk of one heading line costs budget and answers nothing.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from contextd.chunkers.core import Source, Unit, emit_unit, trim_span
from contextd.config.sections import LanguageChunking
from contextd.records import Chunk, ChunkKind
from contextd.text.languages import extensions_of

_HEADING_RE = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE_RE = re.compile(r" {0,3}(`{3,}|~{3,})[ \t]*([^\s`{]*)")
# What a line that opens a fence or is a heading starts with: every line either regex above
# matches starts so. One scan of the file finds them, where matching both regexes on every
# line was most of the chunker's own time on prose (issue 37).
_MARK_RE = re.compile(r"^ {0,3}(?:`{3}|~{3}|#)", re.MULTILINE)


def paragraph_starts(lines: list[str], first: int, last: int) -> dict[int, int]:
    """Lines (1-based) that open a paragraph within ``first..last``: preferred cuts."""
    return {n: 0 for n in range(first + 1, last + 1)
            if not lines[n - 2].strip() and lines[n - 1].strip()}


class MarkdownChunker:
    name = "markdown"
    language = "markdown"
    extensions = extensions_of("markdown")
    filenames = ()

    def chunk(self, text: str, path: str, settings: LanguageChunking) -> list[Chunk]:
        """Chunks of a Markdown document (see the module docstring)."""
        src = Source(text, path, self.language)
        lines = text.split("\n")
        units = self._units(src, lines, settings, PurePosixPath(path).stem)
        return [c for unit in units for c in emit_unit(src, unit, settings.max_tokens)]

    def _units(self, src: Source, lines: list[str], settings: LanguageChunking,
               title: str) -> list[Unit]:
        units: list[Unit] = []
        path: list[tuple[int, str]] = []
        section_start, after_fence = 1, 0

        def close(end_line: int, final: bool = False) -> bool:
            """Emit the section ending at ``end_line``; False when it holds only headings and
            so waits to join what follows."""
            if end_line >= section_start:
                if not final and _only_headings(lines, section_start - 1, end_line):
                    return False
                label = " > ".join(t for _, t in path) or title
                self._add(src, units, lines, section_start, end_line,
                          ChunkKind.MARKDOWN_SECTION, label, " > ".join(t for _, t in path[:-1]))
            return True

        for n in _marked_lines(src.text):
            if n < after_fence:
                continue
            line = lines[n]
            fence = _FENCE_RE.match(line)
            if fence:
                end = _fence_end(lines, n, fence.group(1))
                if settings.preserve_code_blocks:
                    first = n + 1 if close(n) else section_start
                    heading = " > ".join(t for _, t in path)
                    self._add(src, units, lines, first, end + 1, ChunkKind.CODE_BLOCK,
                              f"{fence.group(2) or 'text'} code", heading)
                    section_start = end + 2
                after_fence = end + 1
                continue
            heading = _HEADING_RE.match(line)
            if heading and settings.split_by_headings:
                if close(n):
                    section_start = n + 1
                level = len(heading.group(1))
                while path and path[-1][0] >= level:
                    path.pop()
                path.append((level, (heading.group(2) or "").strip() or "#" * level))
        close(len(lines), final=True)
        return units

    @staticmethod
    def _add(src: Source, units: list[Unit], lines: list[str], first: int, last: int,
             kind: ChunkKind, label: str, parent: str) -> None:
        start, end = trim_span(src, src.line_start(first), src.line_end(min(last, len(lines))))
        if end > start:
            # Paragraph starts are looked for only in a unit over the cap (emit_unit).
            units.append(Unit(start, end, kind, label, (), parent, parent,
                              lambda: paragraph_starts(lines, first, last), label))


def _marked_lines(text: str) -> list[int]:
    """Indexes (0-based, as in ``text.split("\n")``) of the lines that may open a fence or
    be a heading, in order: the only lines where a section or code block can start."""
    found: list[int] = []
    line = pos = 0
    for match in _MARK_RE.finditer(text):
        line += text.count("\n", pos, match.start())
        pos = match.start()
        found.append(line)
    return found


def _only_headings(lines: list[str], first: int, end: int) -> bool:
    """Whether ``lines[first:end]`` hold ATX headings and blank lines only (read in place:
    copying a long section's lines to look at its first few cost a copy per section)."""
    return all(not lines[n].strip()
               or (lines[n].lstrip().startswith("#") and _HEADING_RE.match(lines[n]))
               for n in range(first, end))


def _fence_end(lines: list[str], open_line: int, marker: str) -> int:
    """Index of the line closing the fence opened at ``open_line`` (the last line if none)."""
    for n in range(open_line + 1, len(lines)):
        stripped = lines[n].strip()
        if stripped.startswith(marker[0] * len(marker)) and not stripped.strip(marker[0]):
            return n
    return len(lines) - 1
