-- Version 2: files left out of the index, and why (DuckDB's migration 003). One row per
-- (workspace, path, reason); size_bytes/mtime_ns are the file as it was when skipped.
CREATE TABLE IF NOT EXISTS skipped_files (
    workspace_id TEXT NOT NULL,
    path TEXT NOT NULL,
    reason TEXT NOT NULL,
    detail TEXT NOT NULL,
    size_bytes BIGINT,
    mtime_ns BIGINT,
    recorded_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, path, reason)
);
