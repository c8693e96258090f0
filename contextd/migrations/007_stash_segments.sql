-- Version 7: agent memory (contextd/stash). Segments an agent stashed out of its
-- context window, to retrieve by meaning and recency and merge back later. Vectors live in
-- the embeddings table, keyed by (model identity, BLAKE3 of the text) like chunks', so the
-- embedding cache is shared and a model change re-embeds instead of mixing identities.
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
