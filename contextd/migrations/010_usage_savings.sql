-- Version 10: what the Index Manager's savings page needs per answer:
-- the files the snippets came from and their whole-file tokens (tokens served vs tokens an
-- agent would have read), and each provider's mean score.
ALTER TABLE usage_metrics ADD COLUMN IF NOT EXISTS files_served TEXT[];
ALTER TABLE usage_metrics ADD COLUMN IF NOT EXISTS source_tokens INTEGER;
ALTER TABLE usage_metrics ADD COLUMN IF NOT EXISTS provider_scores JSON;
