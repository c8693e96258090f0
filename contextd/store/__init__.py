"""The index store: an interface (:mod:`contextd.store.base`) and its DuckDB implementation."""

from __future__ import annotations

from contextd.store.base import (
    Changes, ChunkRow, FileRecord, FileState, IndexedChunk, IndexStore, Job,
)

__all__ = ["Changes", "ChunkRow", "FileRecord", "FileState", "IndexedChunk", "IndexStore", "Job",
           "open_store"]


def open_store(project) -> IndexStore:
    """Open (creating or migrating) the index of a :class:`contextd.project.Project`."""
    from contextd.store.duckdb_store import DuckDBStore

    return DuckDBStore(project.db_path)
