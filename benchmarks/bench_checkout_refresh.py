"""A branch switch re-reads only what changed (issue 37): the lexical catch-up after a
``git checkout`` to a commit ``--back`` commits away, and back again, on a real project.

The project is cloned to a scratch folder, indexed from scratch without vectors (the lexical
and symbol index), then checked out ``--back`` commits earlier and caught up with
``Indexer.ensure_indexed`` (the run a command or the owner makes after a checkout), then
checked out to where it was and caught up again. Printed for each catch-up: its time, the
files git changed (indexable ones), the files it re-chunked and those it found unchanged;
and the process's peak RSS (VmHWM) after each step. A catch-up that re-chunks more files
than git changed reads more than it must.

    .venv/bin/python benchmarks/bench_checkout_refresh.py /work/corpora/r/prometheus \\
        [--back 50]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path

from contextd.config.project import Project
from contextd.indexer import Indexer
from contextd.store.duckdb import DuckDBStore


def peak_rss_mb() -> float:
    """VmHWM of this process (MB): its peak resident memory so far."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                          text=True).stdout


def changed_indexed(root: Path, indexer: Indexer, old: str, new: str) -> int:
    """Files git changed between ``old`` and ``new`` (checked out, not caught up yet) that
    are to be indexed now or were indexed before (a deleted file)."""
    names = [n for n in git(root, "diff", "--name-only", old, new).split("\n") if n]
    return sum(1 for name in names if indexer.boundary.check(name).indexable
               or indexer.store.file_states(name))


def catch_up(indexer: Indexer, label: str, changed: int) -> None:
    start = time.perf_counter()
    report = indexer.ensure_indexed()
    seconds = time.perf_counter() - start
    print(f"{label:<28}{seconds:>8.2f} s  git changed {changed:>5,} indexable files; "
          f"re-chunked {report.files_indexed:>5,}, removed {report.files_removed:>4,}, "
          f"unchanged {report.files_unchanged:>6,}; {report.chunks_written:,} chunks "
          f"written; peak RSS {peak_rss_mb():.0f} MB; load {os.getloadavg()[0]:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("project", type=Path, help="a git checkout with enough history")
    parser.add_argument("--back", type=int, default=50, help="commits to check out back")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-checkout-") as scratch:
        root = Path(scratch) / args.project.name
        subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(args.project.resolve()),
                        str(root)], check=True)
        head = git(root, "rev-parse", "HEAD").strip()
        older = git(root, "rev-parse", f"HEAD~{args.back}").strip()
        project = Project.open(root)
        store = DuckDBStore(project.db_path)
        indexer = Indexer(project, store, embed=False)
        start = time.perf_counter()
        report = indexer.ensure_indexed()
        print(f"{'bootstrap (no vectors)':<28}{time.perf_counter() - start:>8.2f} s  "
              f"{report.files_indexed:,} files, {report.chunks_written:,} chunks; peak RSS "
              f"{peak_rss_mb():.0f} MB; load {os.getloadavg()[0]:.1f}")
        for label, target, before in ((f"checkout HEAD~{args.back}", older, head),
                                      ("checkout back to HEAD", head, older)):
            git(root, "checkout", "-q", target)
            catch_up(indexer, label + ", catch-up", changed_indexed(root, indexer, before,
                                                                   target))
        store.close()


if __name__ == "__main__":
    main()
