"""An answer whose vector index lacks vectors says so, whatever the indexer is doing.

The CI run of 9c13ec9 caught an answer without semantic hits and without the "still being
computed" note: the follower had written the last vectors (the store's missing count was 0,
no embedding under way) but the vector index the answer searched had not taken them in yet.
The note now comes from the index the answer searched. Real parts: a git repository in a tmp
dir, the engine, its DuckDB store and the real embedding model."""

from __future__ import annotations

from test_mcp_server import make_repo

from contextd.operations.answers import query
from contextd.query.left_out import SEMANTIC_PENDING
from contextd.query.records import QueryRequest
from contextd.runtime.engine import Engine


def _pending(notes) -> list[str]:
    return [note for note in notes if note.startswith(SEMANTIC_PENDING)]


def test_an_answer_searching_an_index_without_some_vectors_says_so(tmp_path):
    engine = Engine.open(str(make_repo(tmp_path / "repo")))
    try:
        engine.indexer.ensure_indexed(embed=False)  # chunks only; nothing computes vectors
        request = QueryRequest("invoice_total", k=3, wait_for_model=True)
        assert not engine.indexer.embedding_under_way
        first = query(engine, request)
        assert first.hits[0].file_path == "src/billing/invoice.py"
        assert all("semantic" not in hit.providers for hit in first.hits)
        assert len(_pending(first.notes)) == 1, first.notes
        assert "chunk texts had no vector yet" in _pending(first.notes)[0]

        engine.indexer.embed_pending()
        later = query(engine, request)
        assert _pending(later.notes) == [], later.notes
        assert any("semantic" in hit.providers for hit in later.hits), later
    finally:
        engine.close()
