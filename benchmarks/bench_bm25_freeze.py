"""The BM25 index's fold of its delta into frozen arrays (``BM25Index.freeze``): its peak
memory and CPU (issue 37). The owner folds the postings of a whole first index at once (the
catch-up's save), and that transient put its peak over ``[owner] memory_limit_mb`` on fastapi
(607-630 MB): this prints the peak RSS (VmHWM) during a freeze of ``--docs`` documents of
``--tokens`` tokens over a ``--vocabulary``-word vocabulary, above the RSS before it.

    .venv/bin/python benchmarks/bench_bm25_freeze.py [--docs 60000] [--tokens 60]

On 2026-11-28 (60,000 x 60, load 8, shared 2-core machine): 64-bit term and slot arrays
+195 MB, 2.44 CPU s; 32-bit ones, freed as they are folded, +124 MB, 2.07 CPU s.
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

from contextd.providers.fulltext import BM25Index


def status_mb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) // 1024
    return -1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=60_000)
    parser.add_argument("--tokens", type=int, default=60)
    parser.add_argument("--vocabulary", type=int, default=40_000)
    args = parser.parse_args()
    chooser = random.Random(1)
    vocabulary = [f"w{i}" for i in range(args.vocabulary)]
    index = BM25Index()
    for n in range(args.docs):
        index.add(f"c{n}", [chooser.choice(vocabulary) for _ in range(args.tokens)])
    before = status_mb("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM from here on
    started = time.process_time()
    index.freeze()
    print(f"{args.docs:,} documents x {args.tokens} tokens: RSS {before} MB before the freeze, "
          f"peak {status_mb('VmHWM')} MB during it (+{status_mb('VmHWM') - before} MB), "
          f"{status_mb('VmRSS')} MB after; {time.process_time() - started:.2f} CPU s")


if __name__ == "__main__":
    main()
