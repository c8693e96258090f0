-- Version 6: the knowledge base (named contexts of documents beside the project index).
-- A document's chunks live in file_state/chunks/embeddings like a project file's, under a
-- path of the 'kb://' namespace, so every provider, fusion, MMR and the budget rank them
-- with the project's chunks (one query path). These tables add what a file lacks: contexts,
-- which contexts hold which document, and where a document came from (and its pages).
-- No primary keys: DuckDB refuses a delete and re-insert of one key in one transaction;
-- uniqueness is kept by the store under its write lock.
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
    updated_at TIMESTAMP NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS kb_memberships (
    context TEXT NOT NULL,              -- kb_contexts.name
    path TEXT NOT NULL,                 -- kb_documents.path
    added_at TIMESTAMP NOT NULL DEFAULT now()
);

INSERT INTO kb_contexts (name, display_name, description)
SELECT 'default', 'default', 'Documents added without naming a context'
WHERE NOT EXISTS (SELECT 1 FROM kb_contexts WHERE name = 'default');
