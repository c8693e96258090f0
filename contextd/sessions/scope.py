"""search_knowledge's ``scope {files, folders}`` as the path globs of a :class:`ContextScope`.

Seed 002 gives folders three forms: a bare name (``"hooks"``) is a folder of that name
anywhere in the project, a leading slash (``"/src/hooks"``) is a folder from the root, and a
glob (``"src/*/hooks"``) is used as it is, with the files below the folders it matches. Files
are exact root-relative paths. Several folders (or several files) widen the search; files and
folders together narrow it (a file must also lie in one of the folders).

The result is plain ``ContextScope.paths`` globs in the syntax of
:func:`contextd.providers.base.path_matches` (where ``*`` also crosses ``/``), so the one query
path applies it inside every provider, before ranking, instead of filtering the top results
afterwards and returning fewer of them.
"""

from __future__ import annotations

from typing import Sequence

from contextd.errors import UsageError
from contextd.providers.base import path_matches

_GLOB_CHARS = frozenset("*?[")


def folder_globs(folder: str) -> tuple[str, ...]:
    """The path globs of one folder pattern (see the module docstring)."""
    text = folder.strip().replace("\\", "/")
    if not text or text in ("/", ".", "./"):
        raise UsageError(f"scope.folders: {folder!r} names no folder; leave scope.folders "
                         "out to search the whole project")
    if ".." in text.split("/"):
        raise UsageError(f"scope.folders: {folder!r} leaves the project; give folders inside "
                         "it")
    if _GLOB_CHARS.intersection(text):
        stem = text.lstrip("/").rstrip("/")
        return (stem,) if stem.endswith("**") else (stem, f"{stem}/**")
    if text.startswith("/"):
        return (text.strip("/"),)  # no glob characters: a directory prefix
    name = text.strip("/")
    return (f"{name}/**", f"*/{name}/**")


def file_path(file: str) -> str:
    """One scope.files entry as a root-relative POSIX path."""
    text = file.strip().replace("\\", "/")
    while text.startswith("./"):
        text = text[2:]
    text = text.lstrip("/")
    if not text or ".." in text.split("/"):
        raise UsageError(f"scope.files: {file!r} is not a file inside the project; give paths "
                         "relative to the project root")
    return text


def scope_paths(files: Sequence[str] = (), folders: Sequence[str] = ()) -> tuple[str, ...] | None:
    """The ``ContextScope.paths`` of a scope: () for no restriction, None when files and
    folders together leave nothing (no given file lies in a given folder)."""
    globs = tuple(dict.fromkeys(g for folder in folders for g in folder_globs(folder)))
    paths = tuple(dict.fromkeys(file_path(f) for f in files))
    if paths and globs:
        inside = tuple(p for p in paths if any(path_matches(p, g) for g in globs))
        return inside or None
    return paths or globs
