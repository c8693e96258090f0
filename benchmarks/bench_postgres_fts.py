"""Full text on PostgreSQL: its own text search (GIN + ts_rank_cd) or our in-memory BM25?

Prints, for both: the golden queries of tests/test_golden_queries.py answered from the golden
repository (expected chunk among the first three), and query latency p50/p95 at ``--chunks``
real chunks (the standard library, as bench_query.py cuts it) in one workspace, with the
build time of each index. PostgreSQL's side uses the ``english`` configuration with OR
semantics (``plainto_tsquery`` with & turned into |), its most forgiving form.

    .venv/bin/python benchmarks/bench_postgres_fts.py [--chunks 100000] [--url URL]
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path

from bench_postgres import postgres_server
from bench_query import QUERIES, fill_store, percentiles

from contextd.config.sections import ContextConfig
from contextd.indexer import Indexer
from contextd.config.project import Project
from contextd.providers.fulltext import BM25Index, code_tokens, document_text
from contextd.store.postgres import PostgresStore

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

_QUERY = "replace(plainto_tsquery('english', %s)::text, '&', '|')::tsquery"


def build_text_search(store: PostgresStore) -> str:
    """PostgreSQL's text search at its best: a stored tsvector per chunk (the indexed text,
    which carries the contextual prefix, as BM25's document does) under a GIN index; returns
    the table's name."""
    table = f"fts_{store.workspace.replace('-', '_')}"
    with store._pool.connection() as conn:
        conn.execute(f"""CREATE TABLE {table} AS SELECT chunk_id,
                         to_tsvector('english', coalesce(index_text, text)) AS tsv
                         FROM chunks WHERE workspace_id = %s""", [store.workspace])
        conn.execute(f"CREATE INDEX ON {table} USING gin (tsv)")
        conn.execute(f"ANALYZE {table}")
    return table


def postgres_top(store: PostgresStore, table: str, query: str, k: int) -> list[str]:
    return [r[0] for r in store._rows(
        f"""SELECT chunk_id FROM {table} WHERE tsv @@ {_QUERY}
            ORDER BY ts_rank_cd(tsv, {_QUERY}) DESC, chunk_id LIMIT %s""", [query, query, k])]


def bm25_index(store: PostgresStore) -> BM25Index:
    index = BM25Index()
    for row in store.chunks_for_files():
        index.add(row.chunk_id, code_tokens(document_text(row)))
    return index


def golden(url: str) -> None:
    from golden import make_golden_copy
    from test_golden_queries import GOLDEN_QUERIES, TOP_N
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        root = make_golden_copy(Path(tmp) / "repo")
        store = PostgresStore(url, f"fts-golden-{uuid.uuid4().hex[:6]}")
        Indexer(Project(root, ContextConfig()), store, embed=False).refresh()
        rows = {r.chunk_id: r for r in store.chunks_for_files()}
        table = build_text_search(store)
        bm25 = bm25_index(store)
        passed = {"postgres": 0, "bm25": 0}
        for query, path, label in GOLDEN_QUERIES:
            answers = {"postgres": postgres_top(store, table, query, TOP_N),
                       "bm25": [c for c, _ in bm25.top(code_tokens(query), TOP_N)]}
            for name, ids in answers.items():
                passed[name] += any(rows[c].file_path == path and
                                    (label is None or rows[c].label.endswith(label))
                                    for c in ids)
        store.close()
    total = len(GOLDEN_QUERIES)
    print(f"golden queries, expected chunk in the top {TOP_N}: PostgreSQL text search "
          f"{passed['postgres']}/{total}, our BM25 {passed['bm25']}/{total}", flush=True)


def latency(url: str, chunks: int, queries: int) -> None:
    store = PostgresStore(url, f"fts-{uuid.uuid4().hex[:6]}")
    written = fill_store(store, chunks, ContextConfig(), "random-8d", 8, vectors_at_end=True)
    started = time.perf_counter()
    table = build_text_search(store)
    gin_s = time.perf_counter() - started
    timings = []
    for i in range(queries):
        begin = time.perf_counter()
        postgres_top(store, table, QUERIES[i % len(QUERIES)], 50)
        timings.append((time.perf_counter() - begin) * 1000)
    pg = percentiles(timings)
    started = time.perf_counter()
    bm25 = bm25_index(store)
    bm25_s = time.perf_counter() - started
    timings = []
    for i in range(queries):
        begin = time.perf_counter()
        bm25.top(code_tokens(QUERIES[i % len(QUERIES)]), 50)
        timings.append((time.perf_counter() - begin) * 1000)
    ours = percentiles(timings)
    store.close()
    print(f"{written:,} chunks, top-50: PostgreSQL text search p50 {pg['p50_ms']:.1f} ms, "
          f"p95 {pg['p95_ms']:.1f} ms (tsvector + GIN built in {gin_s:.0f} s); our BM25 p50 "
          f"{ours['p50_ms']:.1f} ms, p95 {ours['p95_ms']:.1f} ms (loaded and built in "
          f"{bm25_s:.0f} s, per process)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--url")
    args = parser.parse_args()
    with postgres_server(args.url) as url:
        golden(url)
        latency(url, args.chunks, args.queries)


if __name__ == "__main__":
    main()
