"""The built-in chunkers, registered through the same hook third-party plugins use.

Code languages go through tree-sitter (one grammar wheel per language, compiled inside it:
nothing is downloaded; ``contextd.chunkers.grammars``); Markdown, YAML, TOML, SQL and plain
text are read line by line, JSON through tree-sitter. ``contextd.chunkers.chunking`` picks a
chunker per file and enforces the token cap. The registration is ``trylast`` so a third-party
plugin that registers the same name (or claims the same extension) replaces a built-in.
"""

from __future__ import annotations

from contextd.hookspecs import hookimpl


def builtin_chunkers() -> list:
    """One instance of every built-in chunker, in a fixed order."""
    from contextd.chunkers import javascript, jvm, python, systems
    from contextd.chunkers.data import JsonChunker, TomlChunker, YamlChunker
    from contextd.chunkers.markdown import MarkdownChunker
    from contextd.chunkers.sql import SqlChunker
    from contextd.chunkers.text import TextChunker

    return [*python.chunkers(), *javascript.chunkers(), *jvm.chunkers(), *systems.chunkers(),
            MarkdownChunker(), YamlChunker(), TomlChunker(), JsonChunker(), SqlChunker(),
            TextChunker()]


@hookimpl(trylast=True)
def register_chunkers(register) -> None:
    """Register every built-in chunker."""
    for chunker in builtin_chunkers():
        register(chunker)
