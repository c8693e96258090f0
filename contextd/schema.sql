-- contextd index schema: the single description of a fresh database at SCHEMA_VERSION 13.
-- Older databases reach the same shape through contextd/migrations/NNN_*.sql, applied in
-- order on open (tests/test_store.py checks that both roads give identical tables).
-- Vectors are keyed by (model identity, BLAKE3 of the embedded text): the embeddings table
-- doubles as the embedding cache, and a chunk is "embedded" when its embed_hash has a row
-- for the current model.

CREATE SEQUENCE IF NOT EXISTS file_id_seq START 1;
CREATE SEQUENCE IF NOT EXISTS error_id_seq START 1;
CREATE SEQUENCE IF NOT EXISTS metric_id_seq START 1;

-- One row per indexed file; generation = the write that last touched it.
CREATE TABLE IF NOT EXISTS file_state (
    file_id BIGINT NOT NULL,
    path TEXT NOT NULL,                 -- POSIX, relative to the project root
    size_bytes BIGINT NOT NULL,
    mtime_ns BIGINT NOT NULL,
    content_hash TEXT NOT NULL,         -- BLAKE3 of the original bytes (before scrubbing)
    language TEXT,
    chunk_count INTEGER NOT NULL,
    indexed_at TIMESTAMP NOT NULL DEFAULT now(),
    generation BIGINT NOT NULL DEFAULT 0,
    secrets_redacted INTEGER NOT NULL DEFAULT 0,
    warnings TEXT[]
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
    text TEXT NOT NULL,                 -- what users see (secrets redacted)
    embed_hash TEXT NOT NULL,           -- BLAKE3 of index_text
    index_text TEXT,                    -- what is embedded and BM25-indexed (prefix + text)
    parent TEXT,
    contextualized BOOLEAN NOT NULL DEFAULT false,
    prefix_quality DOUBLE,              -- quality score of the prefix (0-1); NULL: none
    prefix_tokens INTEGER DEFAULT 0
);

CREATE TABLE IF NOT EXISTS embeddings (
    model TEXT NOT NULL,                -- embedder identity: model/backend/quantisation
    text_hash TEXT NOT NULL,
    vector FLOAT[] NOT NULL,
    created_at TIMESTAMP NOT NULL DEFAULT now(),
    PRIMARY KEY (model, text_hash)
);

-- References from a chunk to a name (calls, imports, base classes).
CREATE TABLE IF NOT EXISTS links (
    src_chunk_id TEXT NOT NULL,
    file_id BIGINT NOT NULL,
    target TEXT NOT NULL,
    link_type TEXT NOT NULL
);

-- Definitions found by the chunkers.
CREATE TABLE IF NOT EXISTS symbols (
    chunk_id TEXT NOT NULL,
    file_id BIGINT NOT NULL,
    name TEXT NOT NULL,                 -- qualified, e.g. Class.method
    name_lower TEXT NOT NULL,
    short_lower TEXT NOT NULL,          -- last dotted component, lower-cased
    kind TEXT NOT NULL,
    line INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS removed_files (
    file_id BIGINT NOT NULL,
    path TEXT NOT NULL,
    generation BIGINT NOT NULL
);

CREATE TABLE IF NOT EXISTS usage_metrics (
    metric_id BIGINT NOT NULL DEFAULT nextval('metric_id_seq'),
    recorded_at TIMESTAMP NOT NULL DEFAULT now(),
    task_id TEXT,
    query TEXT,
    providers_used TEXT[],
    snippets_count INTEGER,
    context_tokens INTEGER,
    query_latency_ms DOUBLE,
    cache_hits INTEGER,
    files_served TEXT[],                -- distinct files the answer's snippets came from
    source_tokens INTEGER,              -- tokens of those whole files when answered
    provider_scores JSON                -- provider id -> mean score of the hits it found
);

-- Token usage of tasks as agents report it, for the reduction report.
CREATE SEQUENCE IF NOT EXISTS task_usage_id_seq START 1;
CREATE TABLE IF NOT EXISTS task_usage (
    report_id BIGINT NOT NULL DEFAULT nextval('task_usage_id_seq'),
    recorded_at TIMESTAMP NOT NULL DEFAULT now(),
    op TEXT NOT NULL,                   -- before_integration | after_integration
    agent TEXT,                         -- e.g. claude-code, codex-cli
    task_id TEXT NOT NULL,
    tokens_input INTEGER NOT NULL,      -- prompt tokens sent to the agent
    tokens_output INTEGER NOT NULL,     -- response tokens of the agent
    context_tokens INTEGER,             -- of tokens_input, those of the context block
    notes TEXT
);

CREATE TABLE IF NOT EXISTS bootstrap_progress (
    file_path TEXT NOT NULL,
    status TEXT NOT NULL,               -- pending | processing | completed | failed
    started_at TIMESTAMP,
    completed_at TIMESTAMP,
    error_message TEXT,
    job_id TEXT
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

-- Files left out of the index and why (a walk's too_large, binary, generated, secret_file,
-- unreadable; files the indexer gave up on), with the size/mtime they had then.
CREATE TABLE IF NOT EXISTS skipped_files (
    path TEXT NOT NULL,
    reason TEXT NOT NULL,
    detail TEXT NOT NULL,
    size_bytes BIGINT,
    mtime_ns BIGINT,
    recorded_at TIMESTAMP NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS jobs (
    job_id TEXT NOT NULL,
    job_type TEXT NOT NULL,             -- rebuild_full | rebuild_partial | refresh | bootstrap
    status TEXT NOT NULL,               -- queued | in_progress | completed | failed | cancelled | interrupted
    scope TEXT,
    files_total INTEGER,
    files_processed INTEGER NOT NULL DEFAULT 0,
    started_at TIMESTAMP NOT NULL DEFAULT now(),
    completed_at TIMESTAMP,
    error_message TEXT,
    metrics JSON,
    created_by TEXT,
    chunks_processed INTEGER NOT NULL DEFAULT 0,
    current_file TEXT,
    updated_at TIMESTAMP,
    cancel_requested BOOLEAN NOT NULL DEFAULT false,
    params JSON
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

-- LLM contextualizer prefixes, so a re-index costs nothing for unchanged chunks.
CREATE TABLE IF NOT EXISTS prefix_cache (
    model TEXT NOT NULL,
    chunk_hash TEXT NOT NULL,
    doc_hash TEXT NOT NULL,
    prefix TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL DEFAULT now(),
    PRIMARY KEY (model, chunk_hash, doc_hash)
);

CREATE TABLE IF NOT EXISTS index_meta (
    key TEXT NOT NULL,
    value TEXT NOT NULL
);

-- Search sessions (contextd/sessions): the kept results of search_knowledge, newest last.
CREATE TABLE IF NOT EXISTS search_sessions (
    session_id TEXT NOT NULL,
    query TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,      -- UTC
    params JSON,                        -- the search's arguments (scope, min_similarity, ...)
    result_count INTEGER NOT NULL,
    results JSON NOT NULL               -- the kept hits, best first, with their text
);
-- Agent memory (contextd/stash): segments stashed out of an agent's window; their
-- vectors are in embeddings, keyed by (model identity, text_hash).
CREATE TABLE IF NOT EXISTS stash_segments (
    segment_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    text TEXT NOT NULL,                 -- scrubbed of secrets before it got here
    segment_type TEXT NOT NULL,         -- message, code_block, file_content, error_log, ...
    created_at TIMESTAMP NOT NULL,      -- when the content came to be (UTC)
    stashed_at TIMESTAMP NOT NULL,      -- when the agent stashed it (UTC)
    tokens INTEGER NOT NULL,
    topic TEXT,
    source TEXT,
    refs TEXT[] NOT NULL,               -- ids of segments this one references
    text_hash TEXT NOT NULL,            -- key into embeddings
    embedding_model TEXT,               -- identity of the model its vector was made with
    expires_at TIMESTAMP,               -- NULL: never (protected segments never expire)
    protected BOOLEAN NOT NULL DEFAULT false
);
CREATE INDEX IF NOT EXISTS idx_stash_session ON stash_segments(session_id);
-- Knowledge base (version 6): see migrations/006_knowledge.sql.
CREATE TABLE IF NOT EXISTS kb_contexts (
    name TEXT NOT NULL,                 -- lower-cased: names are unique case-insensitively
    display_name TEXT NOT NULL,         -- as first spelled
    description TEXT NOT NULL DEFAULT '',
    created_at TIMESTAMP NOT NULL DEFAULT now(),
    updated_at TIMESTAMP NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS kb_documents (
    path TEXT NOT NULL,                 -- its file_state path: 'kb://' + root-relative or absolute
    source TEXT NOT NULL,               -- absolute path of the file it was read from
    format TEXT NOT NULL,               -- markdown, text, rst, html, pdf, docx, code
    page_starts INTEGER[],              -- first line of each page (PDF), NULL without pages
    title TEXT,
    added_at TIMESTAMP NOT NULL DEFAULT now(),
    updated_at TIMESTAMP NOT NULL DEFAULT now(),
    metadata JSON                       -- given at add, NULL: none
);

CREATE TABLE IF NOT EXISTS kb_memberships (
    context TEXT NOT NULL,              -- kb_contexts.name
    path TEXT NOT NULL,                 -- kb_documents.path
    added_at TIMESTAMP NOT NULL DEFAULT now()
);

INSERT INTO kb_contexts (name, display_name, description)
SELECT 'default', 'default', 'Documents added without naming a context'
WHERE NOT EXISTS (SELECT 1 FROM kb_contexts WHERE name = 'default');

CREATE INDEX IF NOT EXISTS idx_jobs_status ON jobs(status);
CREATE INDEX IF NOT EXISTS idx_jobs_created ON jobs(started_at);
CREATE INDEX IF NOT EXISTS idx_search_sessions_created ON search_sessions(created_at);
