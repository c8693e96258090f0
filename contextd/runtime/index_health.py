"""Is the index current? Seed 002's schema status and project statistics, for the Index
Manager (``/schema-status``), get_context_stats' compatibility twin ``index_status`` and
``contextd stats``.

The answer compares the files on disk (through the boundary, as an indexing run would see
them) with what the index holds, by size and modification time, without reading a file:
files not indexed yet, files changed since they were indexed, files indexed but deleted (or
newly excluded). Its ``status`` is one of the five words the Index Manager and the ``seed002``
MCP profile show (docs/MCP.md): No Index, Updating, Cancelling, Needs Update or Up to Date.
"""

from __future__ import annotations

from typing import Any

from contextd.indexer.core import SIGNATURE_META_KEY, index_signature
from contextd.indexer.plan import plan_changes
from contextd.store.base import KNOWLEDGE_PREFIX

NO_INDEX = "No Index"
UPDATING = "Updating"
CANCELLING = "Cancelling"
NEEDS_UPDATE = "Needs Update"
UP_TO_DATE = "Up to Date"


def expected_schema_version(backend: str) -> int:
    """The schema version this contextd writes for a storage backend."""
    if backend == "postgres":
        from contextd.store.postgres.connection import SCHEMA_VERSION
    else:
        from contextd.store.duckdb.store import SCHEMA_VERSION
    return SCHEMA_VERSION


def schema_status(indexer: Any, store: Any, config: Any, root: str) -> dict[str, Any]:
    """The schema (version, expected version, embedding model and dimension) and the project
    statistics (files in the project, indexed, not indexed, modified, deleted), with the
    status they add up to and what to do about it."""
    entries = list(indexer.boundary.iter_files())
    states = {path: state for path, state in store.file_states().items()
              if not path.startswith(KNOWLEDGE_PREFIX)}
    plan = plan_changes(entries, states)
    not_indexed = sum(1 for task in plan.tasks if task.known_hash is None)
    modified = len(plan.tasks) - not_indexed
    deleted = len(plan.removed)
    # Chunking, redaction or contextualizer settings changed since the index was written.
    resettled = store.get_meta(SIGNATURE_META_KEY) not in (None, index_signature(config))
    jobs = store.list_jobs(("queued", "in_progress"), limit=5)
    if any(job.status == "in_progress" and job.cancel_requested for job in jobs):
        status = CANCELLING
    elif indexer.indexing or jobs:
        status = UPDATING
    elif not states:
        status = NO_INDEX
    elif not_indexed or modified or deleted or resettled:
        status = NEEDS_UPDATE
    else:
        status = UP_TO_DATE
    version = store.schema_version()
    expected = expected_schema_version(config.storage.backend)
    return {
        "workspace": root,
        "status": status,
        "advice": _advice(status, not_indexed, modified, deleted, resettled),
        "settingsChanged": resettled,
        "schema": {"version": version, "expectedVersion": expected,
                   "valid": version == expected,
                   "embeddingModel": config.embedding.model,
                   "embeddingDimension": config.embedding.dimension},
        "project": {"totalFilesInProject": len(entries),
                    "indexedFiles": len(entries) - not_indexed,
                    "notIndexedFiles": not_indexed, "modifiedFiles": modified,
                    "deletedFiles": deleted},
    }


def _advice(status: str, not_indexed: int, modified: int, deleted: int,
            resettled: bool) -> str:
    if status == NO_INDEX:
        return "nothing is indexed yet: run `contextd refresh` (MCP: refresh_context ['.'])"
    if status == NEEDS_UPDATE:
        parts = [f"{n:,} {what}" for n, what in ((not_indexed, "not indexed"),
                                                (modified, "changed since indexed"),
                                                (deleted, "deleted")) if n]
        if resettled:
            parts.append("chunking or redaction settings changed since the index was written")
        return (f"{', '.join(parts)}: run `contextd refresh` (MCP: refresh_context ['.']); "
                "a running watcher does it by itself")
    if status in (UPDATING, CANCELLING):
        return "an indexing run is under way; the figures move as it goes"
    return "every file of the project is indexed as it is on disk"
