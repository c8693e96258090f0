"""Taking documents out of contexts: which stored documents a remove names, and the report.

A remove names documents by the file or folder they were read from (or by their ``kb://``
path). Out of some contexts, a document stays in the others; a document left in no context
is deleted from the index (its chunks, symbols and memberships; vectors stay as cache). The
files on disk are never touched.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from contextd.errors import KnowledgeError
from contextd.knowledge.records import RemoveReport
from contextd.store.base import KNOWLEDGE_PREFIX, IndexStore


def _under(source: str, folder: str) -> bool:
    return source == folder or source.startswith(folder.rstrip("/") + "/")


def documents_named(store: IndexStore, names: Sequence[str]) -> list[str]:
    """The ``kb://`` paths of stored documents named by ``names`` (a file or folder they
    were read from, or a ``kb://`` path); a name matching nothing is refused."""
    stored = {row["path"]: row["source"] for row in store.kb_documents()}
    found: list[str] = []
    for name in names:
        if name.startswith(KNOWLEDGE_PREFIX):
            matched = [name] if name in stored else []
        else:
            target = str(Path(name).expanduser().resolve())
            matched = [path for path, source in stored.items() if _under(source, target)]
        if not matched:
            raise KnowledgeError(f"{name}: no document of the knowledge base was read from "
                                 "it (see knowledge_context_show for what is stored)")
        found += matched
    return list(dict.fromkeys(found))


def remove_documents(store: IndexStore, names: Sequence[str],
                     contexts: Sequence[str] | None) -> RemoveReport:
    """Take the named documents out of ``contexts`` (stored names; None: all)."""
    paths = documents_named(store, names)
    removed, deleted = store.kb_unlink(paths, contexts)
    return RemoveReport(contexts=tuple(contexts or ()), documents=tuple(paths),
                        links_removed=removed, documents_deleted=tuple(deleted))
