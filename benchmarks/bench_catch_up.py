"""What the first answer after a large write pays to take it in (issue 26's remaining gap).

While the background owner reads the rest of a large project, each answer first brings the
providers' in-memory indexes up to the store (the catalog, BM25, symbols, ...). The cost
grows with the chunks written since the last answer, so an answer that comes after a long
stretch of writing can pass 3 s. This script reproduces that in one process: it reads the
project for ``--within`` seconds (as a first CLI answer does), answers once, reads the rest,
then times the catalog's sync, each provider's catch-up and the answer that follows.

    .venv/bin/python benchmarks/bench_catch_up.py /work/corpora/r/wagtail [--within 1.5]

It removes ``<root>/.contextd`` first (stop any owner of the project before). On 2026-11-26,
wagtail (2,920 files; 57,892 chunks read after the first 273 files), mostly quiet: catalog sync
1.5 s, full_text catch-up 3.1 s, the answer 3.7 s in all.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

from contextd import ContextModule
from contextd.config.project import Project
from contextd.indexer import Indexer
from contextd.query.records import QueryRequest
from contextd.store import open_store

LEXICAL = ("full_text", "symbol", "git_history", "dependency")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--within", type=float, default=1.5,
                        help="seconds of reading before the first answer")
    parser.add_argument("--query", default="how is a page copied with its child pages")
    args = parser.parse_args()
    project = Project.open(args.root)
    shutil.rmtree(args.root / ".contextd", ignore_errors=True)
    store = open_store(project)
    indexer = Indexer(project, store, embed=False)
    module = ContextModule(project, store)
    request = QueryRequest(args.query, wait_for_model=False, providers=LEXICAL)
    try:
        print("first read:", indexer.ensure_indexed(within_s=args.within).summary)
        begin = time.perf_counter()
        module.query(request)
        print(f"first answer: {(time.perf_counter() - begin) * 1000:,.0f} ms")
        print("the rest:", indexer.ensure_indexed().summary)
        begin = time.perf_counter()
        module.pipeline.catalog.sync(store.generation())
        print(f"catalog sync: {(time.perf_counter() - begin) * 1000:,.0f} ms")
        begin = time.perf_counter()
        response = module.query(request)
        print(f"answer after the delta: {(time.perf_counter() - begin) * 1000:,.0f} ms; "
              f"timings {response.timings_ms}")
    finally:
        module.shutdown()
        store.close()


if __name__ == "__main__":
    main()
