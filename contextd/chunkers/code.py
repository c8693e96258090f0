"""The tree-sitter engine behind every code chunker; languages differ only by a CodeSpec.

Only the top levels of the tree are walked: the root's children, the bodies of scopes
(namespaces) and, for a class over the cap, its members. Everything between definitions
(imports, module-level statements) becomes "imports"/"module code" chunks, so every non-blank
line lands in a chunk. References (calls, imports, base classes) come from one tree-sitter
query per language (``queries/<lang>.scm``) run once per file and handed to the chunks whose
bytes hold them.
"""

from __future__ import annotations

import functools
from bisect import bisect_left
from operator import attrgetter
from dataclasses import dataclass, field
from importlib import resources
from pathlib import PurePosixPath
from typing import Callable, Mapping

from tree_sitter import Node, Query, QueryCursor

from contextd.chunkers.core import Source, Unit, UnparsableFile, emit_unit, fill_gaps
from contextd.chunkers.grammars import get_language, get_parser
from contextd.config.sections import LanguageChunking
from contextd.records import Chunk, ChunkKind, SymbolDef

# Node types that carry a definition's name when it has no ``name`` field.
NAME_TYPES = frozenset({"identifier", "type_identifier", "simple_identifier", "field_identifier",
                        "qualified_identifier", "property_identifier", "destructor_name",
                        "operator_name"})
BODY_TYPES = frozenset({"class_body", "declaration_list", "field_declaration_list",
                        "enum_class_body", "interface_body", "block"})
# A tree whose top-level ERROR nodes cover more than this share of the file is not trusted.
MAX_ERROR_SHARE = 0.5
# Descendant levels scanned for statement starts when an oversize unit is cut.
BOUNDARY_DEPTH = 4


@dataclass(frozen=True)
class Def:
    """How a node type chunks: its chunk kind, the SymbolDef kind it defines ("" for none,
    e.g. a Rust impl) and whether its members are split out when it is over the cap."""

    kind: ChunkKind
    symbol: str
    container: bool = False


@dataclass(frozen=True)
class CodeSpec:
    """Everything language-specific about a tree-sitter code chunker."""

    name: str
    grammar: str
    extensions: tuple[str, ...]
    definitions: Mapping[str, Def]
    query: str
    filenames: tuple[str, ...] = ()
    wrappers: frozenset[str] = frozenset()  # e.g. decorated_definition, export_statement
    scopes: frozenset[str] = frozenset()  # e.g. namespace_definition: walked through
    doc_prefixes: tuple[str, ...] = ("//", "/*", "*")  # comment lines kept with a definition
    # Attribute lines above a definition (``#[derive]``): kept with it even when
    # preserve_docstrings is off, since they are part of the code.
    attribute_prefixes: tuple[str, ...] = ()
    import_types: frozenset[str] = frozenset()  # top-level nodes that make an "imports" chunk
    # Special cases: (node, wrapper type or "") -> (Def, name) or None.
    classify: Callable[[Node, str], tuple[Def, str] | None] | None = None
    name_of: Callable[[Node], str | None] = field(default=lambda node: default_name(node))
    module_docstring: bool = False


def node_text(node: Node | None) -> str:
    return node.text.decode("utf-8", "replace") if node is not None else ""


def default_name(node: Node) -> str | None:
    """A definition's name: its ``name`` field, else the end of its declarator chain (C/C++),
    else its first identifier-like child (Kotlin)."""
    name = node.child_by_field_name("name")
    if name is not None:
        return node_text(name)
    declarator = node.child_by_field_name("declarator")
    while declarator is not None:
        if declarator.type in NAME_TYPES:
            return node_text(declarator).replace("::", ".")
        declarator = declarator.child_by_field_name("declarator")
    for child in node.named_children:
        if child.type in NAME_TYPES:
            return node_text(child)
    return None


def body_of(node: Node) -> Node | None:
    """The member list of a class-like node."""
    body = node.child_by_field_name("body")
    if body is not None:
        return body
    for child in node.named_children:
        if child.type in BODY_TYPES:
            return child
    return None


def signature_of(data: bytes, node: Node, body: Node | None) -> str:
    """The header of a definition (up to its body, else its first line), whitespace collapsed:
    the context that split-out members and later pieces of a long function carry. Sliced from
    the file's bytes ``data``, so only the header is copied and decoded."""
    start = node.start_byte
    if body is None:
        stop = data.find(b"\n", start, node.end_byte)
        return data[start:node.end_byte if stop == -1 else stop].decode("utf-8", "replace").strip()
    return " ".join(data[start:body.start_byte].decode("utf-8", "replace").split())


class CodeChunker:
    """A chunker for one tree-sitter language, driven by its CodeSpec."""

    def __init__(self, spec: CodeSpec):
        self.spec = spec
        self.name = spec.name
        self.language = spec.name
        self.extensions = spec.extensions
        self.filenames = spec.filenames

    @functools.cached_property
    def _parser(self):
        return get_parser(self.spec.grammar)

    @functools.cached_property
    def _query(self) -> Query:
        text = resources.files("contextd.chunkers").joinpath("queries", self.spec.query)
        return Query(get_language(self.spec.grammar), text.read_text(encoding="utf-8"))

    def chunk(self, text: str, path: str, settings: LanguageChunking) -> list[Chunk]:
        """Chunks of one file (see the module docstring)."""
        src = Source(text, path, self.language)
        cap = settings.max_tokens
        root = self._parser.parse(src.data).root_node
        if _unusable(root, len(src.data)):
            raise UnparsableFile(f"more than {MAX_ERROR_SHARE:.0%} of the file is syntax errors")
        walker = _Walker(self.spec, src, settings)
        units = walker.units(root.named_children, "", "", "", 0)
        units = fill_gaps(src, units, 0, len(src.data), walker.gap_factory(root))
        overlap = cap * settings.overlap_percent // 100
        references = self._reference_finder(root)
        return [c for unit in units for c in emit_unit(src, unit, cap, overlap, references)]

    def _reference_finder(self, root: Node) -> Callable[[int, int], tuple[str, ...]]:
        """``(start, end) ->`` the sorted names the reference query found inside those bytes:
        the query runs once per file, each chunk then costs two bisections."""
        captures = QueryCursor(self._query).captures(root).get("ref", [])
        # Ordered by start alone: names that start at the same byte are found together and
        # sorted by find, so comparing them here was wasted; the captures come nearly in
        # order, which the sort passes over in one run (issue 37).
        captures.sort(key=_start_byte)
        starts = [n.start_byte for n in captures]
        # Names stay bytes until a chunk needs them: UTF-8 bytes sort and compare as the text.
        names = [n.text.strip(b"\"'<>`") for n in captures]

        def find(start: int, end: int) -> tuple[str, ...]:
            lo = bisect_left(starts, start)
            hi = bisect_left(starts, end, lo)
            if hi == lo:
                return ()
            found = set(names[lo:hi])
            found.discard(b"")
            return tuple(name.decode("utf-8", "replace") for name in sorted(found))

        return find


def _unusable(root: Node, size: int) -> bool:
    if not root.has_error or size == 0:
        return False
    broken = sum(c.end_byte - c.start_byte for c in root.children if c.type == "ERROR")
    return broken > size * MAX_ERROR_SHARE or root.type == "ERROR"


def node_boundaries(nodes, first: int, last: int, depth: int = 0,
                    out: dict[int, int] | None = None) -> dict[int, int]:
    """Start lines of statements among ``nodes`` and their descendants (line -> depth), within
    lines ``first..last``: where an oversize unit prefers to be cut."""
    out = {} if out is None else out
    for node in nodes:
        row_start = node.start_point[0] + 1
        if row_start > last:
            break  # siblings are in order: the rest start later still
        row_end = node.end_point[0] + 1
        if row_end < first:
            continue
        if row_start >= first and out.get(row_start, depth + 1) > depth:
            out[row_start] = depth
        if depth < BOUNDARY_DEPTH and row_end > row_start:
            node_boundaries(node.named_children, first, last, depth + 1, out)
    return out


_start_byte = attrgetter("start_byte")

COMMENT_TYPES = frozenset({"comment", "line_comment", "block_comment", "multiline_comment"})


class _Walker:
    """Turns the top levels of one file's tree into units (see the module docstring)."""

    def __init__(self, spec: CodeSpec, src: Source, settings: LanguageChunking):
        self.spec = spec
        self.src = src
        self.settings = settings
        self.cap = settings.max_tokens
        above = (spec.doc_prefixes if settings.preserve_docstrings else ()) \
            + spec.attribute_prefixes
        self.doc_prefixes = tuple(p.encode() for p in above)

    def units(self, nodes: list[Node], prefix: str, parent: str, context: str,
              lower: int, limit: int | None = None) -> list[Unit]:
        """Units for the definitions among sibling ``nodes``; docs may not reach above byte
        ``lower`` and no unit grows past byte ``limit``."""
        spec = self.spec
        out: list[Unit] = []
        first_statement = True
        for node in nodes:
            if node.type in spec.scopes:
                body = body_of(node)
                if body is not None:
                    bound = out[-1].end if out else lower
                    out.extend(self.units(body.named_children, prefix, parent, context,
                                          max(bound, body.start_byte), body.end_byte))
                continue
            if node.type in COMMENT_TYPES:
                continue
            if first_statement and not prefix and spec.module_docstring and _is_docstring(node):
                out.append(self._docstring_unit(node))
            first_statement = False
            found = self.definition(node)
            if found is not None:
                bound = out[-1].end if out else lower
                out.extend(self.unit(node, *found, prefix, parent, context, bound))
        self._extend_ends(out, len(self.src.data) if limit is None else limit)
        return out

    def definition(self, node: Node) -> tuple[Node, Def, str] | None:
        """(inner node, Def, name) when ``node`` is (or wraps) a definition."""
        spec, wrapper, inner = self.spec, "", node
        if node.type in spec.wrappers:
            wrapper = node.type
            inner = (node.child_by_field_name("definition")
                     or node.child_by_field_name("declaration"))
            if inner is None:
                inner = next((c for c in node.named_children if c.type in spec.definitions),
                             None)
            if inner is None:
                return None
        if spec.classify is not None:  # an exported value is a chunk only by split_by_export
            special = spec.classify(inner, wrapper if self.settings.split_by_export else "")
            if special is not None:
                return inner, special[0], special[1]
        found = spec.definitions.get(inner.type)
        if found is None or not (found.container or self.settings.split_by_function):
            return None
        return inner, found, spec.name_of(inner) or "(anonymous)"

    def unit(self, node: Node, inner: Node, d: Def, name: str, prefix: str, parent: str,
             context: str, bound: int) -> list[Unit]:
        """The unit(s) of one definition: a class over the cap yields its header and members."""
        label = prefix + name
        start = self._attach_docs(node, bound)
        end = node.end_byte
        kind = "method" if parent and d.symbol == "function" else d.symbol
        line = inner.start_point[0] + 1
        defines = (SymbolDef(label, kind, line),) if d.symbol else ()
        body = body_of(inner) if d.container else inner.child_by_field_name("body")
        signature = signature_of(self.src.data, inner, body)
        if d.container and body is not None:
            if (self.settings.split_by_class
                    and self.src.tokens(start, end) > self.cap):
                return self._split_container(start, end, d, label, body, signature, parent,
                                             context, defines)
            defines += self._member_defines(body, label)
        scope = body if body is not None else inner
        return [Unit(start, end, d.kind, label, defines, context, parent,
                     self._bounds(scope, start, end), signature)]

    def _split_container(self, start: int, end: int, d: Def, label: str, body: Node,
                         signature: str, parent: str, context: str,
                         defines: tuple[SymbolDef, ...]) -> list[Unit]:
        """A large class as its header (signature, docstring, fields) plus one unit per member,
        each labelled ``Class.member`` and carrying the class signature as context."""
        members = self.units(body.named_children, label + ".", label, signature,
                             body.start_byte, body.end_byte)

        def gap(g_start: int, g_end: int) -> Unit:
            return Unit(g_start, g_end, d.kind, label, (), signature, parent,
                        self._bounds(body, g_start, g_end), signature)

        units = fill_gaps(self.src, members, start, end, gap)
        if units and units[0].label == label:
            units[0].defines, units[0].context = defines, context
        elif units:
            units.insert(0, Unit(start, start, d.kind, label, defines, context, parent))
        if len(units) > 1 and not any(units[0].start <= c.start_byte < units[0].end
                                      for c in body.named_children
                                      if c.type not in COMMENT_TYPES):
            # A header with no docstring or field of its own joins its first member: alone
            # (``class Source(enum.IntEnum):``) it would answer for the class's name with
            # nothing to read.
            header, first = units[0], units[1]
            first.start, first.defines = header.start, header.defines + first.defines
            first.context = header.context
            units = units[1:]
        return [u for u in units if u.end > u.start or u.defines]

    def _member_defines(self, body: Node, label: str) -> tuple[SymbolDef, ...]:
        defines = []
        for child in body.named_children:
            found = self.definition(child)
            if found is not None and found[1].symbol:
                kind = "method" if found[1].symbol == "function" else found[1].symbol
                defines.append(SymbolDef(f"{label}.{found[2]}", kind,
                                         found[0].start_point[0] + 1))
        return tuple(defines)

    def _bounds(self, scope: Node, start: int, end: int) -> Callable[[], dict[int, int]]:
        """Preferred cut lines among ``scope``'s children, listed only if the unit is cut.

        No cut falls at or before the first statement inside the unit: a definition's header
        alone (``def f(x):``, ``class Source(enum.IntEnum):``) says nothing without the
        docstring or first lines that follow it, and would outrank them for its own name."""
        src = self.src

        def bounds() -> dict[int, int]:
            first, last = src.line_of(start), src.line_of(max(start, end - 1))
            found = node_boundaries(scope.named_children, first, last)
            opening = next((c.start_point[0] + 1 for c in scope.named_children
                            if c.start_byte >= start and c.type not in COMMENT_TYPES), first)
            return {line: depth for line, depth in found.items() if line > opening}

        return bounds

    def _attach_docs(self, node: Node, bound: int) -> int:
        """Start of a definition's unit: its line's indentation and the comment/attribute lines
        directly above it (JSDoc, KDoc, Javadoc, ``///``, ``#[derive]``), never above ``bound``."""
        src = self.src
        line = node.start_point[0] + 1
        line_start = src.line_start(line)
        if line_start < bound or src.data[line_start:node.start_byte].strip():
            return node.start_byte
        start = line_start
        while line > 1:
            prev = src.line_start(line - 1)
            if prev < bound or not src.data[prev:src.line_end(line - 1)].lstrip().startswith(
                    self.doc_prefixes):
                break
            line -= 1
            start = prev
        return start

    def _extend_ends(self, units: list[Unit], limit: int) -> None:
        """Let each unit take the rest of its last line (``;``, a trailing comment), unless
        the next unit starts on that line."""
        data = self.src.data
        for i, unit in enumerate(units):
            stop = units[i + 1].start if i + 1 < len(units) else limit
            newline = data.find(b"\n", unit.end)
            newline = len(data) if newline == -1 else newline
            if unit.end < newline <= stop:
                unit.end += len(data[unit.end:newline].rstrip())

    def _docstring_unit(self, node: Node) -> Unit:
        path = PurePosixPath(self.src.path.replace("\\", "/"))
        stem = path.parent.name if path.stem == "__init__" and path.parent.name else path.stem
        return Unit(self.src.line_start(node.start_point[0] + 1), node.end_byte,
                    ChunkKind.DOCSTRING, stem, (SymbolDef(stem, "module", 1),))

    def gap_factory(self, scope: Node) -> Callable[[int, int], Unit]:
        """Makes the units for code between definitions: "imports" when only imports (and
        comments) lie there, else "module code"."""
        children = scope.named_children
        starts = [c.start_byte for c in children]
        import_types = self.spec.import_types | COMMENT_TYPES

        def gap(start: int, end: int) -> Unit:
            inside = children[bisect_left(starts, start):bisect_left(starts, end)]
            only_imports = (any(c.type in self.spec.import_types for c in inside)
                            and all(c.type in import_types for c in inside))
            label = "imports" if only_imports else "module code"
            return Unit(start, end, ChunkKind.CODE_BLOCK, label,
                        boundaries=self._bounds(scope, start, end))

        return gap


def _is_docstring(node: Node) -> bool:
    """A bare string statement (grammar versions differ on wrapping it)."""
    if node.type == "expression_statement" and node.named_child_count == 1:
        node = node.named_children[0]
    return node.type == "string"
