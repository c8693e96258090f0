"""KnowledgeBase: the knowledge base's operations, as the Engine and ContextModule offer them.

Every write goes through the store of the process that owns the database (the Engine's),
so adds from several MCP servers and the CLI at once are serialised by the owner; adds are
serialised here too, so two clients adding the same file do not both chunk it.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import Callable, Sequence

from contextd.errors import KnowledgeError
from contextd.knowledge import contexts as ctx
from contextd.knowledge.documents import (
    ADDED, FAILED, SKIPPED, UNCHANGED, UPDATED, DocumentWriter, expand,
)
from contextd.knowledge.membership import remove_documents
from contextd.knowledge.records import AddReport, ContextList, DocumentList, RemoveReport
from contextd.knowledge.safety import check_all
from contextd.store.base import IndexStore

log = logging.getLogger(__name__)


# A document's metadata is small descriptive data kept with each document, not a payload.
MAX_METADATA_BYTES = 16_384


def check_metadata(metadata) -> None:
    """Refuse metadata that is not a JSON object of modest size."""
    if metadata is None:
        return
    if not isinstance(metadata, dict):
        raise KnowledgeError(f"metadata must be an object of keys and values, not "
                             f"{type(metadata).__name__}")
    try:
        size = len(json.dumps(metadata))
    except (TypeError, ValueError) as exc:
        raise KnowledgeError(f"metadata must be JSON: {exc}") from None
    if size > MAX_METADATA_BYTES:
        raise KnowledgeError(f"metadata is {size} bytes as JSON; at most "
                             f"{MAX_METADATA_BYTES}")


class KnowledgeBase:
    """Contexts and documents of one project's index. ``embed(paths)``: computes the missing
    vectors of the documents an add wrote (the module's embedder, the one queries use); None
    leaves them to the next run that embeds (benchmarks without embeddings)."""

    def __init__(self, project, store: IndexStore, embed: Callable[[Sequence[str]], int] | None,
                 embedding_model: str):
        self.project = project
        self.store = store
        self.embed = embed
        self.embedding_model = embedding_model
        self._adds = threading.Lock()

    @property
    def config(self):
        return self.project.config

    # ----- contexts --------------------------------------------------------------------
    def create_context(self, name: str, description: str = "") -> ctx.ContextInfo:
        """Create a context (name rules in :mod:`contextd.knowledge.contexts`; at most
        knowledge.max_contexts)."""
        return ctx.create_context(self.store, name, description,
                                  self.config.knowledge.max_contexts)

    def list_documents(self, context: str | None = None, limit: int = 100,
                       offset: int = 0) -> DocumentList:
        """Documents of one context, or of every context (``contextd knowledge show``)."""
        return ctx.list_documents(self.store, context, limit, offset)

    def list_contexts(self) -> ContextList:
        """Every context with its documents, chunks and size, sorted by name."""
        return ContextList(tuple(ctx.list_contexts(self.store)))

    def show_context(self, name: str) -> ctx.ContextDetail:
        """A context and its documents."""
        return ctx.show_context(self.store, name, self.embedding_model)

    def delete_context(self, name: str, confirm: bool = False) -> ctx.ContextDeleted:
        """Delete a context (never ``default``; ``confirm`` required)."""
        return ctx.delete_context(self.store, name, confirm)

    def _target_contexts(self, names: Sequence[str] | None) -> list[str]:
        """Stored names of the contexts an add goes to: ``default`` when none is named;
        unknown ones created with knowledge.auto_create_contexts, else refused."""
        names = ctx.split_names(names) or [ctx.DEFAULT_CONTEXT]
        if self.config.knowledge.auto_create_contexts:
            known = {c.name.lower() for c in ctx.list_contexts(self.store)}
            for name in names:
                if ctx.normalize_name(name) not in known:
                    ctx.create_context(self.store, name, "",
                                       self.config.knowledge.max_contexts)
        return ctx.resolve_names(self.store, names)

    # ----- documents -------------------------------------------------------------------
    def add(self, paths: Sequence[str], contexts: Sequence[str] | None = None,
            include: Sequence[str] = (), exclude: Sequence[str] = (),
            via_mcp: bool = False, metadata: dict | None = None,
            force_ocr: bool = False) -> AddReport:
        """Add files or folders to contexts (see :mod:`contextd.knowledge.documents`).
        Refused before anything is read: no path, a missing path, a refused path, a path
        outside the allowed roots (``via_mcp``), an unknown context, metadata that is not a
        JSON object. Then each file that cannot be read is reported and the others are
        added. ``metadata`` is kept with every document added (search hits carry it);
        ``force_ocr`` reads PDFs by OCR even where they have a text layer."""
        started = time.perf_counter()
        if not paths:
            raise KnowledgeError("name at least one file or folder to add")
        check_metadata(metadata)
        root = Path(self.project.root)
        sources = [Path(p).expanduser() for p in paths]
        sources = [s if s.is_absolute() else Path.cwd() / s for s in sources]
        for source in sources:
            if not source.exists():
                raise KnowledgeError(f"{source}: no such file or folder")
        resolved = check_all(sources, self.config.knowledge, root, via_mcp)
        names = self._target_contexts(contexts)
        files = expand(resolved, include, exclude, self.config.knowledge.max_files_per_add)
        check_all([f for f, _ in files], self.config.knowledge, root, via_mcp)
        with self._adds:
            known = {row["path"]: row for row in self.store.kb_documents()}
            writer = DocumentWriter(self.store, self.config, root, names, known, metadata,
                                    force_ocr)
            outcomes = []
            for file, explicit in files:
                outcome = writer.add(file, explicit)
                if outcome.status == FAILED:
                    log.warning("knowledge: %s: %s", outcome.document, outcome.reason)
                outcomes.append(outcome)
            writer.flush()
            # Only these documents' chunks: an add during a bootstrap must not wait for the
            # whole project's vectors (issue 26: 66 s, past the clients' tool timeout).
            embedded = self.embed([o.path for o in outcomes if o.path]) \
                if self.embed is not None else 0
        counts = {s: sum(o.status == s for o in outcomes)
                  for s in (ADDED, UPDATED, UNCHANGED, FAILED, SKIPPED)}
        read = [o for o in outcomes if o.status in (ADDED, UPDATED)]
        return AddReport(
            contexts=tuple(self._display(names)), documents=tuple(outcomes),
            added=counts[ADDED], updated=counts[UPDATED], unchanged=counts[UNCHANGED],
            failed=counts[FAILED], skipped=counts[SKIPPED], chunks_embedded=embedded,
            bytes_read=sum(o.size_bytes for o in read),
            pages_read=sum(o.pages or 0 for o in read),
            elapsed_ms=round((time.perf_counter() - started) * 1000, 1))

    def remove(self, paths: Sequence[str], contexts: Sequence[str] | None = None
               ) -> RemoveReport:
        """Take documents out of contexts (all when none is named); a document left in no
        context is deleted from the index (never from disk)."""
        if not paths:
            raise KnowledgeError("name at least one document (file or folder) to remove")
        names = ctx.resolve_names(self.store, contexts) if ctx.split_names(contexts) else None
        with self._adds:
            report = remove_documents(self.store, paths, names)
        return RemoveReport(contexts=tuple(self._display(names or ())),
                            documents=report.documents, links_removed=report.links_removed,
                            documents_deleted=report.documents_deleted)

    def _display(self, names: Sequence[str]) -> list[str]:
        shown = {c.name.lower(): c.name for c in ctx.list_contexts(self.store)}
        return [shown.get(n, n) for n in names]
