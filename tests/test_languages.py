"""The one language table (contextd.text.languages) against the parts that read it: the
built-in chunkers, the default allowed extensions of context.toml, fences and file roles
(the rendered block's ``lang`` is checked in tests/test_render.py)."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import tomli

from contextd.boundary.roles import FileRole, file_role
from contextd.chunkers.chunking import chunker_for, language_for
from contextd.config.sections import ContextConfig
from contextd.plugins.manager import collect
from contextd.sessions.citations import CitationResolver
from contextd.text.languages import (
    DEFAULT_EXTENSIONS, LANGUAGES, extensions_of, fence_for_language, fence_for_path,
    path_suffix,
)

ROOT = Path(__file__).resolve().parent.parent


def test_each_extension_belongs_to_one_language():
    seen: dict[str, str] = {}
    for language in LANGUAGES:
        for ext in language.all_extensions:
            assert ext == ext.lower() and ext.startswith("."), ext
            assert ext not in seen, f"{ext} is claimed by {seen.get(ext)} and {language.id}"
            seen[ext] = language.id


def test_the_default_allowed_extensions_are_the_tables():
    assert tuple(ContextConfig().indexing.allowed_extensions) == DEFAULT_EXTENSIONS
    # This repository's own context.toml adds to them (the chunkers' .scm queries).
    mine = tomli.loads((ROOT / "context.toml").read_text())["indexing"]["allowed_extensions"]
    assert set(DEFAULT_EXTENSIONS) <= set(mine)


def test_every_built_in_chunker_claims_the_extensions_of_its_languages():
    built_in = [reg.value for reg in collect("register_chunkers",
                                              key=lambda args: args[0].name).values()
                if type(reg.value).__module__.startswith("contextd.")]
    assert built_in
    for chunker in built_in:
        ids = ("text", "rst", "asciidoc") if chunker.language == "text" else (chunker.language,)
        assert tuple(chunker.extensions) == extensions_of(*ids), chunker.name
        for ext in chunker.extensions:
            assert chunker_for(f"sample{ext}").name == chunker.name
            assert language_for(f"sample{ext}") == chunker.language


def test_fences_of_snippets_and_citations_come_from_the_table(tmp_path):
    assert fence_for_language("typescript") == "ts" and fence_for_language("text") == ""
    assert fence_for_language("plugin-language") == "plugin-language"
    (tmp_path / "deploy.sh").write_text("echo hi\n")
    cited = CitationResolver(tmp_path, 20).resolve("refs[0]", {"file": "deploy.sh",
                                                               "start_line": 1})
    assert cited["language"] == fence_for_path("deploy.sh") == "bash"


def test_roles_follow_the_tables_roles():
    assert file_role("src/notes.rst", "rst") is FileRole.DOC
    assert file_role("src/data.geojson", "json") is FileRole.CONFIG
    assert file_role("src/app.kt", "kotlin") is FileRole.SOURCE
    assert file_role("poetry.lock", "") is FileRole.CONFIG


def test_path_suffix_is_pure_posix_paths_suffix():
    """The walk and the bootstrap's order read a path's suffix without building a path; it
    must be the one they read before, dot files and trailing dots included."""
    for path in ("pkg/app.py", "key.PEM", ".env", ".pem", "..pem", "a.", "archive.tar.gz",
                 "dir.d/README", "a..b", "...", ".", "pkg/.hidden.yml", ""):
        assert path_suffix(path) == PurePosixPath(path).suffix, path
