"""The index store: an interface (:mod:`contextd.store.base`) and its DuckDB implementation."""

from __future__ import annotations

from contextd.store.base import (
    Changes, ChunkRow, FileRecord, FileState, IndexedChunk, IndexStore, Job,
)

__all__ = ["Changes", "ChunkRow", "FileRecord", "FileState", "IndexedChunk", "IndexStore", "Job",
           "open_store"]


def open_store(project) -> IndexStore:
    """Open (creating or migrating) the index of a :class:`contextd.project.Project`;
    sealed at rest when ``security.encrypt_db`` is on (:mod:`contextd.crypto`)."""
    if project.config.security.encrypt_db:
        from contextd.crypto import db_secret
        from contextd.crypto.store import EncryptedDuckDBStore

        return EncryptedDuckDBStore(project.db_path, db_secret(project.config))
    from contextd.store.duckdb_store import DuckDBStore

    return DuckDBStore(project.db_path)
