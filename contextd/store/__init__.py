"""The index store: an interface (:mod:`contextd.store.base`) and its DuckDB implementation."""

from __future__ import annotations

from contextd.store.base import (
    Changes, ChunkRow, FileRecord, FileState, IndexedChunk, IndexStore, Job,
)

__all__ = ["Changes", "ChunkRow", "FileRecord", "FileState", "IndexedChunk", "IndexStore", "Job",
           "open_store"]


def open_store(project) -> IndexStore:
    """Open (creating or migrating) the index of a :class:`contextd.project.Project`, and
    keep its directory out of ``git status`` (:mod:`contextd.git_exclude`)."""
    from contextd.git_exclude import exclude_index_dir
    from contextd.store.duckdb_store import DuckDBStore

    store = DuckDBStore(project.db_path)
    exclude_index_dir(project.root, project.db_path)
    return store
