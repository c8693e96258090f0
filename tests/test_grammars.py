"""The grammar wheels behind the code chunkers (contextd.chunkers.grammars): every chunker's
grammar loads in the installed tree-sitter binding, and a missing wheel is named in the error.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import tree_sitter

from contextd.chunkers import builtin_chunkers
from contextd.chunkers.grammars import GRAMMARS, MissingGrammar, get_language, get_parser


def test_every_code_chunker_has_a_loadable_grammar_of_a_supported_abi():
    grammars = {c.spec.grammar for c in builtin_chunkers() if hasattr(c, "spec")} | {"json"}
    assert grammars == set(GRAMMARS)
    for name in GRAMMARS:
        language = get_language(name)
        assert (tree_sitter.MIN_COMPATIBLE_LANGUAGE_VERSION <= language.abi_version
                <= tree_sitter.LANGUAGE_VERSION), name
        assert not get_parser(name).parse(b"").root_node.has_error, name


def test_an_unknown_grammar_is_refused_with_the_known_ones():
    with pytest.raises(MissingGrammar, match="kotlin"):
        get_language("cobol")


def test_a_missing_wheel_is_named_and_its_files_fall_back_to_line_windows():
    # A fresh interpreter where importing the Kotlin wheel fails, as when it is not installed.
    code = textwrap.dedent("""
        import sys
        sys.modules["tree_sitter_kotlin"] = None
        from contextd.chunkers.chunking import chunk_file
        from contextd.config.sections import ContextConfig
        chunked = chunk_file("a.kt", b"fun f() = 1\\n", ContextConfig())
        print(chunked.parse_error)
        print(len(chunked.chunks))
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    error, chunks = result.stdout.strip().split("\n")
    assert "tree-sitter-kotlin" in error and "not installed" in error
    assert int(chunks) == 1
