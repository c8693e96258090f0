"""What contextd knows of each language, in one table.

The boundary's default ``allowed_extensions``, the built-in chunkers' claims, the code-fence
names of rendered snippets and report quotes, the role of a file (doc, config, source) and the
package ecosystem whose imports a language's files use all read this table, so a language is
added or changed here once and every one of them agrees.

A language's ``id`` is the language id its chunks carry (``Chunk.language``), the name a
scope's ``languages`` filter and ``[chunking.<id>]`` settings use.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

SOURCE, DOC, CONFIG = "source", "doc", "config"


@dataclass(frozen=True)
class Language:
    """One language: its files, how Markdown names it, and what part its files play."""

    id: str
    # Indexed by default (``[indexing] allowed_extensions``), lower-case with the dot.
    extensions: tuple[str, ...]
    # Claimed by the language's chunker too, but indexed only when a project allows them:
    # rarer spellings a default index need not take.
    more_extensions: tuple[str, ...] = ()
    # The Markdown code-fence name; None: the id. Empty: no name (plain text).
    fence: str | None = None
    # What its files are to a project (contextd.boundary.roles): prose, data/build, or code.
    role: str = SOURCE
    # The package ecosystem whose declared dependencies its files import
    # (contextd.providers.dependency): python, npm, go or cargo.
    ecosystem: str = ""

    @property
    def all_extensions(self) -> tuple[str, ...]:
        return self.extensions + self.more_extensions

    @property
    def fence_name(self) -> str:
        return self.id if self.fence is None else self.fence


# In the order of the default allowed_extensions (context.toml lists them so).
LANGUAGES: tuple[Language, ...] = (
    Language("python", (".py", ".pyi"), (".pyw",), ecosystem="python"),
    Language("kotlin", (".kt", ".kts")),
    Language("java", (".java",)),
    Language("typescript", (".ts",), (".mts", ".cts"), fence="ts", ecosystem="npm"),
    Language("tsx", (".tsx",), ecosystem="npm"),
    Language("javascript", (".js", ".jsx", ".mjs", ".cjs"), fence="js", ecosystem="npm"),
    Language("go", (".go",), ecosystem="go"),
    Language("rust", (".rs",), ecosystem="cargo"),
    Language("c", (".c", ".h")),
    Language("cpp", (".cc", ".cpp", ".cxx", ".hpp", ".hh"), (".c++", ".hxx", ".h++", ".ipp")),
    Language("csharp", (".cs",)),
    Language("ruby", (".rb",)),
    Language("php", (".php",)),
    Language("swift", (".swift",)),
    Language("scala", (".scala",)),
    Language("lua", (".lua",)),
    Language("markdown", (".md", ".markdown"), (".mdx", ".mkd"), fence="md", role=DOC),
    Language("rst", (".rst",), role=DOC),
    Language("text", (".txt",), (".text", ".log"), fence="", role=DOC),
    Language("asciidoc", (".adoc",), role=DOC),
    Language("yaml", (".yaml", ".yml"), role=CONFIG),
    Language("toml", (".toml",), role=CONFIG),
    Language("json", (".json",), (".jsonc", ".json5", ".geojson"), role=CONFIG),
    Language("xml", (".xml",), role=CONFIG),
    Language("properties", (".properties",), role=CONFIG),
    Language("ini", (".ini",), role=CONFIG),
    Language("cfg", (".cfg",), role=CONFIG),
    Language("sql", (".sql",), (".ddl", ".psql", ".pgsql")),
    Language("csv", (".csv",), role=CONFIG),
    Language("shell", (".sh", ".bash", ".zsh"), fence="bash"),
    Language("powershell", (".ps1",)),
    Language("html", (".html",)),
    Language("css", (".css",)),
    Language("scss", (".scss",)),
    Language("vue", (".vue",)),
    Language("svelte", (".svelte",)),
    Language("proto", (".proto",)),
    Language("graphql", (".graphql",)),
    Language("terraform", (".tf",)),
)

_BY_ID = {language.id: language for language in LANGUAGES}
# Each extension belongs to one language (tests/test_languages.py checks it).
_BY_EXTENSION = {ext: language for language in LANGUAGES for ext in language.all_extensions}

DEFAULT_EXTENSIONS: tuple[str, ...] = tuple(
    ext for language in LANGUAGES for ext in language.extensions)


def extensions_of(*ids: str) -> tuple[str, ...]:
    """Every extension of the languages ``ids`` (what their chunker claims)."""
    return tuple(ext for id_ in ids for ext in _BY_ID[id_].all_extensions)


def path_suffix(path: str) -> str:
    """``PurePosixPath(path).suffix`` (the last component's, '' for ``.bashrc`` or ``a.``)
    without building a path: the walk and the bootstrap's order ask it of every file, and
    a PurePosixPath per file was a fifth of each (issue 37's first command)."""
    name = path.rpartition("/")[2]
    dot = name.rfind(".")
    return name[dot:] if 0 < dot < len(name) - 1 else ""


def fence_for_language(language: str) -> str:
    """The code-fence name of a language id; an id the table lacks (a plugin's) as it is."""
    known = _BY_ID.get(language)
    return known.fence_name if known is not None else language


def fence_for_path(path: str) -> str:
    """The code-fence name for a file by its extension; empty when the table lacks it."""
    known = _BY_EXTENSION.get(os.path.splitext(path)[1].lower())
    return known.fence_name if known is not None else ""


def ids_with_role(role: str) -> frozenset[str]:
    """The language ids whose files play ``role`` (doc, config or source)."""
    return frozenset(language.id for language in LANGUAGES if language.role == role)


def extensions_with_role(role: str) -> tuple[str, ...]:
    """Every extension of the languages whose files play ``role``."""
    return tuple(ext for language in LANGUAGES if language.role == role
                 for ext in language.all_extensions)


def ids_of_ecosystem(ecosystem: str) -> tuple[str, ...]:
    """The language ids whose files import the dependencies of ``ecosystem``."""
    return tuple(language.id for language in LANGUAGES if language.ecosystem == ecosystem)
