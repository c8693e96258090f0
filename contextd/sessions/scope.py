"""search_knowledge's ``scope {files, folders}``, checked and handed to the one query path.

The folder forms of a scope (a bare name anywhere, a leading slash from the root, a glob as it
is) are :class:`contextd.records.ContextScope` ``folders``, matched inside every provider by
:func:`contextd.providers.base.folder_matches` before ranking; ``files`` are exact paths.
Several folders (or files) widen the search; files and folders together narrow it. What this
module adds is the refusal of entries that name nothing or leave the project, with the
entry in the message, instead of a search that silently finds nothing.
"""

from __future__ import annotations

from typing import Sequence

from contextd.errors import UsageError
from contextd.records import ContextScope


def checked_folder(folder: str) -> str:
    """One scope.folders entry, refused when it names no folder or leaves the project."""
    text = folder.strip().replace("\\", "/")
    if not text or text in ("/", ".", "./"):
        raise UsageError(f"scope.folders: {folder!r} names no folder; leave scope.folders "
                         "out to search the whole project")
    if ".." in text.split("/"):
        raise UsageError(f"scope.folders: {folder!r} leaves the project; give folders inside "
                         "it")
    return text


def checked_file(file: str) -> str:
    """One scope.files entry as a root-relative POSIX path."""
    text = file.strip().replace("\\", "/")
    while text.startswith("./"):
        text = text[2:]
    text = text.lstrip("/")
    if not text or ".." in text.split("/"):
        raise UsageError(f"scope.files: {file!r} is not a file inside the project; give paths "
                         "relative to the project root")
    return text


def search_scope(files: Sequence[str] = (), folders: Sequence[str] = ()) -> ContextScope:
    """The scope of a search over these files and folders (empty: the whole project)."""
    return ContextScope(files=tuple(dict.fromkeys(checked_file(f) for f in files)),
                        folders=tuple(dict.fromkeys(checked_folder(f) for f in folders)))
