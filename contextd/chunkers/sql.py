"""SQL: one chunk per statement with the comments above it, labelled by
statement type and object ("CREATE TABLE users", "INSERT INTO orders").

A regular-expression scanner finds the ``;`` that end statements while skipping strings,
quoted names, comments and PostgreSQL dollar-quoted bodies; it does not need a dialect.
"""

from __future__ import annotations

import re

from contextd.chunkers.core import Source, Unit, emit_unit, fill_gaps, trim_span
from contextd.config.sections import LanguageChunking
from contextd.records import Chunk, ChunkKind, SymbolDef
from contextd.text.languages import extensions_of

_TOKEN_RE = re.compile(r"--[^\n]*|/\*.*?(?:\*/|\Z)|'(?:[^']|'')*(?:'|\Z)|\"[^\"]*(?:\"|\Z)"
                       r"|`[^`]*(?:`|\Z)|\$([A-Za-z_]\w*|)\$.*?(?:\$\1\$|\Z)|;", re.S)
_COMMENT_RE = re.compile(r"\s*(?:--[^\n]*|/\*.*?\*/)", re.S)
_NAME = r"((?:[\w$]+|\"[^\"]+\"|`[^`]+`|\[[^\]]+\])(?:\s*\.\s*(?:[\w$]+|\"[^\"]+\"|`[^`]+`))*)"
_CREATE_RE = re.compile(
    r"(CREATE|ALTER|DROP)\s+(?:OR\s+REPLACE\s+)?(?:(?:GLOBAL|LOCAL|TEMP|TEMPORARY|UNIQUE|"
    r"MATERIALIZED|UNLOGGED|VIRTUAL|RECURSIVE)\s+)*(TABLE|INDEX|VIEW|FUNCTION|PROCEDURE|TRIGGER|"
    r"SEQUENCE|SCHEMA|TYPE|DATABASE|EXTENSION|DOMAIN|POLICY|ROLE|MACRO)\s+"
    r"(?:CONCURRENTLY\s+)?(?:IF\s+(?:NOT\s+)?EXISTS\s+)?" + _NAME, re.I)
_DML_RE = re.compile(r"(INSERT\s+INTO|DELETE\s+FROM|UPDATE|MERGE\s+INTO|TRUNCATE(?:\s+TABLE)?|"
                     r"COPY)\s+" + _NAME, re.I)
_FROM_RE = re.compile(r"\bFROM\s+" + _NAME, re.I)
_DEFINED = {"TABLE": "table", "VIEW": "view", "FUNCTION": "function", "PROCEDURE": "function",
            "TYPE": "type", "INDEX": "index", "SEQUENCE": "sequence", "TRIGGER": "trigger",
            "MACRO": "function"}


def statement_label(text: str) -> tuple[str, tuple[SymbolDef, ...], tuple[str, ...]]:
    """Label, defined symbols and referenced tables of one statement (comments skipped)."""
    body = text
    while (m := _COMMENT_RE.match(body)) is not None and m.end() > 0:
        body = body[m.end():]
    body = body.lstrip()
    if (m := _CREATE_RE.match(body)) is not None:
        verb, what, name = m.group(1).upper(), m.group(2).upper(), _unquote(m.group(3))
        symbol = _DEFINED.get(what)
        defines = (SymbolDef(name, symbol, 1),) if symbol and verb == "CREATE" else ()
        return f"{verb} {what} {name}", defines, ()
    if (m := _DML_RE.match(body)) is not None:
        name = _unquote(m.group(2))
        return f"{' '.join(m.group(1).upper().split())} {name}", (), (name,)
    words = body.split(None, 1)
    verb = words[0].upper().rstrip(";") if words else "STATEMENT"
    if (m := _FROM_RE.search(body)) is not None:
        name = _unquote(m.group(1))
        return f"{verb} FROM {name}", (), (name,)
    return verb, (), ()


def _unquote(name: str) -> str:
    return re.sub(r"[\"`\[\]\s]", "", name)


class SqlChunker:
    name = "sql"
    language = "sql"
    extensions = extensions_of("sql")
    filenames = ()

    def chunk(self, text: str, path: str, settings: LanguageChunking) -> list[Chunk]:
        """One chunk per statement (see the module docstring)."""
        src = Source(text, path, self.language)
        units: list[Unit] = []
        start = byte = 0
        ends = [m.end() for m in _TOKEN_RE.finditer(text) if m.group() == ";"]
        for end in [*ends, len(text)]:
            piece = text[start:end]
            size = len(piece) if piece.isascii() else len(piece.encode("utf-8"))
            unit = self._unit(src, piece, byte, byte + size)
            if unit is not None:
                units.append(unit)
            start, byte = end, byte + size
        units = fill_gaps(src, units, 0, len(src.data), lambda s, e: Unit(
            s, e, ChunkKind.COMMENT, "comment"))
        return [c for unit in units for c in emit_unit(src, unit, settings.max_tokens)]

    @staticmethod
    def _unit(src: Source, piece: str, start: int, end: int) -> Unit | None:
        """The unit of one statement (``piece`` is the text of bytes ``start..end``); None
        for a stretch of comments alone, which the gap filler keeps as a COMMENT chunk."""
        if not _COMMENT_RE.sub("", piece).strip(" \t\r\n;"):
            return None
        start, end = trim_span(src, start, end)
        label, defines, refs = statement_label(piece)
        line = src.line_of(start)
        defines = tuple(SymbolDef(d.name, d.kind, line) for d in defines)
        return Unit(start, end, ChunkKind.SQL_STATEMENT, label, defines, references=refs)
