"""The knowledge base's records: what its operations return, to the CLI (``--json``), the MCP
tools (structured content, whose schemas come from these classes) and the Python API alike.

Plain frozen dataclasses that serialise with :func:`contextd.records.to_dict` and cross the
owner socket with :func:`contextd.runtime.rpc.from_dict`. This module imports nothing heavy (no DuckDB,
no chunkers), so the MCP server can describe its tools without loading them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from contextd.query.records import Hit


@dataclass(frozen=True)
class ContextInfo:
    """A context with its figures: documents, chunks, bytes of its documents' files."""

    name: str
    description: str
    documents: int
    chunks: int
    size_bytes: int
    created_at: str
    updated_at: str
    is_default: bool


@dataclass(frozen=True)
class DocumentInfo:
    """A stored document: ``document`` is the file it was read from, ``path`` its index path
    (``kb://...``, what query hits carry as file_path)."""

    document: str
    path: str
    format: str
    pages: int | None
    title: str
    size_bytes: int
    chunks: int
    contexts: tuple[str, ...]
    secrets_redacted: int
    added_at: str
    updated_at: str
    metadata: dict[str, Any] = field(default_factory=dict)  # given at add


@dataclass(frozen=True)
class DocumentList:
    """knowledge_show: documents of one context, or of every context (``context`` None),
    by path; ``total`` counts them all, ``documents`` is the page asked for."""

    context: str | None
    total: int
    documents: tuple[DocumentInfo, ...]


@dataclass(frozen=True)
class ContextDetail:
    """knowledge_context_show: the context, its documents and the embedding model."""

    context: ContextInfo
    documents: tuple[DocumentInfo, ...]
    embedding_model: str


@dataclass(frozen=True)
class ContextDeleted:
    """What deleting a context did: documents taken out of it, and those deleted because no
    other context held them (their source files are never touched)."""

    name: str
    documents_unlinked: int
    documents_deleted: tuple[str, ...]


@dataclass(frozen=True)
class ContextList:
    """knowledge_context_list: every context, sorted by name."""

    contexts: tuple[ContextInfo, ...]


@dataclass(frozen=True)
class DocumentOutcome:
    """What an add did with one file: ``added``, ``updated`` (changed content, re-chunked),
    ``unchanged`` (same bytes: at most new memberships), ``failed`` (``reason`` says why) or
    ``skipped`` (a file of a folder add in no accepted format)."""

    document: str
    status: str
    path: str = ""
    format: str = ""
    chunks: int = 0
    pages: int | None = None
    new_links: int = 0
    secrets_redacted: int = 0
    size_bytes: int = 0
    reason: str = ""


@dataclass(frozen=True)
class AddReport:
    """knowledge_add's answer: one outcome per file, the contexts added to, counts, the
    texts embedded, bytes and pages read, and the time taken."""

    contexts: tuple[str, ...]
    documents: tuple[DocumentOutcome, ...]
    added: int
    updated: int
    unchanged: int
    failed: int
    skipped: int
    chunks_embedded: int
    bytes_read: int
    pages_read: int
    elapsed_ms: float


@dataclass(frozen=True)
class RemoveReport:
    """knowledge_remove's answer: documents named, memberships removed, documents deleted
    (in no context any more), and the contexts they were taken out of (empty: all)."""

    contexts: tuple[str, ...]
    documents: tuple[str, ...]
    links_removed: int
    documents_deleted: tuple[str, ...]


@dataclass(frozen=True)
class KnowledgeHit(Hit):
    """One hit of a knowledge search as knowledge_search and ``contextd kb search --json``
    show it: a :class:`~contextd.query.records.Hit` (lines 1-based inclusive) plus ``source``
    (``knowledge`` or ``project``), ``document`` (the file it was read from; a project hit:
    its root-relative path), ``contexts`` (empty for a project hit) and ``page`` (PDFs)."""

    source: str = "project"
    document: str = ""
    contexts: tuple[str, ...] = ()
    page: int | None = None
    document_metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class KnowledgeSearchResult:
    """A knowledge search's answer: hits best first, their tokens, notes, the contexts
    searched (names as shown) and whether the project's files were searched too."""

    query: str
    contexts: tuple[str, ...]
    include_project: bool
    total: int
    total_tokens: int
    hits: tuple[KnowledgeHit, ...]
    notes: tuple[str, ...] = ()
