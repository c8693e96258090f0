"""YAML, TOML and JSON by key: one chunk per top-level key labelled with its
key path; a key over the token cap is split into its child keys ("services.database"), and a
value without child keys into line windows.

YAML and TOML are read line by line (keys at an indentation / table headers), which is fast and
survives files a strict parser would reject (templated YAML); JSON goes through tree-sitter.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass

from tree_sitter import Node

from contextd.chunkers.core import Source, Unit, emit_unit, fill_gaps, trim_span
from contextd.chunkers.grammars import get_parser
from contextd.chunkers.markdown import paragraph_starts
from contextd.config.sections import LanguageChunking
from contextd.records import Chunk, ChunkKind
from contextd.text.languages import extensions_of

_YAML_KEY_RE = re.compile(r"( *)(?:- )?(\"[^\"]*\"|'[^']*'|[^\s#'\"\-{\[][^:#]*?)[ \t]*:(?:[ \t]|$)")
_TOML_TABLE_RE = re.compile(r"[ \t]*\[\[?[ \t]*([^\]]+?)[ \t]*\]\]?[ \t]*(?:#.*)?$")
_TOML_KEY_RE = re.compile(r"[ \t]*(\"[^\"]*\"|'[^']*'|[A-Za-z0-9_.\- ]+?)[ \t]*=")
# How deep a key over the cap is split into child keys before line windows take over.
MAX_KEY_DEPTH = 4


@dataclass(frozen=True)
class KeyLine:
    """A line that opens a keyed block: 1-based line number, key path, nesting depth."""

    line: int
    key: str
    depth: int


class _KeyedChunker:
    """Chunks a file from its key lines (``KeyLine``, found by the subclass): one unit per
    key of the outer level, split into the next level's keys when over the cap."""

    kind = ChunkKind.CONFIG_BLOCK
    language = ""

    def chunk(self, text: str, path: str, settings: LanguageChunking) -> list[Chunk]:
        src = Source(text, path, self.language)
        lines = text.split("\n")
        units = self.keyed_units(src, lines, self.key_lines(lines), 1, len(lines), 0, "",
                                 settings.max_tokens)
        units = fill_gaps(src, units, 0, len(src.data), lambda s, e: Unit(
            s, e, self.kind, "(top level)", boundaries=lambda: paragraph_starts(lines, 1,
                                                                                len(lines))))
        return [c for unit in units for c in emit_unit(src, unit, settings.max_tokens)]

    def key_lines(self, lines: list[str]) -> list[KeyLine]:
        """Every key line of the file, in order."""
        raise NotImplementedError

    def keyed_units(self, src: Source, lines: list[str], keys: list[KeyLine], first: int,
                    last: int, depth: int, parent: str, cap: int) -> list[Unit]:
        """Units for the keys of ``depth`` within lines ``first..last`` (``keys``: the key lines
        of that range, in order); a unit over the cap is replaced by the units of its child
        keys (what precedes them keeps the key's label)."""
        lines_of = [k.line for k in keys]
        own = [k for k in keys if k.depth == depth]
        units: list[Unit] = []
        start_line = _attach_comments(lines, own[0].line, first - 1) if own else first
        for i, key in enumerate(own):
            next_start = (_attach_comments(lines, own[i + 1].line, key.line)
                          if i + 1 < len(own) else last + 1)
            end_line = next_start - 1
            start, end = trim_span(src, src.line_start(start_line), src.line_end(end_line))
            start_line = next_start
            if end <= start:
                continue
            # The keys inside this one's block only (bisected): scanning every key of the
            # file for each key was quadratic in a long file's keys (issue 37).
            block = keys[bisect_right(lines_of, key.line):bisect_right(lines_of, end_line)]
            has_children = any(k.depth == depth + 1 for k in block)
            if (has_children and depth + 1 < MAX_KEY_DEPTH
                    and src.tokens(start, end) > cap):
                inner = self.keyed_units(src, lines, block, key.line + 1, end_line, depth + 1,
                                         key.key, cap)
                units.extend(fill_gaps(src, inner, start, end, lambda s, e, k=key.key: Unit(
                    s, e, self.kind, k, parent=parent)))
            else:
                units.append(Unit(start, end, self.kind, key.key, parent=parent,
                                  boundaries=lambda a=key.line, b=end_line:
                                  paragraph_starts(lines, a, b)))
        return units


def _attach_comments(lines: list[str], line: int, floor: int) -> int:
    """First line of the comment block directly above ``line`` (not at or above ``floor``)."""
    while line - 1 > floor and lines[line - 2].lstrip().startswith("#"):
        line -= 1
    return line


class YamlChunker(_KeyedChunker):
    """YAML by key path; keys inside list items and block scalars are not split points."""

    name = "yaml"
    language = "yaml"
    extensions = extensions_of("yaml")
    filenames = ()
    kind = ChunkKind.YAML_BLOCK

    def key_lines(self, lines: list[str]) -> list[KeyLine]:
        keys: list[KeyLine] = []
        stack: list[tuple[int, str]] = []
        opaque_above = -1  # lines indented deeper than this belong to a list item/scalar
        for n, line in enumerate(lines, 1):
            stripped = line.lstrip(" ")
            if not stripped or stripped.startswith("#"):
                continue
            indent = len(line) - len(stripped)
            if opaque_above >= 0 and indent > opaque_above:
                continue
            opaque_above = -1
            if stripped.startswith(("---", "...")) and indent == 0:
                stack.clear()
                continue
            if stripped.startswith("- ") or stripped == "-":
                opaque_above = indent
                continue
            match = _YAML_KEY_RE.match(line)
            if match is None:
                continue
            while stack and stack[-1][0] >= indent:
                stack.pop()
            key = match.group(2).strip().strip("\"'")
            path = ".".join([k for _, k in stack] + [key])
            keys.append(KeyLine(n, path, len(stack)))
            stack.append((indent, key))
            if line.rstrip().endswith(("|", ">", "|-", ">-", "|+", ">+")):
                opaque_above = indent
        return keys


class TomlChunker(_KeyedChunker):
    """TOML by table (``[server]``, ``[[plugins]]``) and key; keys inside multi-line strings
    are skipped."""

    name = "toml"
    language = "toml"
    extensions = extensions_of("toml")
    filenames = ("Pipfile",)

    def key_lines(self, lines: list[str]) -> list[KeyLine]:
        keys: list[KeyLine] = []
        table, in_string = "", False
        for n, line in enumerate(lines, 1):
            if in_string:
                in_string = (line.count('"""') + line.count("'''")) % 2 == 0
                continue
            header = _TOML_TABLE_RE.match(line)
            if header:
                table = header.group(1).strip()
                keys.append(KeyLine(n, table, 0))
                continue
            match = _TOML_KEY_RE.match(line)
            if match:
                key = match.group(1).strip().strip("\"'")
                keys.append(KeyLine(n, f"{table}.{key}" if table else key, 1 if table else 0))
                in_string = (line.count('"""') + line.count("'''")) % 2 == 1
        return keys


class JsonChunker:
    """JSON by key path through tree-sitter pairs (byte spans, so minified files split too)."""

    name = "json"
    language = "json"
    extensions = extensions_of("json")
    filenames = (".babelrc", ".eslintrc")

    def chunk(self, text: str, path: str, settings: LanguageChunking) -> list[Chunk]:
        src = Source(text, path, self.language)
        root = get_parser("json").parse(src.data).root_node
        top = next((c for c in root.named_children if c.type == "object"), None)
        cap = settings.max_tokens
        units = self._pairs(src, top, "", 0, cap) if top is not None else []
        units = fill_gaps(src, units, 0, len(src.data), lambda s, e: Unit(
            s, e, ChunkKind.CONFIG_BLOCK, "(top level)",
            boundaries=lambda: _element_starts(root, src)))
        return [c for unit in units for c in emit_unit(src, unit, cap)]

    def _pairs(self, src: Source, obj: Node, parent: str, depth: int, cap: int) -> list[Unit]:
        units: list[Unit] = []
        for pair in obj.named_children:
            if pair.type != "pair":
                continue
            key_node = pair.child_by_field_name("key")
            key = key_node.text.decode("utf-8", "replace").strip("\"") if key_node else "?"
            label = f"{parent}.{key}" if parent else key
            value = pair.child_by_field_name("value")
            start, end = pair.start_byte, pair.end_byte
            if (value is not None and value.type == "object" and depth + 1 < MAX_KEY_DEPTH
                    and src.tokens(start, end) > cap):
                inner = self._pairs(src, value, label, depth + 1, cap)
                units.extend(fill_gaps(src, inner, start, end, lambda s, e, k=label: Unit(
                    s, e, ChunkKind.CONFIG_BLOCK, k, parent=parent)))
            else:
                units.append(Unit(start, end, ChunkKind.CONFIG_BLOCK, label, parent=parent,
                                  boundaries=lambda v=value: _element_starts(v, src)))
        return units


def _element_starts(node: Node | None, src: Source) -> dict[int, int]:
    """Start lines of a JSON value's elements/pairs: where a long value prefers to be cut."""
    if node is None:
        return {}
    return {c.start_point[0] + 1: 0 for c in node.named_children}
