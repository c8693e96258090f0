"""The first minutes on a fresh repository (issue 13), as a person meets them, from the CLI.

A copy of the Python standard library (``--lines`` of it, at least 100k by default; the
test suites left out), no index, an empty model cache (``CONTEXTD_CACHE_DIR`` points at a
fresh directory: the first use exports the model, as on a new machine), a private socket
directory. Prints:

* **time to first answer**: wall time of the first ``contextd query`` (indexing included),
  which answers from the lexical and symbol indexes and hands the vectors to the background
  owner (target <= 5 s);
* **time to semantic-complete**: from the start of that command until ``contextd stats``
  reports no chunk waiting for its vector, and the rate of the background embedding against
  the embedder's own throughput on the same texts in one process (target >= 90%);
* **cold CLI query latency**: wall time of a whole ``contextd query`` process, with the
  background owner serving it warm (target <= 300 ms) and without it (this process opens
  the index and loads the model).

Every figure is one run on whatever else the machine is doing: say so when quoting them.

    .venv/bin/python benchmarks/bench_first_run.py [--lines 100000] [--queries 5]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

QUESTION = "parse command line arguments"
LATENCY_QUERIES = ["read a file line by line", "json decode error", "walk a directory tree",
                   "subprocess with timeout", "compress data with zlib", "base64 encode bytes"]
SKIPPED_PARTS = {"test", "tests", "idle_test", "site-packages", "__pycache__"}


def copy_stdlib(target: Path, min_lines: int) -> tuple[int, int]:
    """Copy standard-library .py files (sorted, tests left out) until ``min_lines``; returns
    (files, lines)."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = lines = 0
    for source in sorted(stdlib.rglob("*.py")):
        relative = source.relative_to(stdlib)
        if SKIPPED_PARTS.intersection(relative.parts) or not source.is_file():
            continue
        text = source.read_bytes()
        destination = target / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        destination.write_bytes(text)
        files += 1
        lines += text.count(b"\n")
        if lines >= min_lines:
            break
    return files, lines


class Cli:
    """``python -m contextd`` in the copied tree, with the benchmark's environment."""

    def __init__(self, root: Path, env: dict[str, str]):
        self.root = root
        # The copied standard library is the working folder: without a safe path, ``-m``
        # would put it first on sys.path and the CLI (and the owner it starts) would import
        # the copy's concurrent/ or multiprocessing/ instead of the interpreter's.
        self.env = {**env, "PYTHONSAFEPATH": "1"}
        self.cpu = 0.0

    def run(self, *args: str, timeout: float = 3600) -> tuple[float, subprocess.CompletedProcess]:
        """Wall seconds and the finished process; ``self.cpu`` is the CPU seconds (user +
        system) the process itself used: on a shared machine the wall time mostly measures
        the other processes, the CPU time what a quiet machine would roughly wait."""
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "contextd", *args], cwd=self.root,
                              env=self.env, capture_output=True, text=True, timeout=timeout)
        elapsed = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        if proc.returncode != 0:
            raise SystemExit(f"contextd {' '.join(args)} failed ({proc.returncode}):\n"
                             f"{proc.stderr}")
        return elapsed, proc

    def stats(self) -> dict:
        return json.loads(self.run("--json", "stats")[1].stdout)


def owner_pid(root: Path) -> int | None:
    try:
        pid = int((root / ".contextd" / "owner.lock").read_text().strip())
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError):
        return None


def stop(pid: int | None) -> None:
    if pid is None:
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)


def median_wall_and_cpu(cli: Cli, queries: list[str]) -> tuple[float, float]:
    """Median wall and CPU seconds of whole ``contextd query`` processes."""
    walls, cpus = [], []
    for question in queries:
        walls.append(cli.run("query", question)[0])
        cpus.append(cli.cpu)
    return statistics.median(walls), statistics.median(cpus)


def embedder_throughput(root: Path, sample: int) -> tuple[float, int]:
    """Chunks per second of the configured embedder alone, in this process, on ``sample``
    index texts of the built index, in the windows the indexer uses."""
    from contextd.embedders.registry import get_embedder
    from contextd.indexer.embed_stage import WINDOW_BATCHES
    from contextd.config.project import Project
    from contextd.store.duckdb import DuckDBStore

    project = Project.open(str(root))
    config = project.config.embedding
    store = DuckDBStore(project.db_path, read_only=True)
    try:
        texts = [row[0] for row in store._cursor().execute(  # noqa: SLF001 - benchmark read
            "SELECT any_value(coalesce(index_text, text)) FROM chunks GROUP BY embed_hash "
            "ORDER BY min(file_id) LIMIT ?", [sample]).fetchall()]
    finally:
        store.close()
    embedder = get_embedder(config)
    embedder.embed(texts[:config.batch_size])  # load and warm the session
    window = config.batch_size * WINDOW_BATCHES
    started = time.perf_counter()
    for start in range(0, len(texts), window):
        embedder.embed(texts[start:start + window])
    return len(texts) / (time.perf_counter() - started), len(texts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=100_000, help="Lines of source to copy.")
    parser.add_argument("--queries", type=int, default=5, help="Queries per latency figure.")
    parser.add_argument("--sample", type=int, default=1500,
                        help="Texts embedded for the embedder's own throughput.")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="contextd-first-run-"))
    root = work / "stdlib"
    cache = work / "model-cache"
    env = {**os.environ, "CONTEXTD_CACHE_DIR": str(cache), "XDG_RUNTIME_DIR": str(work / "run"),
           "CONTEXTD_LOAD_PLUGINS": ""}
    (work / "run").mkdir()
    os.environ.update({"CONTEXTD_CACHE_DIR": str(cache)})  # for the in-process throughput
    files, lines = copy_stdlib(root, args.lines)
    cli = Cli(root, env)
    queries = (LATENCY_QUERIES * args.queries)[:args.queries]
    print(f"tree: {files:,} files, {lines:,} lines of the standard library; empty model cache "
          f"at {cache}")
    pid = None
    try:
        started = time.perf_counter()
        first_s, first = cli.run("query", QUESTION)
        pid = owner_pid(root)
        print(f"time to first answer: {first_s:.2f} s wall, {cli.cpu:.2f} s CPU (target <= 5 s); "
              f"background owner {'pid ' + str(pid) if pid else 'not started'}")
        for line in first.stderr.splitlines():
            if "semantic results" in line or "bootstrap:" in line:
                print(f"  {line}")
        stats = cli.stats()
        while stats["indexing"]["embeddings_pending"] != 0:
            time.sleep(2)
            stats = cli.stats()
        complete_s = time.perf_counter() - started
        chunks = stats["storage"]["total_chunks"]
        embedded = sum(stats["storage"]["embeddings_by_model"].values())
        rate = (stats["indexing"].get("embedding") or {}).get("rate_per_s") or 0.0
        print(f"time to semantic-complete: {complete_s:.1f} s ({chunks:,} chunks, "
              f"{embedded:,} with a vector; model export included)")
        wall, cpu = median_wall_and_cpu(cli, queries)
        print(f"cold CLI query, background owner serving: {wall * 1000:.0f} ms wall, "
              f"{cpu * 1000:.0f} ms CPU of the client (median of {len(queries)}; "
              "target <= 300 ms wall)")
        stop(pid)
        pid = None
        throughput, sampled = embedder_throughput(root, args.sample)
        print(f"background embedding rate: {rate:,.1f} chunks/s; the embedder alone: "
              f"{throughput:,.1f} chunks/s on {sampled:,} of the same texts -> "
              f"{100 * rate / throughput:.0f}% (target >= 90%)")
        wall, cpu = median_wall_and_cpu(cli, queries)
        print(f"cold CLI query, no owner running: {wall * 1000:.0f} ms wall, {cpu * 1000:.0f} ms "
              f"CPU (median of {len(queries)}; the process opens the index, loads the model)")
    finally:
        stop(pid or owner_pid(root))
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
