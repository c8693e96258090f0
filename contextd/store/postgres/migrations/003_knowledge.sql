-- Version 3: the knowledge base (DuckDB's migration 006). A document's chunks live in
-- file_state/chunks/embeddings under a 'kb://' path like a project file's; these tables add
-- the named contexts, which contexts hold which document, and where a document came from.
-- Timestamps are naive (TIMESTAMP), as DuckDB's, so `contextd store copy` carries them
-- unchanged in both directions.
CREATE TABLE IF NOT EXISTS kb_contexts (
    workspace_id TEXT NOT NULL,
    name TEXT NOT NULL,                 -- lower-cased: names are unique case-insensitively
    display_name TEXT NOT NULL,         -- as first spelled
    description TEXT NOT NULL DEFAULT '',
    created_at TIMESTAMP NOT NULL DEFAULT LOCALTIMESTAMP,
    updated_at TIMESTAMP NOT NULL DEFAULT LOCALTIMESTAMP,
    PRIMARY KEY (workspace_id, name)
);

CREATE TABLE IF NOT EXISTS kb_documents (
    workspace_id TEXT NOT NULL,
    path TEXT NOT NULL,                 -- its file_state path: 'kb://' + root-relative or absolute
    source TEXT NOT NULL,               -- absolute path of the file it was read from
    format TEXT NOT NULL,               -- markdown, text, rst, html, pdf, docx, code
    page_starts INTEGER[],              -- first line of each page (PDF), NULL without pages
    title TEXT,
    added_at TIMESTAMP NOT NULL DEFAULT LOCALTIMESTAMP,
    updated_at TIMESTAMP NOT NULL DEFAULT LOCALTIMESTAMP,
    PRIMARY KEY (workspace_id, path)
);

CREATE TABLE IF NOT EXISTS kb_memberships (
    workspace_id TEXT NOT NULL,
    context TEXT NOT NULL,              -- kb_contexts.name
    path TEXT NOT NULL,                 -- kb_documents.path
    added_at TIMESTAMP NOT NULL DEFAULT LOCALTIMESTAMP,
    PRIMARY KEY (workspace_id, context, path)
);
CREATE INDEX IF NOT EXISTS kb_memberships_path ON kb_memberships (workspace_id, path);

-- Every workspace has a 'default' context (new ones get it when first opened: store.py).
INSERT INTO kb_contexts (workspace_id, name, display_name, description)
SELECT workspace_id, 'default', 'default', 'Documents added without naming a context'
FROM workspaces ON CONFLICT DO NOTHING;
