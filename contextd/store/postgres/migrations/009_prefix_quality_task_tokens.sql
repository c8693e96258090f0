-- Version 9 (issue 30): knowledge document metadata, chunk prefix quality and tokens,
-- agent-reported task token usage, as DuckDB's migration 013.
ALTER TABLE chunks ADD COLUMN IF NOT EXISTS prefix_quality DOUBLE PRECISION;
ALTER TABLE chunks ADD COLUMN IF NOT EXISTS prefix_tokens INTEGER DEFAULT 0;
CREATE TABLE IF NOT EXISTS task_usage (
    workspace_id TEXT NOT NULL,
    report_id BIGSERIAL,
    recorded_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    op TEXT NOT NULL,
    agent TEXT,
    task_id TEXT NOT NULL,
    tokens_input INTEGER NOT NULL,
    tokens_output INTEGER NOT NULL,
    context_tokens INTEGER,
    notes TEXT
);
CREATE INDEX IF NOT EXISTS task_usage_workspace ON task_usage (workspace_id, task_id);
ALTER TABLE kb_documents ADD COLUMN IF NOT EXISTS metadata JSONB;
