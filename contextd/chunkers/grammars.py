"""The tree-sitter grammars the chunkers parse with, one small wheel per language.

Each grammar comes compiled in its own PyPI wheel (``tree-sitter-python``, ...; ~15 MB for all
of them, where tree-sitter-language-pack 0.13 installed ~190 MB for 170 languages), so nothing
is downloaded at run time. pyproject.toml pins their versions: the reference queries
(``queries/*.scm``) and the node types the chunkers name are written against those grammars.
"""

from __future__ import annotations

import functools
import importlib

from tree_sitter import Language, Parser

# grammar name -> (module of its wheel, the function that returns the compiled grammar).
GRAMMARS: dict[str, tuple[str, str]] = {
    "python": ("tree_sitter_python", "language"),
    "javascript": ("tree_sitter_javascript", "language"),
    "typescript": ("tree_sitter_typescript", "language_typescript"),
    "tsx": ("tree_sitter_typescript", "language_tsx"),
    "java": ("tree_sitter_java", "language"),
    "kotlin": ("tree_sitter_kotlin", "language"),
    "go": ("tree_sitter_go", "language"),
    "rust": ("tree_sitter_rust", "language"),
    "c": ("tree_sitter_c", "language"),
    "cpp": ("tree_sitter_cpp", "language"),
    "json": ("tree_sitter_json", "language"),
}


class MissingGrammar(LookupError):
    """A grammar contextd does not know, or whose wheel is not installed."""


@functools.cache
def get_language(name: str) -> Language:
    """The compiled grammar ``name`` (a key of GRAMMARS), loaded once per process."""
    try:
        module_name, function = GRAMMARS[name]
    except KeyError:
        raise MissingGrammar(f"no tree-sitter grammar named {name!r}; contextd has "
                             f"{', '.join(sorted(GRAMMARS))}") from None
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        package = module_name.replace("_", "-")
        raise MissingGrammar(f"the {name} grammar needs the package {package}, a dependency "
                             f"of contextd that is not installed: reinstall contextd or "
                             f"`pip install {package}` ({exc})") from exc
    return Language(getattr(module, function)())


def get_parser(name: str) -> Parser:
    """A new parser for grammar ``name``: a parser holds the state of the parse under way, so
    callers do not share one across threads (~1 µs to make; the grammar is loaded once)."""
    return Parser(get_language(name))
