"""What the chunk catalog of an indexed project holds in memory, by the line that allocated it
(issue 37: the catalog was the owner's largest long-lived part on wagtail).

Loads a :class:`~contextd.providers.catalog.ChunkCatalog` from the project's index under
tracemalloc (texts in memory: no spool folder, so the texts' share is the first line) and
prints the memory it holds and its largest allocation sites. Needs an index no owner holds
(copy ``.contextd/context.duckdb`` of a stopped one into a folder of its own).

Issue 37, 2026-11-28, a copy of wagtail's index (61,928 chunks, 2,920 files): 165.1 MB,
of which 53.9 MB the texts and 111.2 MB the rest, 92 MB of that the definitions and
references; after they were held once per file, with a key's single entry held alone and
chunk ids shared: 110.1 MB, the rest 56.2 MB.

    .venv/bin/python benchmarks/bench_catalog_memory.py /tmp/wagtail-index-copy [--top 12]
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
import tracemalloc
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=Path, help="a project folder holding .contextd/")
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args(argv)

    from contextd.config.project import Project
    from contextd.providers.catalog import ChunkCatalog
    from contextd.store import open_store

    store = open_store(Project.open(args.root))
    try:
        tracemalloc.start(1)
        gc.collect()
        before = tracemalloc.take_snapshot()
        started = time.process_time()
        catalog = ChunkCatalog(store, None)
        catalog.sync()
        cpu = time.process_time() - started
        gc.collect()
        stats = tracemalloc.take_snapshot().compare_to(before, "lineno")
        tracemalloc.stop()
        total = sum(s.size_diff for s in stats)
        print(f"{len(catalog.rows):,} chunks, {len(catalog.paths):,} files, loaded in "
              f"{cpu:.1f} CPU s (under tracemalloc); held: {total / 2**20:.1f} MB")
        for stat in stats[:args.top]:
            print(f"  {stat.size_diff / 2**20:7.1f} MB  {stat.count_diff:>9,} blocks  "
                  f"{stat.traceback[0]}")
    finally:
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
