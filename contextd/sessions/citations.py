"""Citations of a report, checked against the files they cite.

An agent writes a report from search results; a citation that points at the wrong lines, or
a quote the file does not hold, misleads whoever reads it. So every citation (an object with a
``file`` inside an array variable) is resolved here before rendering: the file must lie inside
the project, its lines must exist, a given quote must be found in them (when it is found
elsewhere in the file the lines are corrected, with a warning), a missing quote is taken from
the file, and the citation gets its ``file://`` URI and Markdown link.
"""

from __future__ import annotations

import os
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from contextd.text.languages import fence_for_path

_SPACES = re.compile(r"\s+")


@dataclass
class CitationCheck:
    """What resolving a report's citations found: problems that stop the report, warnings
    that go with it, and the distinct citations in order of first use."""

    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    references: list[dict[str, Any]] = field(default_factory=list)


class CitationResolver:
    """Resolves citations against the files of one project root."""

    def __init__(self, root: Path, max_quote_lines: int):
        self.root = root.resolve()
        self.max_quote_lines = max_quote_lines
        self.check = CitationCheck()
        self._numbers: dict[tuple, int] = {}
        self._lines: dict[str, list[str] | None] = {}

    def resolve_all(self, variables: dict[str, Any]) -> dict[str, Any]:
        """``variables`` with every citation of every array variable resolved in place of
        the given one."""
        resolved = dict(variables)
        for name, value in variables.items():
            if isinstance(value, list) and any(isinstance(i, dict) and "file" in i
                                               for i in value):
                resolved[name] = [self.resolve(f"{name}[{n}]", item) if isinstance(item, dict)
                                  and "file" in item else item for n, item in enumerate(value)]
        return resolved

    def resolve(self, where: str, item: dict[str, Any]) -> dict[str, Any]:
        """One citation with its file, lines, quote, URI, link and number."""
        rel = self._relative(where, item.get("file"))
        if rel is None:
            return item
        pages = _int_list(item.get("pages"))
        lines = self._file_lines(rel)
        start, end = item.get("start_line"), item.get("end_line")
        quote = item.get("quote")
        if lines is None or (pages and start is None):
            if not pages:
                self.check.errors.append(f"{where}: {rel} is not a text file; cite it by "
                                         "pages")
                return item
            span = None
        else:
            span = self._span(where, rel, lines, start, end, quote)
            if span is None:
                return item
            start, end = span
            if not quote:
                quote = textwrap.dedent("\n".join(lines[start - 1:end]))
        quote = _trim(str(quote or ""), self.max_quote_lines)
        uri = (self.root / rel).as_uri()
        fragment = f"#page={pages[0]}" if pages else (
            f"#L{start}" + (f"-L{end}" if end != start else ""))
        location = (f"{rel} p.{pages[0]}" + (f"-{pages[-1]}" if pages[-1] != pages[0] else "")
                    if pages else f"{rel}:{_lines(start, end)}")
        key = (rel, start, end, tuple(pages))
        number = self._numbers.setdefault(key, len(self._numbers) + 1)
        citation = {**item, "file": rel, "start_line": start, "end_line": end,
                    "pages": pages, "quote": quote, "file_uri": uri, "uri": uri + fragment,
                    "location": location, "link": f"[{location}]({uri}{fragment})",
                    "number": number, "fence": _fence(quote),
                    "language": item.get("language") or fence_for_path(rel)}
        if number > len(self.check.references):
            self.check.references.append(citation)
        return citation

    # ----- parts -----------------------------------------------------------------------
    def _relative(self, where: str, file: Any) -> str | None:
        """The root-relative POSIX path of a cited file, or None (with an error)."""
        if not isinstance(file, str) or not file.strip():
            self.check.errors.append(f"{where}.file: give the cited file's path")
            return None
        text = file.strip()
        if text.startswith("file://"):
            text = unquote(urlparse(text).path)
        path = Path(text) if os.path.isabs(text) else self.root / text
        real = Path(os.path.realpath(path))
        if real != self.root and self.root not in real.parents:
            self.check.errors.append(f"{where}.file: {file} is outside the project root "
                                     f"{self.root}")
            return None
        if not real.is_file():
            self.check.errors.append(f"{where}.file: {file} does not exist in the project")
            return None
        return real.relative_to(self.root).as_posix()

    def _file_lines(self, rel: str) -> list[str] | None:
        """The file's lines, or None for a file that is not text."""
        if rel not in self._lines:
            try:
                data = (self.root / rel).read_bytes()
                self._lines[rel] = None if b"\0" in data[:8192] else data.decode(
                    "utf-8").splitlines()
            except (OSError, UnicodeDecodeError):
                self._lines[rel] = None
        return self._lines[rel]

    def _span(self, where: str, rel: str, lines: list[str], start: Any, end: Any,
              quote: Any) -> tuple[int, int] | None:
        """The checked (start, end) lines of a citation, or None (with an error)."""
        if start is None:
            found = _find_quote(lines, quote) if quote else None
            if found is None:
                self.check.errors.append(
                    f"{where}: give start_line (and end_line) of the cited lines in {rel}"
                    + (", or a quote found in it" if quote else ""))
            return found
        end = start if end is None else end
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, end)):
            self.check.errors.append(f"{where}: start_line and end_line must be integers")
            return None
        if not 1 <= start <= end <= len(lines):
            self.check.errors.append(f"{where}: line(s) {_lines(start, end)} are not in {rel} "
                                     f"({len(lines)} lines)")
            return None
        if quote and _find_quote(lines[start - 1:end], quote) is None:
            found = _find_quote(lines, quote)
            if found is None:
                self.check.warnings.append(f"{where}: the quote is not in {rel} (compare it "
                                           "with the file)")
            else:
                self.check.warnings.append(f"{where}: the quote is at {rel}:"
                                           f"{_lines(*found)}, not {_lines(start, end)}; "
                                           "cited that")
                return found
        return start, end


def _find_quote(lines: list[str], quote: str) -> tuple[int, int] | None:
    """1-based (first, last) lines holding ``quote``, whitespace-insensitive; the quote's
    first and last lines may be parts of lines."""
    wanted = [w for w in (_norm(line) for line in str(quote).splitlines()) if w]
    if not wanted:
        return None
    text = [_norm(line) for line in lines]
    for first, line in enumerate(text):
        if wanted[0] not in line:
            continue
        at, last = first, first
        for piece in wanted[1:]:
            at += 1
            while at < len(text) and not text[at]:
                at += 1
            if at >= len(text) or piece not in text[at]:
                break
            last = at
        else:
            return first + 1, last + 1
    return None


def _lines(start: int, end: int) -> str:
    return f"{start}-{end}" if end != start else str(start)


def _norm(line: str) -> str:
    return _SPACES.sub(" ", line).strip()


def _trim(quote: str, max_lines: int) -> str:
    lines = quote.rstrip("\n").splitlines()
    return "\n".join(lines[:max_lines] + (["…"] if len(lines) > max_lines else []))


def _fence(text: str) -> str:
    """A backtick fence longer than any run of backticks in ``text``."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def _int_list(value: Any) -> list[int]:
    if value is None or value == "":
        return []
    values = value if isinstance(value, list) else [value]
    try:
        return [int(v) for v in values]
    except (TypeError, ValueError):
        return []
