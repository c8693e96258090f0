"""TypeScript, TSX and JavaScript: exported declarations with their JSDoc;
classes, functions, interfaces, type aliases, enums; arrow functions assigned to consts.

``export`` wraps a declaration and is kept in its chunk; an exported ``const`` of any value is
its own chunk, a private one only when it holds a function. Namespaces are walked through.
"""

from __future__ import annotations

from tree_sitter import Node

from contextd.chunkers.code import CodeChunker, CodeSpec, Def, node_text
from contextd.records import ChunkKind
from contextd.text.languages import extensions_of

FUNCTION = Def(ChunkKind.CODE_FUNCTION, "function")
CLASS = Def(ChunkKind.CODE_CLASS, "class", container=True)
INTERFACE = Def(ChunkKind.CODE_CLASS, "interface")
TYPE = Def(ChunkKind.CODE_CLASS, "type")
ENUM = Def(ChunkKind.CODE_CLASS, "enum")
VARIABLE = Def(ChunkKind.CODE_BLOCK, "variable")

FUNCTION_VALUES = frozenset({"arrow_function", "function_expression", "function",
                             "generator_function"})

JS_DEFINITIONS = {
    "function_declaration": FUNCTION,
    "generator_function_declaration": FUNCTION,
    "class_declaration": CLASS,
    "class": CLASS,
    "method_definition": FUNCTION,
}
TS_DEFINITIONS = {
    **JS_DEFINITIONS,
    "abstract_class_declaration": CLASS,
    "interface_declaration": INTERFACE,
    "type_alias_declaration": TYPE,
    "enum_declaration": ENUM,
    "function_signature": FUNCTION,
    "abstract_method_signature": FUNCTION,
}


def classify_variable(node: Node, wrapper: str) -> tuple[Def, str] | None:
    """``const f = () => ...`` is a function; an exported ``const X = ...`` a variable chunk."""
    if node.type not in ("lexical_declaration", "variable_declaration"):
        return None
    declarators = [c for c in node.named_children if c.type == "variable_declarator"]
    if not declarators:
        return None
    name = node_text(declarators[0].child_by_field_name("name"))
    value = declarators[0].child_by_field_name("value")
    if value is not None and value.type in FUNCTION_VALUES:
        return FUNCTION, name
    return (VARIABLE, name) if wrapper == "export_statement" else None


def _spec(name: str, grammar: str, query: str, definitions: dict[str, Def]) -> CodeSpec:
    return CodeSpec(
        name=name,
        grammar=grammar,
        extensions=extensions_of(name),
        definitions=definitions,
        query=query,
        wrappers=frozenset({"export_statement", "ambient_declaration"}),
        scopes=frozenset({"internal_module", "module"}),
        import_types=frozenset({"import_statement"}),
        classify=classify_variable,
    )


TYPESCRIPT = _spec("typescript", "typescript", "typescript.scm", TS_DEFINITIONS)
TSX = _spec("tsx", "tsx", "typescript.scm", TS_DEFINITIONS)
JAVASCRIPT = _spec("javascript", "javascript", "javascript.scm", JS_DEFINITIONS)


def chunkers() -> list[CodeChunker]:
    return [CodeChunker(TYPESCRIPT), CodeChunker(TSX), CodeChunker(JAVASCRIPT)]
