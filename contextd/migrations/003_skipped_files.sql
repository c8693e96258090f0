-- Version 3: files left out of the index, and why.
-- * skipped_files: what a full walk refused although the project would otherwise index it
--   (too_large, binary, generated, secret_file, unreadable), and files the indexer gave up
--   on. size_bytes/mtime_ns are the file as it was when skipped, so a caller can leave a
--   failed file alone until it changes. One row per (path, reason).
CREATE TABLE IF NOT EXISTS skipped_files (
    path TEXT NOT NULL,
    reason TEXT NOT NULL,
    detail TEXT NOT NULL,
    size_bytes BIGINT,
    mtime_ns BIGINT,
    recorded_at TIMESTAMP NOT NULL DEFAULT now()
);
