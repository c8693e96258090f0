"""Java and Kotlin: classes, interfaces, enums, objects and their methods, with Javadoc/KDoc.

Annotations are part of the declaration node in both grammars; the doc comment above a
declaration is attached by the shared engine.
"""

from __future__ import annotations

from contextd.chunkers.code import CodeChunker, CodeSpec, Def
from contextd.records import ChunkKind
from contextd.text.languages import extensions_of

FUNCTION = Def(ChunkKind.CODE_FUNCTION, "function")
CLASS = Def(ChunkKind.CODE_CLASS, "class", container=True)
INTERFACE = Def(ChunkKind.CODE_CLASS, "interface", container=True)
ENUM = Def(ChunkKind.CODE_CLASS, "enum", container=True)

JAVA = CodeSpec(
    name="java",
    grammar="java",
    extensions=extensions_of("java"),
    definitions={
        "class_declaration": CLASS,
        "record_declaration": CLASS,
        "interface_declaration": INTERFACE,
        "annotation_type_declaration": INTERFACE,
        "enum_declaration": ENUM,
        "method_declaration": FUNCTION,
        "constructor_declaration": FUNCTION,
    },
    query="java.scm",
    import_types=frozenset({"import_declaration", "package_declaration"}),
)

KOTLIN = CodeSpec(
    name="kotlin",
    grammar="kotlin",
    extensions=extensions_of("kotlin"),
    definitions={
        "class_declaration": CLASS,
        "object_declaration": CLASS,
        "companion_object": CLASS,
        "function_declaration": FUNCTION,
        "secondary_constructor": FUNCTION,
    },
    query="kotlin.scm",
    import_types=frozenset({"import", "package_header"}),
)


def chunkers() -> list[CodeChunker]:
    return [CodeChunker(JAVA), CodeChunker(KOTLIN)]
