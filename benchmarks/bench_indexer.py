"""Indexer figures on a real corpus no one here wrote (a copy of part of the Python standard
library under benchmarks/.cache/, git-ignored).

Prints: chunking with threads vs processes (the worker-pool decision); cold bootstrap time and
lines/s without embeddings (whole corpus) and with embeddings (a subset, ``--embed-lines``),
beside the embedder's own throughput on the same texts in the same run (the ratio is the
figure that matters); save-to-queryable latency p50/p95 over 20 edits with the Watcher
running; database size per 10k chunks.

    .venv/bin/python benchmarks/bench_indexer.py [--embed-lines 20000] [--edits 20]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

from contextd.chunkers.chunking import chunk_file
from contextd.config.sections import ContextConfig
from contextd.indexer import Indexer
from contextd.config.project import Project
from contextd.store.duckdb import DuckDBStore
from contextd.runtime.watcher import Watcher

CACHE = Path(__file__).resolve().parent / ".cache"
STDLIB_PARTS = ("asyncio", "email", "json", "http", "logging", "concurrent", "importlib",
                "unittest", "xml", "multiprocessing", "urllib", "collections", "sqlite3",
                "argparse.py", "typing.py", "inspect.py", "dataclasses.py", "pathlib.py",
                "subprocess.py", "tarfile.py", "zipfile", "shutil.py", "pydoc.py",
                "tkinter", "idlelib", "lib2to3", "ctypes", "difflib.py", "pickle.py",
                "doctest.py", "mailbox.py", "turtle.py", "statistics.py", "decimal.py",
                "_pydecimal.py", "ssl.py", "socket.py", "threading.py", "ast.py")


def python_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def make_corpus(name: str, max_lines: int | None) -> tuple[Path, int]:
    """Copy stdlib parts (up to ``max_lines``) into a fresh git repository."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    target = CACHE / name
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(target)], check=True)
    lines = 0
    for part in STDLIB_PARTS:
        source = stdlib / part
        files = [source] if source.is_file() else python_files(source) if source.exists() else []
        for path in files:
            if "test" in path.relative_to(stdlib).parts[:-1]:
                continue
            count = path.read_bytes().count(b"\n")
            if max_lines and lines + count > max_lines:
                return target, lines
            dest = target / path.relative_to(stdlib)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, dest)
            lines += count
    return target, lines


def _chunk_one(args: tuple[str, bytes]) -> int:
    return len(chunk_file(args[0], args[1], ContextConfig()).chunks)


def bench_pool_kinds(root: Path) -> None:
    """Chunking alone: serial, 2 threads, 2 processes (does the GIL let threads help?)."""
    items = [(str(p.relative_to(root)), p.read_bytes()) for p in python_files(root)]
    lines = sum(d.count(b"\n") for _, d in items)
    _chunk_one(items[0])  # grammar load
    start = time.perf_counter()
    sum(map(_chunk_one, items))
    serial = time.perf_counter() - start
    with ThreadPoolExecutor(2) as pool:
        start = time.perf_counter()
        sum(pool.map(_chunk_one, items, chunksize=16))
        threads = time.perf_counter() - start
    with ProcessPoolExecutor(2) as pool:
        list(pool.map(_chunk_one, items[:4]))
        start = time.perf_counter()
        sum(pool.map(_chunk_one, items, chunksize=16))
        procs = time.perf_counter() - start
    print(f"chunking {lines:,} lines: serial {lines / serial:,.0f} lines/s, "
          f"2 threads {lines / threads:,.0f}, 2 processes {lines / procs:,.0f}")


def cold_index(root: Path, embed: bool) -> tuple[Indexer, float]:
    project = Project.open(root)
    shutil.rmtree(project.db_path.parent, ignore_errors=True)
    indexer = Indexer(project, DuckDBStore(project.db_path), embed=embed)
    if embed:
        indexer.embedder.embed(["warm up"])  # model load is not indexing throughput
    start = time.perf_counter()
    indexer.ensure_indexed()
    return indexer, time.perf_counter() - start


def size_per_10k(indexer: Indexer) -> float:
    indexer.store.vacuum()
    stats = indexer.store.stats()
    return os.path.getsize(indexer.store.path) / 2**20 / stats["total_chunks"] * 10_000


def embedder_throughput(indexer: Indexer) -> float:
    """Chunks/s of the embedder alone on the index texts just stored."""
    texts = [row.index_text for row in indexer.store.chunks_for_files()]
    texts = list(dict.fromkeys(texts))
    batch = indexer.config.embedding.batch_size
    start = time.perf_counter()
    for i in range(0, len(texts), batch * 16):
        indexer.embedder.embed(texts[i:i + batch * 16])
    return len(texts) / (time.perf_counter() - start)


def save_to_queryable(indexer: Indexer, edits: int) -> list[float]:
    """Edit a function, time until its new text is stored and has its vector."""
    root = indexer.project.root
    targets = [p for p in python_files(root) if 2_000 < p.stat().st_size < 40_000][:edits]
    watcher = Watcher(indexer.project, indexer).start()
    identity = indexer.embedder.identity
    times = []
    try:
        for n, path in enumerate(targets):
            rel = path.relative_to(root).as_posix()
            marker = f"edited_marker_{n}_{time.time_ns()}"
            text = path.read_text()
            index = text.find("\ndef ")
            if index < 0:
                index = text.find("\n    def ")
            text = text[:index] + f"\ndef {marker}(x):\n    return x\n" + text[index:]
            start = time.perf_counter()
            path.write_text(text)
            while True:
                rows = [r for r in indexer.store.chunks_for_files(
                    [indexer.store.file_states(rel)[rel].file_id]) if marker in r.text]
                if rows and indexer.store.vectors_for(identity, [rows[0].embed_hash]):
                    break
                time.sleep(0.005)
            times.append(time.perf_counter() - start)
            time.sleep(0.2)
    finally:
        watcher.stop()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--embed-lines", type=int, default=20_000,
                        help="Lines of the subset indexed with embeddings.")
    parser.add_argument("--edits", type=int, default=20)
    args = parser.parse_args()
    corpus, lines = make_corpus("stdlib", None)
    print(f"corpus: {lines:,} lines of CPython {sys.version.split()[0]} stdlib, "
          f"{len(python_files(corpus))} files ({corpus})")
    bench_pool_kinds(corpus)
    runs = []
    for _ in range(3):
        indexer, seconds = cold_index(corpus, embed=False)
        runs.append(seconds)
        report_chunks = indexer.store.stats()["total_chunks"]
        indexer.store.close()
    seconds = statistics.median(runs)
    print(f"bootstrap without embeddings: {seconds:.2f} s (median of 3), "
          f"{lines / seconds:,.0f} lines/s, {report_chunks:,} chunks")
    subset, sub_lines = make_corpus("stdlib-subset", args.embed_lines)
    indexer, seconds = cold_index(subset, embed=True)
    chunks = len({r.embed_hash for r in indexer.store.chunks_for_files()})
    own = embedder_throughput(indexer)
    print(f"bootstrap with embeddings: {sub_lines:,} lines, {chunks:,} texts in "
          f"{seconds:.1f} s = {sub_lines / seconds:,.0f} lines/s, {chunks / seconds:.1f} "
          f"texts/s; embedder alone {own:.1f} texts/s; ratio {chunks / seconds / own:.0%}")
    print(f"database size: {size_per_10k(indexer):.1f} MB per 10k chunks (with vectors)")
    times = sorted(save_to_queryable(indexer, args.edits))
    p95 = times[min(len(times) - 1, int(round(0.95 * len(times))) - 1)]
    print(f"save-to-queryable over {len(times)} edits (debounce "
          f"{indexer.config.watcher.debounce_ms} ms): p50 {statistics.median(times) * 1000:.0f}"
          f" ms, p95 {p95 * 1000:.0f} ms, max {times[-1] * 1000:.0f} ms")
    indexer.store.close()


if __name__ == "__main__":
    main()
