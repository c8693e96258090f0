-- Version 5: search sessions (DuckDB's migration 008): the kept top results of
-- search_knowledge, newest first, pruned to sessions.max_sessions and by age.
CREATE TABLE IF NOT EXISTS search_sessions (
    workspace_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    query TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,      -- naive UTC
    params JSONB,
    result_count INTEGER NOT NULL,
    results JSONB NOT NULL,
    PRIMARY KEY (workspace_id, session_id)
);
CREATE INDEX IF NOT EXISTS search_sessions_created ON search_sessions (workspace_id, created_at);
