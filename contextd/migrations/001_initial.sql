-- Version 1: the index's tables (file_state, chunks, embeddings, links, usage_metrics,
-- bootstrap_progress, bootstrap_errors, jobs, project_config).
CREATE SEQUENCE IF NOT EXISTS file_id_seq START 1;
CREATE SEQUENCE IF NOT EXISTS error_id_seq START 1;
CREATE SEQUENCE IF NOT EXISTS metric_id_seq START 1;

CREATE TABLE IF NOT EXISTS file_state (
    file_id BIGINT NOT NULL,
    path TEXT NOT NULL,
    size_bytes BIGINT NOT NULL,
    mtime_ns BIGINT NOT NULL,
    content_hash TEXT NOT NULL,
    language TEXT,
    chunk_count INTEGER NOT NULL,
    indexed_at TIMESTAMP NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS chunks (
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
    embed_hash TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS embeddings (
    model TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    vector FLOAT[] NOT NULL,
    created_at TIMESTAMP NOT NULL DEFAULT now(),
    PRIMARY KEY (model, text_hash)
);

CREATE TABLE IF NOT EXISTS links (
    src_chunk_id TEXT NOT NULL,
    file_id BIGINT NOT NULL,
    target TEXT NOT NULL,
    link_type TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS usage_metrics (
    metric_id BIGINT NOT NULL DEFAULT nextval('metric_id_seq'),
    recorded_at TIMESTAMP NOT NULL DEFAULT now(),
    task_id TEXT,
    query TEXT,
    providers_used TEXT[],
    snippets_count INTEGER,
    context_tokens INTEGER,
    query_latency_ms DOUBLE
);

CREATE TABLE IF NOT EXISTS bootstrap_progress (
    file_path TEXT NOT NULL,
    status TEXT NOT NULL,
    started_at TIMESTAMP,
    completed_at TIMESTAMP,
    error_message TEXT
);

CREATE TABLE IF NOT EXISTS bootstrap_errors (
    error_id BIGINT NOT NULL DEFAULT nextval('error_id_seq'),
    file_path TEXT NOT NULL,
    error_type TEXT NOT NULL,
    error_message TEXT NOT NULL,
    stack_trace TEXT,
    occurred_at TIMESTAMP NOT NULL DEFAULT now(),
    retry_count INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE IF NOT EXISTS jobs (
    job_id TEXT NOT NULL,
    job_type TEXT NOT NULL,
    status TEXT NOT NULL,
    scope TEXT,
    files_total INTEGER,
    files_processed INTEGER NOT NULL DEFAULT 0,
    started_at TIMESTAMP NOT NULL DEFAULT now(),
    completed_at TIMESTAMP,
    error_message TEXT,
    metrics JSON,
    created_by TEXT
);

CREATE TABLE IF NOT EXISTS project_config (
    config_id INTEGER NOT NULL,
    watch_paths TEXT[] NOT NULL,
    ignore_patterns TEXT[] NOT NULL,
    allowed_extensions TEXT[],
    blocked_extensions TEXT[],
    max_file_size_mb REAL,
    follow_symlinks BOOLEAN,
    created_at TIMESTAMP NOT NULL DEFAULT now(),
    updated_at TIMESTAMP NOT NULL DEFAULT now()
);
