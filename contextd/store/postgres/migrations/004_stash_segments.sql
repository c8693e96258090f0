-- Version 4: agent memory (DuckDB's migration 007): segments an agent stashed out of its
-- context window. Vectors live in embeddings, keyed by (model, BLAKE3 of the text) like
-- chunks'. Times are naive UTC, as the store's callers give them.
CREATE TABLE IF NOT EXISTS stash_segments (
    workspace_id TEXT NOT NULL,
    segment_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    text TEXT NOT NULL,                 -- scrubbed of secrets before it got here
    segment_type TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    stashed_at TIMESTAMP NOT NULL,
    tokens INTEGER NOT NULL,
    topic TEXT,
    source TEXT,
    refs TEXT[] NOT NULL,               -- ids of segments this one references
    text_hash TEXT NOT NULL,            -- key into embeddings
    embedding_model TEXT,
    expires_at TIMESTAMP,               -- NULL: never
    protected BOOLEAN NOT NULL DEFAULT false,
    PRIMARY KEY (workspace_id, segment_id)
);
CREATE INDEX IF NOT EXISTS stash_segments_session ON stash_segments (workspace_id, session_id);
CREATE INDEX IF NOT EXISTS stash_segments_text_hash ON stash_segments (workspace_id, text_hash);
