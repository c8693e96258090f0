-- Version 2: what incremental providers, the indexer and the contextualizer need.
-- * symbols: definitions found by the chunkers (references stay in links).
-- * generation counters on file_state and a tombstone table, so in-memory indexes (BM25,
--   vectors) catch up on exactly what changed instead of reloading everything.
-- * chunks carry the contextualised text that is embedded/indexed, and their parent.
-- * warnings and redaction counts per file; job progress details; a prefix cache; metadata.
ALTER TABLE file_state ADD COLUMN generation BIGINT NOT NULL DEFAULT 0;
ALTER TABLE file_state ADD COLUMN secrets_redacted INTEGER NOT NULL DEFAULT 0;
ALTER TABLE file_state ADD COLUMN warnings TEXT[];
ALTER TABLE chunks ADD COLUMN index_text TEXT;
ALTER TABLE chunks ADD COLUMN parent TEXT;
ALTER TABLE chunks ADD COLUMN contextualized BOOLEAN NOT NULL DEFAULT false;
UPDATE chunks SET index_text = text WHERE index_text IS NULL;
ALTER TABLE jobs ADD COLUMN chunks_processed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN current_file TEXT;
ALTER TABLE jobs ADD COLUMN updated_at TIMESTAMP;
ALTER TABLE jobs ADD COLUMN cancel_requested BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE jobs ADD COLUMN params JSON;
ALTER TABLE bootstrap_progress ADD COLUMN job_id TEXT;
ALTER TABLE usage_metrics ADD COLUMN cache_hits INTEGER;

CREATE TABLE IF NOT EXISTS symbols (
    chunk_id TEXT NOT NULL,
    file_id BIGINT NOT NULL,
    name TEXT NOT NULL,
    name_lower TEXT NOT NULL,
    short_lower TEXT NOT NULL,
    kind TEXT NOT NULL,
    line INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS removed_files (
    file_id BIGINT NOT NULL,
    path TEXT NOT NULL,
    generation BIGINT NOT NULL
);

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

CREATE INDEX IF NOT EXISTS idx_jobs_status ON jobs(status);
CREATE INDEX IF NOT EXISTS idx_jobs_created ON jobs(started_at);
