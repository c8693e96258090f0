-- Version 13 (issue 30): the metadata a knowledge document was added with; each
-- chunk's contextual prefix quality (0-1) and
-- prefix tokens, kept instead of thrown away; and the agent-reported token usage of tasks
-- (op before/after, agent, tokens_input, tokens_output) behind the token-reduction report.
ALTER TABLE chunks ADD COLUMN IF NOT EXISTS prefix_quality DOUBLE;
ALTER TABLE chunks ADD COLUMN IF NOT EXISTS prefix_tokens INTEGER DEFAULT 0;
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
ALTER TABLE kb_documents ADD COLUMN IF NOT EXISTS metadata JSON;
