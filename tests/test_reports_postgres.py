"""Issue 30's store additions on PostgreSQL, the same answers as DuckDB: prefix quality and
tokens of chunks, task token usage, the cache hit rate, and knowledge document metadata."""

from __future__ import annotations

from contextd.chunkers.chunking import chunk_file
from contextd.config.sections import ContextConfig
from contextd.contextualizers.stage import index_texts
from contextd.store.base import DocumentRecord, FileRecord, IndexedChunk
from contextd.store.duckdb.store import DuckDBStore
from contextd.store.postgres import PostgresStore

SOURCE = '''"""Sessions of the auth service."""


class SessionStore:
    """Where sessions live."""

    def save(self, session_id, payload):
        self.redis.setex(session_id, 3600, payload)
'''


def _record(path: str) -> FileRecord:
    config = ContextConfig()
    chunks = chunk_file(path, SOURCE.encode(), config).chunks
    texts = index_texts(SOURCE, path, chunks, config)
    return FileRecord(path=path, size_bytes=len(SOURCE), mtime_ns=1, content_hash="h",
                      language="python", chunks=[
                          IndexedChunk(c, t.text, t.contextualized, t.prefix_quality,
                                       t.prefix_tokens) for c, t in zip(chunks, texts)])


def _exercise(store) -> tuple:
    store.write_files([_record("src/auth.py")])
    summary = store.prefix_summary()
    ids = [r.chunk_id for r in store.chunks_for_files()]
    details = store.prefix_details(ids)
    store.record_task_usage("before_integration", "T-1", 5000, 2000, "claude-code")
    store.record_task_usage("after_integration", "T-1", 1000, 400, None, 800, "note")
    usage = [{k: v for k, v in row.items() if k != "recorded_at"} for row in store.task_usage()]
    store.record_usage_many([("t", "q", ["semantic"], 1, 10, 1.0, hits, [], {})
                             for hits in (3, 0)])
    store.kb_write_documents([DocumentRecord(_record("kb://docs/a.py"), "/x/docs/a.py", "code",
                                             (), "a", {"team": "it"})], ["default"])
    metadata = store.kb_documents()[0]["metadata"], \
        store.kb_document_map()["kb://docs/a.py"].metadata
    return summary, sorted(details.values()), usage, store.cache_hit_rate(), metadata


def test_postgres_answers_as_duckdb(tmp_path, postgres_url, workspace):
    duck = DuckDBStore(tmp_path / "index.duckdb")
    pg = PostgresStore(postgres_url, workspace)
    try:
        expected = _exercise(duck)
        assert _exercise(pg) == expected
    finally:
        duck.close()
        pg.close()
    summary, details, usage, rate, metadata = expected
    assert summary["contextualized"] == summary["chunks"] > 0
    assert all(quality is not None and tokens > 0 for quality, tokens in details)
    assert usage[1] == {"op": "after_integration", "agent": None, "task_id": "T-1",
                        "tokens_input": 1000, "tokens_output": 400, "context_tokens": 800,
                        "notes": "note"}
    assert rate == 0.5 and metadata == ({"team": "it"}, {"team": "it"})
