"""Knowledge contexts: names, the rules they follow, and create/list/show/delete.

A context is a named set of documents ("aws-architecture", "payments-rfc"). Names match
``^[a-zA-Z0-9_-]{1,64}$`` and are unique without regard to case (stored lower-cased, shown
as first spelled). ``default`` always exists (created by the schema) and is never deleted:
an add that names no context goes there.
"""

from __future__ import annotations

import re
from typing import Sequence

from contextd.errors import KnowledgeError
from contextd.knowledge.records import (
    ContextDeleted, ContextDetail, ContextInfo, DocumentInfo, DocumentList,
)
from contextd.query.records import ALL_CONTEXTS
from contextd.store.base import IndexStore

DEFAULT_CONTEXT = "default"
NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
MAX_DESCRIPTION = 2000
# Names a user may not create, and why (shown in the refusal).
RESERVED_NAMES = {
    DEFAULT_CONTEXT: "it always exists (documents added without a context go there)",
    "all": "it would read as 'every context' in a search",
    "none": "it would read as 'no context' in a search",
    "project": "it names the project's own index in searches",
}


def split_names(values: Sequence[str] | None) -> list[str]:
    """Context names as given, each entry possibly comma-separated (e.g.
    ``--context aws-architecture,healthcare-compliance``); blanks dropped."""
    return [part.strip() for value in values or () for part in value.split(",")
            if part.strip()]


def normalize_name(name: str) -> str:
    """The stored (lower-case) form of an existing context's name; format checked."""
    name = (name or "").strip()
    if not NAME_PATTERN.match(name):
        raise KnowledgeError(
            f"invalid context name {name!r}: use 1-64 letters, digits, '-' or '_' "
            "(e.g. aws-architecture)")
    return name.lower()


def validate_new_name(name: str) -> str:
    """A name for a new context: format checked and not reserved."""
    key = normalize_name(name)
    if key in RESERVED_NAMES:
        raise KnowledgeError(f"context name {name!r} is reserved: {RESERVED_NAMES[key]}")
    return key


def _info(row: dict) -> ContextInfo:
    return ContextInfo(name=row["display_name"], description=row["description"] or "",
                       documents=int(row["documents"]), chunks=int(row["chunks"]),
                       size_bytes=int(row["size_bytes"]), created_at=str(row["created_at"]),
                       updated_at=str(row["updated_at"]),
                       is_default=row["name"] == DEFAULT_CONTEXT)


def document_info(row: dict) -> DocumentInfo:
    """A DocumentInfo from a row of :meth:`IndexStore.kb_documents`."""
    return DocumentInfo(document=row["source"], path=row["path"], format=row["format"],
                        pages=row["pages"], title=row["title"] or "",
                        size_bytes=int(row["size_bytes"]), chunks=int(row["chunks"]),
                        contexts=tuple(row["contexts"] or ()),
                        secrets_redacted=int(row["secrets_redacted"] or 0),
                        added_at=str(row["added_at"]), updated_at=str(row["updated_at"]),
                        metadata=dict(row.get("metadata") or {}))


def list_contexts(store: IndexStore) -> list[ContextInfo]:
    """Every context, sorted by name (``default`` among them)."""
    return [_info(row) for row in store.kb_contexts()]


def get_context(store: IndexStore, name: str) -> ContextInfo:
    """One context; an unknown name is refused with the names that exist."""
    key = normalize_name(name)
    found = store.kb_contexts(key)
    if found:
        return _info(found[0])
    known = ", ".join(r["display_name"] for r in store.kb_contexts())
    raise KnowledgeError(f"unknown context {name!r}; contexts: {known} "
                         "(create one with knowledge_context_create / contextd kb create)")


def resolve_names(store: IndexStore, names: Sequence[str]) -> list[str]:
    """Stored names of existing contexts (``*`` = all of them); unknown ones refused."""
    names = split_names(names)
    rows = store.kb_contexts()
    known = {row["name"] for row in rows}
    if ALL_CONTEXTS in names:
        return sorted(known)
    keys = list(dict.fromkeys(normalize_name(n) for n in names))
    missing = [n for n in keys if n not in known]
    if missing:
        raise KnowledgeError(
            f"unknown context(s) {', '.join(missing)}; contexts: "
            f"{', '.join(sorted(r['display_name'] for r in rows))}")
    return keys


def create_context(store: IndexStore, name: str, description: str = "",
                   max_contexts: int | None = None) -> ContextInfo:
    """Create a context; a name taken (in any case) is refused, and so is one beyond
    ``max_contexts`` (knowledge.max_contexts)."""
    key = validate_new_name(name)
    description = (description or "").strip()
    if len(description) > MAX_DESCRIPTION:
        raise KnowledgeError(f"context description is {len(description)} characters; "
                             f"at most {MAX_DESCRIPTION}")
    if max_contexts is not None:
        count = len(store.kb_contexts())
        if count >= max_contexts and not store.kb_contexts(key):
            raise KnowledgeError(f"there are already {count} contexts, the most "
                                 f"knowledge.max_contexts ({max_contexts}) allows; delete one "
                                 "or raise the limit")
    if not store.kb_create_context(key, name.strip(), description):
        existing = get_context(store, key)
        raise KnowledgeError(f"context {existing.name!r} already exists (names are "
                             "case-insensitive); pick another name or add to it")
    return get_context(store, key)


def show_context(store: IndexStore, name: str, embedding_model: str) -> ContextDetail:
    """A context and its documents."""
    info = get_context(store, name)
    rows = store.kb_documents(context=info.name.lower())
    return ContextDetail(context=info, documents=tuple(document_info(r) for r in rows),
                         embedding_model=embedding_model)


def list_documents(store: IndexStore, context: str | None = None, limit: int = 100,
                   offset: int = 0) -> DocumentList:
    """Documents of one context, or of every context when None (``contextd knowledge show``),
    by path, a page of ``limit``."""
    if limit < 1 or offset < 0:
        raise KnowledgeError("limit must be 1 or more and offset 0 or more")
    key = get_context(store, context).name.lower() if context else None
    rows = store.kb_documents(context=key)
    return DocumentList(context=context, total=len(rows), documents=tuple(
        document_info(r) for r in rows[offset:offset + limit]))


def delete_context(store: IndexStore, name: str, confirm: bool) -> ContextDeleted:
    """Delete a context (``confirm`` required; never ``default``): its memberships go, and
    documents no other context holds are deleted from the index."""
    info = get_context(store, name)
    if info.is_default:
        raise KnowledgeError("the 'default' context cannot be deleted (documents added "
                             "without a context go there); remove its documents instead")
    if confirm is not True:  # a JSON true, not "yes" or 1
        what = (f"deleting context {info.name!r} removes it and its {info.documents} "
                "document link(s)")
        raise KnowledgeError(f"{what}: repeat with confirm=true",
                             cli=f"{what}: repeat with --yes (contextd kb delete "
                                 f"{info.name} --yes)")
    deleted = store.kb_delete_context(info.name.lower())
    return ContextDeleted(name=info.name, documents_unlinked=info.documents,
                          documents_deleted=tuple(deleted))
