"""Operations of the knowledge base (:mod:`contextd.knowledge`; searched through query)."""

from __future__ import annotations

import os
from typing import Any, Sequence

from contextd.knowledge.records import (
    AddReport, ContextDeleted, ContextDetail, ContextInfo, ContextList, DocumentList,
    RemoveReport,
)
from contextd.operations.declare import operation
from contextd.store.base import KNOWLEDGE_PREFIX


def _absolute(path: str) -> str:
    return os.path.abspath(os.path.expanduser(path))


def _paths_from_here(params: dict[str, Any]) -> dict[str, Any]:
    """Paths made absolute in the calling process: the owner runs in another working
    directory. A stored document's name (``kb://…``) stays as it is."""
    return {**params,
            "paths": [p if p.startswith(KNOWLEDGE_PREFIX) else _absolute(p)
                      for p in params["paths"]],
            "contexts": list(params["contexts"]) if params.get("contexts") else None}


@operation(mcp=("knowledge_context_create",), cli=("kb",),
           api=("ContextModule.knowledge_create_context",))
def knowledge_create_context(engine, name: str, description: str = "") -> ContextInfo:
    """Create a knowledge context."""
    return engine.module.knowledge.create_context(name, description)


@operation(mcp=("knowledge_context_list",), cli=("kb",),
           api=("ContextModule.knowledge_list_contexts",))
def knowledge_list_contexts(engine) -> ContextList:
    """Every knowledge context, sorted by name."""
    return engine.module.knowledge.list_contexts()


@operation(mcp=("knowledge_context_show",), cli=("kb",),
           api=("ContextModule.knowledge_show_context",))
def knowledge_show_context(engine, name: str) -> ContextDetail:
    """A context and its documents."""
    return engine.module.knowledge.show_context(name)


@operation(mcp=("knowledge_context_delete",), cli=("kb",),
           api=("ContextModule.knowledge_delete_context",))
def knowledge_delete_context(engine, name: str, confirm: bool = False) -> ContextDeleted:
    """Delete a context (never ``default``; ``confirm=True`` required)."""
    return engine.module.knowledge.delete_context(name, confirm)


@operation(mcp=("knowledge_add",), cli=("kb",), prepare=_paths_from_here,
           api=("ContextModule.knowledge_add",))
def knowledge_add(engine, paths: Sequence[str], contexts: Sequence[str] | None = None,
                  include: Sequence[str] = (), exclude: Sequence[str] = (),
                  via_mcp: bool = False, metadata: dict | None = None,
                  force_ocr: bool = False) -> AddReport:
    """Add files or folders to contexts (``default`` when none); ``via_mcp`` limits them to
    the allowed roots; ``metadata`` is kept with each document, ``force_ocr`` reads PDFs by
    OCR."""
    return engine.module.knowledge.add(paths, contexts, include, exclude, via_mcp, metadata,
                                       force_ocr)


@operation(mcp=("knowledge_show",), cli=("kb",), api=("ContextModule.knowledge_list_documents",))
def knowledge_list_documents(engine, context: str | None = None, limit: int = 100,
                             offset: int = 0) -> DocumentList:
    """Documents of one context, or of every context."""
    return engine.module.knowledge.list_documents(context, limit, offset)


@operation(mcp=("knowledge_remove",), cli=("kb",), prepare=_paths_from_here,
           api=("ContextModule.knowledge_remove",))
def knowledge_remove(engine, paths: Sequence[str], contexts: Sequence[str] | None = None
                     ) -> RemoveReport:
    """Take documents out of contexts (all when none)."""
    return engine.module.knowledge.remove(paths, contexts)
