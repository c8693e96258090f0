"""Go, Rust, C and C++: functions, methods and types at definition level.

Go methods are labelled ``Receiver.Method``; Rust ``impl`` blocks and traits are containers
whose functions become ``Type.fn``; C++ classes hold their inline methods; namespaces,
``extern "C"`` blocks and Rust modules are walked through.
"""

from __future__ import annotations

from tree_sitter import Node

from contextd.chunkers.code import CodeChunker, CodeSpec, Def, default_name, node_text
from contextd.records import ChunkKind
from contextd.text.languages import extensions_of

FUNCTION = Def(ChunkKind.CODE_FUNCTION, "function")
STRUCT = Def(ChunkKind.CODE_CLASS, "struct")
ENUM = Def(ChunkKind.CODE_CLASS, "enum")
TYPE = Def(ChunkKind.CODE_CLASS, "type")
GO_TYPE_KINDS = {"struct_type": "struct", "interface_type": "interface"}


def go_classify(node: Node, wrapper: str) -> tuple[Def, str] | None:
    """A Go type declaration is named by its (first) type spec and kinded by what it declares."""
    if node.type != "type_declaration":
        return None
    spec = next((c for c in node.named_children if c.type in ("type_spec", "type_alias")), None)
    if spec is None:
        return None
    declared = spec.child_by_field_name("type")
    kind = GO_TYPE_KINDS.get(declared.type if declared is not None else "", "type")
    return Def(ChunkKind.CODE_CLASS, kind), node_text(spec.child_by_field_name("name"))


def go_name(node: Node) -> str | None:
    """``Receiver.Method`` for methods (pointer receivers unwrapped), else the plain name."""
    name = default_name(node)
    receiver = node.child_by_field_name("receiver")
    if node.type != "method_declaration" or receiver is None:
        return name
    type_text = node_text(next((c.child_by_field_name("type") for c in receiver.named_children),
                               None))
    base = type_text.lstrip("*").split("[", 1)[0]
    return f"{base}.{name}" if base else name


def rust_name(node: Node) -> str | None:
    """An ``impl`` is named by the type it implements for."""
    if node.type == "impl_item":
        return node_text(node.child_by_field_name("type")).split("<", 1)[0]
    return default_name(node)


GO = CodeSpec(
    name="go",
    grammar="go",
    extensions=extensions_of("go"),
    definitions={"function_declaration": FUNCTION, "method_declaration": FUNCTION},
    query="go.scm",
    import_types=frozenset({"import_declaration", "package_clause"}),
    classify=go_classify,
    name_of=go_name,
)

RUST = CodeSpec(
    name="rust",
    grammar="rust",
    extensions=extensions_of("rust"),
    definitions={
        "function_item": FUNCTION,
        "function_signature_item": FUNCTION,
        "struct_item": STRUCT,
        "union_item": STRUCT,
        "enum_item": ENUM,
        "type_item": TYPE,
        "trait_item": Def(ChunkKind.CODE_CLASS, "trait", container=True),
        "impl_item": Def(ChunkKind.CODE_CLASS, "", container=True),
        "macro_definition": Def(ChunkKind.CODE_FUNCTION, "macro"),
    },
    query="rust.scm",
    scopes=frozenset({"mod_item"}),
    attribute_prefixes=("#[",),
    import_types=frozenset({"use_declaration", "extern_crate_declaration"}),
    name_of=rust_name,
)

C_DEFINITIONS = {
    "function_definition": FUNCTION,
    "struct_specifier": STRUCT,
    "union_specifier": STRUCT,
    "enum_specifier": ENUM,
    "type_definition": TYPE,
}

C = CodeSpec(
    name="c",
    grammar="c",
    extensions=extensions_of("c"),
    definitions=C_DEFINITIONS,
    query="c.scm",
    scopes=frozenset({"linkage_specification"}),
    import_types=frozenset({"preproc_include"}),
)

CPP = CodeSpec(
    name="cpp",
    grammar="cpp",
    extensions=extensions_of("cpp"),
    definitions={
        **C_DEFINITIONS,
        "class_specifier": Def(ChunkKind.CODE_CLASS, "class", container=True),
        "struct_specifier": Def(ChunkKind.CODE_CLASS, "struct", container=True),
    },
    query="cpp.scm",
    wrappers=frozenset({"template_declaration"}),
    scopes=frozenset({"namespace_definition", "linkage_specification"}),
    import_types=frozenset({"preproc_include", "using_declaration"}),
)


def chunkers() -> list[CodeChunker]:
    return [CodeChunker(GO), CodeChunker(RUST), CodeChunker(C), CodeChunker(CPP)]
