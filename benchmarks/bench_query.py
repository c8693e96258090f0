"""Warm query latency of ContextModule.query (hybrid, top-12, MMR) at 10k and 100k chunks.

Chunks are real code: the Python standard library and site-packages, cut by the real
chunkers, written to a real DuckDB store; BM25 and the symbol provider see the real text.
Embedding 100k chunks would take ~12 minutes here, so every chunk gets a random unit vector
(the query is embedded by the real model, and the matrix product costs the same). Git history
is not involved (the corpus is not a repository).

    .venv/bin/python benchmarks/bench_query.py [--sizes 10000 100000] [--queries 60]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import numpy as np

from contextd.chunkers.chunking import chunk_file
from contextd.config.sections import ContextConfig
from contextd.embedders.registry import get_embedder
from contextd import ContextModule
from contextd.config.project import Project
from contextd.query.records import QueryRequest
from contextd.store.base import FileRecord, IndexedChunk, IndexStore
from contextd.store.duckdb import DuckDBStore
from contextd.store.rows import text_hash

QUERIES = [
    "parse command line arguments", "read a file line by line", "HTTP request with retries",
    "json decode error", "ThreadPoolExecutor", "compress data with zlib", "datetime timezone",
    "validate_email", "open a socket connection", "tokenize python source", "LRU cache",
    "argparse.ArgumentParser", "walk a directory tree", "copy file permissions",
    "subprocess with timeout", "parse an URL query string", "base64 encode bytes",
    "logging handler rotating file", "decimal rounding", "hash a password",
    "csv reader dialect", "email message headers", "asyncio event loop run", "sqlite cursor",
    "random sample without replacement", "unittest assertRaises", "pathlib glob",
    "regular expression compile flags", "shutil.rmtree", "struct pack unpack",
]
BATCH_FILES = 200


def source_files() -> list[Path]:
    """Python files of the standard library, then of site-packages."""
    roots = [Path(sysconfig.get_paths()["stdlib"]), Path(sysconfig.get_paths()["purelib"])]
    return [p for root in roots for p in sorted(root.rglob("*.py"))
            if "test" not in p.parts and p.is_file()]


def build_store(path: Path, target_chunks: int, config: ContextConfig, identity: str,
                dimension: int) -> int:
    """Chunk real files until ``target_chunks``; store them with random unit vectors."""
    store = DuckDBStore(path)
    total = fill_store(store, target_chunks, config, identity, dimension)
    store.close()
    return total


def fill_store(store: IndexStore, target_chunks: int, config: ContextConfig, identity: str,
               dimension: int, seed: int = 0, vectors_at_end: bool = False) -> int:
    """Write chunks of real files until ``target_chunks``, with random unit vectors (all in
    one call at the end with ``vectors_at_end``: a store that indexes vectors builds its
    index once, in bulk). Returns the chunks written."""
    rng = np.random.default_rng(seed)
    total, batch, pending = 0, [], []

    def put(hashes: list[str]) -> None:
        vectors = rng.standard_normal((len(hashes), dimension)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        store.put_embeddings(identity, hashes, vectors)

    for file in source_files():
        data = file.read_bytes()
        chunked = chunk_file(file.name, data, config)
        if not chunked.chunks:
            continue
        rel = str(file).lstrip("/")
        take = chunked.chunks[:target_chunks - total]
        batch.append(FileRecord(rel, len(data), 0, text_hash(data.decode("utf-8", "replace")),
                                chunked.language, [IndexedChunk(c, c.text) for c in take]))
        total += len(take)
        if len(batch) >= BATCH_FILES or total >= target_chunks:
            store.write_files(batch)
            hashes = sorted({text_hash(c.index_text) for r in batch for c in r.chunks})
            if vectors_at_end:
                pending.extend(hashes)
            else:
                put(hashes)
            batch = []
        if total >= target_chunks:
            break
    if pending:
        put(sorted(set(pending)))
    return total


def measure(size: int, queries: int, workdir: Path) -> dict[str, float]:
    config = ContextConfig()
    embedder = get_embedder(config.embedding)
    db = workdir / f"bench_{size}.duckdb"
    started = time.perf_counter()
    chunks = build_store(db, size, config, embedder.identity, embedder.dimension)
    build_s = time.perf_counter() - started
    store = DuckDBStore(db)
    figures = query_latencies(store, config, workdir, queries)
    store.close()
    return {"chunks": chunks, "build_s": build_s, **figures}


def query_latencies(store: IndexStore, config: ContextConfig, root: Path, queries: int
                    ) -> dict[str, float]:
    """Warm-up seconds (model, catalog, BM25) and p50/p95 ms of ``queries`` hybrid queries
    (k=12, MMR) of a ContextModule on ``store``."""
    module = ContextModule(Project(root=root, config=config), store)
    started = time.perf_counter()
    module.pipeline.warm_up(wait=True)
    module.query(QueryRequest(QUERIES[0], k=12))
    warm_s = time.perf_counter() - started
    latencies = []
    for i in range(queries):
        begin = time.perf_counter()
        module.query(QueryRequest(QUERIES[i % len(QUERIES)], k=12))
        latencies.append((time.perf_counter() - begin) * 1000)
    module.shutdown()
    return {"warm_up_s": warm_s, **percentiles(latencies)}


def percentiles(latencies: list[float]) -> dict[str, float]:
    """p50 and p95 of a list of milliseconds."""
    ordered = sorted(latencies)
    return {"p50_ms": statistics.median(ordered),
            "p95_ms": ordered[max(0, int(round(0.95 * len(ordered))) - 1)]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=60)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            result = measure(size, args.queries, Path(tmp))
            print(f"{result['chunks']:>7} chunks: p50 {result['p50_ms']:.1f} ms, "
                  f"p95 {result['p95_ms']:.1f} ms (hybrid, k=12, MMR; {args.queries} queries; "
                  f"store built in {result['build_s']:.0f} s, warm-up {result['warm_up_s']:.1f} s)",
                  flush=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
