-- contextd on PostgreSQL, version 1: the tables of the DuckDB schema (contextd/schema.sql at
-- its version 2), each with a workspace_id, so one database holds many projects. Every query
-- of contextd.store.postgres filters by workspace_id; every key starts with it.
-- Vectors are pgvector `vector` values without a fixed dimension (a workspace may cache
-- several models); the HNSW index is per (workspace, model), a partial expression index
-- created when the first vectors of that model arrive (see vectors.py).

CREATE EXTENSION IF NOT EXISTS vector;

CREATE SEQUENCE IF NOT EXISTS file_id_seq;

-- One row per project. generation is bumped by every committed write of the workspace, as
-- the last statement of its transaction (the row lock makes generations commit in order).
CREATE TABLE IF NOT EXISTS workspaces (
    workspace_id TEXT PRIMARY KEY,
    identity TEXT NOT NULL,             -- what the id hashes: git remote + subdirectory, or path
    root TEXT,                          -- the project root of the last process that opened it
    generation BIGINT NOT NULL DEFAULT 0,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_opened_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS file_state (
    workspace_id TEXT NOT NULL,
    file_id BIGINT NOT NULL,
    path TEXT NOT NULL,
    size_bytes BIGINT NOT NULL,
    mtime_ns BIGINT NOT NULL,
    content_hash TEXT NOT NULL,
    language TEXT,
    chunk_count INTEGER NOT NULL,
    indexed_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    generation BIGINT NOT NULL DEFAULT 0,
    secrets_redacted INTEGER NOT NULL DEFAULT 0,
    warnings TEXT[],
    PRIMARY KEY (workspace_id, file_id),
    UNIQUE (workspace_id, path)
);
CREATE INDEX IF NOT EXISTS file_state_generation ON file_state (workspace_id, generation);

CREATE TABLE IF NOT EXISTS chunks (
    workspace_id TEXT NOT NULL,
    chunk_id TEXT NOT NULL,
    file_id BIGINT NOT NULL,
    ordinal INTEGER NOT NULL,
    kind TEXT NOT NULL,
    label TEXT,
    language TEXT,
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    start_byte INTEGER NOT NULL,
    end_byte INTEGER NOT NULL,
    tokens_est INTEGER NOT NULL,
    text TEXT NOT NULL,
    embed_hash TEXT NOT NULL,
    index_text TEXT,
    parent TEXT,
    contextualized BOOLEAN NOT NULL DEFAULT false,
    PRIMARY KEY (workspace_id, chunk_id)
);
CREATE INDEX IF NOT EXISTS chunks_file ON chunks (workspace_id, file_id);
CREATE INDEX IF NOT EXISTS chunks_embed_hash ON chunks (workspace_id, embed_hash);

CREATE TABLE IF NOT EXISTS embeddings (
    workspace_id TEXT NOT NULL,
    model TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    vector vector NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, model, text_hash)
);

CREATE TABLE IF NOT EXISTS links (
    workspace_id TEXT NOT NULL,
    src_chunk_id TEXT NOT NULL,
    file_id BIGINT NOT NULL,
    target TEXT NOT NULL,
    link_type TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS links_file ON links (workspace_id, file_id);

CREATE TABLE IF NOT EXISTS symbols (
    workspace_id TEXT NOT NULL,
    chunk_id TEXT NOT NULL,
    file_id BIGINT NOT NULL,
    name TEXT NOT NULL,
    name_lower TEXT NOT NULL,
    short_lower TEXT NOT NULL,
    kind TEXT NOT NULL,
    line INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS symbols_file ON symbols (workspace_id, file_id);

CREATE TABLE IF NOT EXISTS removed_files (
    workspace_id TEXT NOT NULL,
    file_id BIGINT NOT NULL,
    path TEXT NOT NULL,
    generation BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS removed_files_generation ON removed_files (workspace_id, generation);

CREATE TABLE IF NOT EXISTS usage_metrics (
    workspace_id TEXT NOT NULL,
    metric_id BIGSERIAL,
    recorded_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    task_id TEXT,
    query TEXT,
    providers_used TEXT[],
    snippets_count INTEGER,
    context_tokens INTEGER,
    query_latency_ms DOUBLE PRECISION,
    cache_hits INTEGER
);
CREATE INDEX IF NOT EXISTS usage_metrics_workspace ON usage_metrics (workspace_id);

CREATE TABLE IF NOT EXISTS bootstrap_progress (
    workspace_id TEXT NOT NULL,
    file_path TEXT NOT NULL,
    status TEXT NOT NULL,
    started_at TIMESTAMPTZ,
    completed_at TIMESTAMPTZ,
    error_message TEXT,
    job_id TEXT,
    PRIMARY KEY (workspace_id, file_path)
);

CREATE TABLE IF NOT EXISTS bootstrap_errors (
    workspace_id TEXT NOT NULL,
    error_id BIGSERIAL,
    file_path TEXT NOT NULL,
    error_type TEXT NOT NULL,
    error_message TEXT NOT NULL,
    stack_trace TEXT,
    occurred_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    retry_count INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS bootstrap_errors_path ON bootstrap_errors (workspace_id, file_path);

CREATE TABLE IF NOT EXISTS jobs (
    workspace_id TEXT NOT NULL,
    job_id TEXT NOT NULL,
    job_type TEXT NOT NULL,
    status TEXT NOT NULL,
    scope TEXT,
    files_total INTEGER,
    files_processed INTEGER NOT NULL DEFAULT 0,
    started_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    completed_at TIMESTAMPTZ,
    error_message TEXT,
    metrics JSONB,
    created_by TEXT,
    chunks_processed INTEGER NOT NULL DEFAULT 0,
    current_file TEXT,
    updated_at TIMESTAMPTZ,
    cancel_requested BOOLEAN NOT NULL DEFAULT false,
    params JSONB,
    PRIMARY KEY (workspace_id, job_id)
);
CREATE INDEX IF NOT EXISTS jobs_status ON jobs (workspace_id, status);

CREATE TABLE IF NOT EXISTS project_config (
    workspace_id TEXT PRIMARY KEY,
    watch_paths TEXT[] NOT NULL,
    ignore_patterns TEXT[] NOT NULL,
    allowed_extensions TEXT[],
    blocked_extensions TEXT[],
    max_file_size_mb REAL,
    follow_symlinks BOOLEAN,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS prefix_cache (
    workspace_id TEXT NOT NULL,
    model TEXT NOT NULL,
    chunk_hash TEXT NOT NULL,
    doc_hash TEXT NOT NULL,
    prefix TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, model, chunk_hash, doc_hash)
);

CREATE TABLE IF NOT EXISTS index_meta (
    workspace_id TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (workspace_id, key)
);
