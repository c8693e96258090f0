"""Walk + filter throughput of the project boundary on a large real tree (no hashing).

Builds (once, cached under benchmarks/.cache/, which git ignores) a tree holding a copy of the
Python standard library and of this venv's site-packages, hard-linked where the file system
allows (the walk reads the same bytes either way, and it costs no disk), then walks and filters
it with the real :class:`contextd.boundary.walk.Boundary` several times and prints files/s (median of
three, warm page cache) and counts per rejection reason.

"files judged" are the files the filter pipeline decided on (accepted + rejected); the contents
of pruned directories (``__pycache__``, ``.git`` ...) are never visited and are not counted.

    .venv/bin/python benchmarks/bench_boundary.py [--runs 3] [--mode all|extension|content]
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import os
import shutil
import statistics
import sys
import sysconfig
import time
from pathlib import Path

from contextd.boundary.walk import Boundary
from contextd.config.sections import ContextConfig
from contextd.config.project import Project

CACHE = Path(__file__).resolve().parent / ".cache" / "boundary-tree"
MIN_FILES = 20_000


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def build_tree() -> Path:
    """The cached tree: stdlib + site-packages; built once, marked complete when done."""
    marker = CACHE / ".complete"
    if marker.exists():
        return CACHE
    shutil.rmtree(CACHE, ignore_errors=True)
    sources = {"stdlib": sysconfig.get_paths()["stdlib"],
               "site-packages": sysconfig.get_paths()["purelib"]}
    for name, src in sources.items():
        print(f"copying {src} -> {CACHE / name}", file=sys.stderr)
        shutil.copytree(src, CACHE / name, symlinks=True, copy_function=_link_or_copy,
                        ignore_dangling_symlinks=True)
    marker.write_text("ok\n")
    return CACHE


def count_files(root: Path) -> int:
    return sum(len(files) for _, _, files in os.walk(root))


def run_once(project: Project) -> tuple[float, float, int, int, collections.Counter]:
    """One walk + filter; returns wall and CPU seconds, files judged, files accepted and
    rejections per reason. CPU time is reported too because the machine is shared: wall
    time swings with other people's load, CPU time much less."""
    start, cpu_start = time.perf_counter(), time.process_time()
    result = Boundary(project).scan(collect_rejections=True)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    reasons = collections.Counter(r.reason.value for r in result.rejected if not r.is_dir)
    judged = len(result.accepted) + sum(reasons.values())
    return elapsed, cpu, judged, len(result.accepted), reasons


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--mode", default="all", choices=("all", "extension", "content"),
                        help="indexing.binary_detection")
    args = parser.parse_args()
    tree = build_tree()
    total = count_files(tree)
    if total < MIN_FILES:
        sys.exit(f"tree has {total} files, fewer than {MIN_FILES}")
    defaults = ContextConfig()
    config = dataclasses.replace(defaults, indexing=dataclasses.replace(
        defaults.indexing, binary_detection=args.mode))
    project = Project(root=tree, config=config)
    run_once(project)  # warm the page cache
    runs = [run_once(project) for _ in range(args.runs)]
    elapsed = statistics.median(r[0] for r in runs)
    cpu = statistics.median(r[1] for r in runs)
    _, _, judged, accepted, reasons = runs[0]
    print(f"tree: {tree} ({total} files on disk)")
    print(f"binary_detection={args.mode}: {judged} files judged, {accepted} indexable, "
          f"median {elapsed:.3f} s wall, {cpu:.3f} s CPU of {args.runs} runs "
          f"(load average {os.getloadavg()[0]:.1f})")
    print(f"files judged/s: {judged / elapsed:,.0f} (per CPU second: {judged / cpu:,.0f})")
    print(f"tree files/s (incl. pruned dirs): {total / elapsed:,.0f}")
    for reason, n in reasons.most_common():
        print(f"  {reason:24} {n}")


if __name__ == "__main__":
    main()
