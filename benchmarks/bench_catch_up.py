"""What the answers given while a large project is read pay to take in what was written
(issue 26).

Each answer first brings the in-memory indexes up to the store (the catalog, BM25, symbols,
...), at ~80 µs a chunk written since the last answer. While files are being indexed an
answer takes in new files for a bounded time and a background thread follows the store
(contextd.query.catch_up). This script reproduces the background owner's case in one
process: it reads the project for ``--within`` seconds (as a first CLI answer does), answers
once, then reads the rest in a thread while it asks again every ``--every`` seconds, and
once more after the reading ends, printing each answer's time, the files it left waiting
and the providers' timings, then the slowest answer.

    .venv/bin/python benchmarks/bench_catch_up.py /work/corpora/r/wagtail [--within 1.5]

It removes ``<root>/.contextd`` first (stop any owner of the project before). Before the
bounded catch-up, the answer asked right after wagtail's 57k chunks were written took 3.7 s
(catalog 1.5 s, BM25 3.1 s).
"""

from __future__ import annotations

import argparse
import shutil
import threading
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
    parser.add_argument("--every", type=float, default=1.0,
                        help="seconds between the answers asked while the rest is read")
    parser.add_argument("--query", default="how is a page copied with its child pages")
    args = parser.parse_args()
    project = Project.open(args.root)
    shutil.rmtree(args.root / ".contextd", ignore_errors=True)
    store = open_store(project)
    indexer = Indexer(project, store, embed=False)
    module = ContextModule(project, store)
    module.pipeline.catch_up.writing = lambda: indexer.indexing  # as the engine wires it
    request = QueryRequest(args.query, wait_for_model=False, providers=LEXICAL)
    catalog = module.pipeline.catalog
    walls: list[float] = []

    def answer(label: str) -> None:
        begin = time.perf_counter()
        response = module.query(request)
        wall = (time.perf_counter() - begin) * 1000
        walls.append(wall)
        print(f"{label}: {wall:,.0f} ms; {len(catalog.waiting):,} files waiting; "
              f"timings {response.timings_ms}")

    try:
        print("first read:", indexer.ensure_indexed(within_s=args.within).summary)
        answer("first answer")
        reading = threading.Thread(target=lambda: print("the rest:",
                                                        indexer.ensure_indexed().summary))
        reading.start()
        while reading.is_alive():
            time.sleep(args.every)
            answer("answer while reading")
        reading.join()
        answer("answer after reading")
        print(f"slowest answer: {max(walls):,.0f} ms of {len(walls)}")
    finally:
        module.shutdown()
        store.close()


if __name__ == "__main__":
    main()
