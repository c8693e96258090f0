-- Version 8: search sessions (contextd/sessions). search_knowledge keeps its top
-- results here so get_search_results, list_search_results and the CLI of any process of the
-- project see them; the newest sessions.max_sessions are kept, and they expire.
CREATE TABLE IF NOT EXISTS search_sessions (
    session_id TEXT NOT NULL,
    query TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,      -- UTC
    params JSON,                        -- the search's arguments (scope, min_similarity, ...)
    result_count INTEGER NOT NULL,
    results JSON NOT NULL               -- the kept hits, best first, with their text
);

CREATE INDEX IF NOT EXISTS idx_search_sessions_created ON search_sessions(created_at);
