"""The index store: an interface (:mod:`contextd.store.base`) and its implementations,
DuckDB (:mod:`contextd.store.duckdb`) and PostgreSQL (:mod:`contextd.store.postgres`)."""

from __future__ import annotations

from contextd.store.base import (
    Changes, ChunkRow, FileRecord, FileState, IndexedChunk, IndexStore, Job,
)

__all__ = ["Changes", "ChunkRow", "FileRecord", "FileState", "IndexedChunk", "IndexStore", "Job",
           "open_store"]


# The least DuckDB gets whatever the budget: below it large catch-ups spill to disk.
MIN_DUCKDB_MEMORY_MB = 64
DUCKDB_MEMORY_SHARE = 8


def open_store(project) -> IndexStore:
    """Open (creating or migrating) the index of a :class:`contextd.config.project.Project`: its
    DuckDB file (sealed at rest when ``security.encrypt_db`` is on), or its workspace of a
    shared PostgreSQL database (``storage.backend``)."""
    storage = project.config.storage
    if storage.backend == "postgres":
        from contextd.store.postgres import open_postgres
        from contextd.store.postgres.workspace import project_identity, workspace_id

        identity = project_identity(project.root, storage.workspace)
        return open_postgres(storage.url, workspace_id(identity), identity, str(project.root))
    from contextd.store.duckdb import DuckDBStore
    from contextd.store.git_exclude import exclude_index_dir

    store: DuckDBStore
    if project.config.security.encrypt_db:  # sealed at rest (contextd.crypto)
        from contextd.crypto import db_secret
        from contextd.store.encrypted import EncryptedDuckDBStore

        store = EncryptedDuckDBStore(project.db_path, db_secret(project.config))
    else:
        store = DuckDBStore(project.db_path)
    # An eighth of the owner's memory budget ([owner] memory_limit_mb) for DuckDB's buffers:
    # they fill with cached blocks of the tables a load scans (the embeddings table is 92 MB
    # at 60k chunks), which DuckDB reads again at little cost; a quarter cost the owner
    # ~55 MB more at 60k chunks (fastapi) for no faster query.
    store.limit_memory(max(MIN_DUCKDB_MEMORY_MB,
                           project.config.owner.memory_limit_mb // DUCKDB_MEMORY_SHARE))
    exclude_index_dir(project.root, project.db_path)
    return store
