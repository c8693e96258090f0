-- Version 6: per answer, the files its snippets came from, their whole-file tokens and each
-- provider's mean score (DuckDB's migration 010), for usage_summary.
ALTER TABLE usage_metrics ADD COLUMN IF NOT EXISTS files_served TEXT[];
ALTER TABLE usage_metrics ADD COLUMN IF NOT EXISTS source_tokens INTEGER;
ALTER TABLE usage_metrics ADD COLUMN IF NOT EXISTS provider_scores JSONB;
CREATE INDEX IF NOT EXISTS usage_metrics_recorded ON usage_metrics (workspace_id, recorded_at);
