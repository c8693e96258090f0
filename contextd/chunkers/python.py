"""Python: module docstring, classes, functions with decorators and docstrings.

A class under the cap is one chunk; a larger one becomes its header (signature, docstring,
class attributes) plus one ``Class.method`` chunk per method carrying the class signature as
context. A function over the cap is cut at statement boundaries with the configured overlap.
"""

from __future__ import annotations

from contextd.chunkers.code import CodeChunker, CodeSpec, Def
from contextd.records import ChunkKind
from contextd.text.languages import extensions_of

FUNCTION = Def(ChunkKind.CODE_FUNCTION, "function")
CLASS = Def(ChunkKind.CODE_CLASS, "class", container=True)

PYTHON = CodeSpec(
    name="python",
    grammar="python",
    extensions=extensions_of("python"),
    filenames=("SConstruct", "SConscript"),
    definitions={"function_definition": FUNCTION, "class_definition": CLASS},
    query="python.scm",
    wrappers=frozenset({"decorated_definition"}),
    doc_prefixes=("#",),
    import_types=frozenset({"import_statement", "import_from_statement",
                            "future_import_statement"}),
    module_docstring=True,
)


def chunkers() -> list[CodeChunker]:
    return [CodeChunker(PYTHON)]
