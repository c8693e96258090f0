"""Lexical and symbol indexing, stage by stage, on real projects (issue 37): files/s and
lines/s of each stage of the index path, and of the whole bootstrap without vectors.

Each project's tracked files are copied to a scratch folder (the corpus itself is never
written to), then:

- every stage runs alone, serially in this process, over every file the boundary accepts, in
  the indexer's order: walk (the boundary's scan), read + BLAKE3, decode + scrub, chunk
  (tree-sitter parse, the chunkers' definition walk and the symbols they find), of which the
  tree-sitter parse alone, contextualize (the index texts), store write (DuckDB, in the
  writer's batches, one transaction each), BM25 build (the full-text index over the index
  texts). A stage's figure is files/s and lines/s of its own time, wall and CPU: on a shared
  machine the CPU time (``time.process_time``) is the steadier one;
- then the real bootstrap (``Indexer.ensure_indexed`` without embeddings, its worker pool
  included) into a fresh index, timed end to end, with its CPU time: this process's, and
  the pool workers' (sampled from /proc), and how many cores that kept busy on average.

The machine is shared: print ``uptime`` beside the figures and read wall times with it.

Figures of 2026-11-28, night (2 cores shared with three other engineers, load 7.5-10.8;
before = 92ed49b, after = a structural prefix rated by the reports instead of the index
path, and a non-ASCII file's running counts summed a column at a time; each bootstrap the
fastest of two runs). The stages alone took 16.7 -> 15.0 CPU s on typeorm (3,713 files, 352k
lines), 19.5 -> 17.7 on prometheus (1,534 files, 534k lines) and 15.9 -> 14.2 on ansible
(4,078 files, 362k lines). The contextualize stage lost the quality score: 2.53 -> 1.45,
3.57 -> 2.27 and 2.58 -> 2.22 CPU s. Chunk + symbols is the largest stage (5.0-8.2 CPU s, of
which the tree-sitter parse 1.6-3.2), then BM25 build (2.4-4.1), contextualize, store write
(1.9-2.3) and decode + scrub (1.1-1.9). At this load the pool's one worker (niced) got
little of the machine, so the walls say more about the load than about the code: compare
CPU s.

    project     before: wall s, files/s, lines/s (CPU s; cores busy)   after
    typeorm     35.8, 104,  9.8k (17.8; 0.50)                   27.1, 137, 13.0k (14.8; 0.55)
    prometheus  42.4,  36, 12.6k (22.0; 0.52)                   35.8,  43, 14.9k (19.9; 0.56)
    ansible     33.2, 123, 10.9k (18.8; 0.57)                   21.2, 193, 17.1k (16.1; 0.76)

The last quiet-machine figures (load 2.0-4.5, the pass before): typeorm 352 files/s (33.3k
lines/s), prometheus 100 (35.0k), ansible 387 (34.3k). A profile of both processes of the
bootstrap (py-spy, typeorm and prometheus) ranks what is left on the critical path, which is
the summed CPU of the two processes (both stay busy: the writer's process chunks whenever
the pool's next batch is not ready): chunking (the tree-sitter parse and the reference
query's captures, about half the parse's time again, then per-chunk Python in emit_unit),
the structural prefixes, the writer (record_columns' rows and hashes, DuckDB's scan of the
object columns, the commits), the scrubber's candidate lines and the BM25 build. The
issue's 1,000 files/s (100k lines/s) on 2 cores needs about 500 files and 50k lines per
CPU-s with both cores busy: about twice what the stages manage in lines (in files, about
twice on typeorm and ansible, six times on prometheus, whose files are long).

The next pass (before = fcd01ff, after = an oversize unit's line costs and preferred cut
read from per-file arrays and bisections, references ordered by start alone, an ASCII
chunk's text sliced instead of decoded; index output byte-identical, dump_index_output)
cut prometheus's chunk + symbols stage from 8.71 to 7.10 CPU s (load 0.2 / 3.8) and from
8.90 to 7.66 (load 2.5-4.9), its tree-sitter parse unchanged (2.8-3.4 / 2.3-2.7); on
typeorm, whose units are rarely over the cap, the change is within the noise.

The pass after that (before = 9c13ec9, after = code_tokens finding identifier runs by one
bytes.translate and split, their tokens kept in a plain dict, and every file indexed with the
garbage collector paused; index output byte-identical): the BM25 build's CPU s fell from
2.86 / 2.56 to 1.93 / 1.96 on typeorm, 4.30 / 5.00 to 3.18 / 3.40 on prometheus and 2.52 /
2.89 to 1.81 / 2.15 on ansible (two runs each, load 2.7-7.7). The serial stages never
pause the collector, so that change can show only in the bootstrap, whose CPU s stayed
within the noise: typeorm 15.4 / 16.6 -> 14.8 / 14.9, prometheus 18.2 / 20.7 -> 18.4 / 19.9,
ansible 18.6 / 17.6 -> 17.1 / 16.8. At load 1.9-3.0 the bootstrap reached 429 files/s
(40.7k lines/s) on typeorm, 140 (48.6k) on prometheus and 412 (36.5k) on ansible, with
both cores busy (1.70-1.81); at load 4 and more the niced pool worker got less than half
a core and the walls were twice as long.

    .venv/bin/python benchmarks/bench_index_stages.py /path/to/ansible /path/to/prometheus \\
        /path/to/typeorm [--runs 1]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

import blake3

from contextd.boundary.walk import Boundary
from contextd.chunkers.chunking import chunk_file, language_for
from contextd.chunkers.grammars import get_parser
from contextd.config.project import Project
from contextd.contextualizers.stage import index_texts
from contextd.indexer import Indexer
from contextd.indexer.pipeline import WRITE_BATCH_FILES
from contextd.indexer.worker import count_lines, scrubber_for
from contextd.providers.fulltext import BM25Index, code_tokens
from contextd.store.base import FileRecord, IndexedChunk
from contextd.store.duckdb import DuckDBStore


class Stages:
    """Wall and CPU seconds per stage, in the order first timed."""

    def __init__(self) -> None:
        self.wall: dict[str, float] = {}
        self.cpu: dict[str, float] = {}

    def timed(self, name: str, work: Callable[[], object]) -> object:
        wall, cpu = time.perf_counter(), time.process_time()
        result = work()
        self.wall[name] = self.wall.get(name, 0.0) + time.perf_counter() - wall
        self.cpu[name] = self.cpu.get(name, 0.0) + time.process_time() - cpu
        return result


class DescendantsCpu(threading.Thread):
    """CPU seconds of this process's descendants, sampled from /proc while a bootstrap runs:
    the pool's workers are children of the forkserver, which outlives the run, so their time
    never reaches this process's RUSAGE_CHILDREN (the figures printed before counted this
    process alone). A worker's last 0.1 s may be missed; Linux only (elsewhere: 0).

    Every 0.1 s only the descendants already found are read; the whole of /proc is walked
    once a second to find new ones. Walking it every 0.1 s cost 0.08 CPU s per second (107
    processes), which counted as the bootstrap's own CPU and took 4% of a 2-core machine
    from it; the sampler's own CPU (``own_cpu``) is left out of the figures all the same."""

    INTERVAL_S = 0.1
    DISCOVER_EVERY = 10  # samples between walks of the whole process table

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.seen: dict[int, float] = {}
        self.busy: set[int] = set()  # descendants that worked (more than 0.5 CPU s)
        self.own_cpu = 0.0  # CPU seconds of this sampling thread
        self._known: set[int] = set()
        self._before = self._discover()
        self._done = threading.Event()

    @staticmethod
    def _stat(pid: int) -> tuple[int, float] | None:
        """(parent pid, CPU seconds) of a process, or None once it is gone."""
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            return None
        return int(fields[1]), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def _discover(self) -> dict[int, float]:
        """CPU seconds of every descendant, found by walking /proc."""
        stats: dict[int, tuple[int, float]] = {}
        for entry in Path("/proc").glob("[0-9]*"):
            found = self._stat(int(entry.name))
            if found is not None:
                stats[int(entry.name)] = found
        mine, grew = {os.getpid()}, True
        while grew:
            found_pids = {pid for pid, (parent, _) in stats.items() if parent in mine}
            grew = not found_pids <= mine
            mine |= found_pids
        mine.discard(os.getpid())
        self._known = mine
        return {pid: stats[pid][1] for pid in mine}

    def _sample(self) -> dict[int, float]:
        """CPU seconds of the descendants found so far (still alive)."""
        out = {}
        for pid in self._known:
            found = self._stat(pid)
            if found is not None:
                out[pid] = found[1]
        return out

    def run(self) -> None:
        started = time.thread_time()
        samples = 0
        while not self._done.wait(self.INTERVAL_S):
            samples += 1
            self.seen.update(self._discover() if samples % self.DISCOVER_EVERY == 0
                             else self._sample())
        self.seen.update(self._discover())
        self.own_cpu = time.thread_time() - started

    def stop(self) -> float:
        """Stop sampling; the CPU seconds the descendants spent since the start."""
        self._done.set()
        self.join()
        spent = {pid: cpu - self._before.get(pid, 0.0) for pid, cpu in self.seen.items()}
        self.busy = {pid for pid, cpu in spent.items() if cpu > 0.5}
        return sum(spent.values())


def copy_project(source: Path, scratch: Path) -> Path:
    """A copy of the files git tracks in ``source`` (a checkout) under ``scratch``: copied
    from its working tree, not cloned, since a corpus checkout may lack a blob or two."""
    target = scratch / source.name
    listed = subprocess.run(["git", "-C", str(source), "ls-files", "-z"], check=True,
                            capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        origin = source / name
        if origin.is_file() and not origin.is_symlink():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(origin, target / name)
    return target


def stage_by_stage(root: Path) -> tuple[Stages, int, int]:
    """Every stage alone over every accepted file (see the module docstring); returns the
    stages, the files and the lines."""
    project = Project.open(root)
    config = project.config
    stages = Stages()
    entries = stages.timed("walk", lambda: Boundary(project).scan().accepted)

    def read_all() -> list[tuple[object, bytes, str]]:
        out = []
        for entry in entries:
            with open(entry.abs_path, "rb") as fh:
                data = fh.read()
            out.append((entry, data, blake3.blake3(data).hexdigest()))
        return out

    files = stages.timed("read + hash", read_all)
    scrubber = scrubber_for(config)

    def decode_scrub() -> list[tuple[object, str, str]]:
        out = []
        for entry, data, digest in files:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                continue
            out.append((entry, scrubber.scrub(text, entry.path).text, digest))
        return out

    texts = stages.timed("decode + scrub", decode_scrub)
    lines = sum(count_lines(data) for _, data, _ in files)

    def parse_only() -> None:
        for entry, text, _ in texts:
            language = language_for(entry.path)
            try:
                parser = get_parser(language) if language else None
            except Exception:  # no grammar: a line-based chunker, nothing to parse
                parser = None
            if parser is not None:
                parser.parse(text.encode("utf-8"))

    stages.timed("  of which tree-sitter parse", parse_only)
    chunked = stages.timed("chunk + symbols", lambda: [
        (entry, text, digest, chunk_file(entry.path, text.encode("utf-8"), config))
        for entry, text, digest in texts])
    records = stages.timed("contextualize", lambda: [
        FileRecord(path=entry.path, size_bytes=entry.size, mtime_ns=entry.mtime_ns,
                   content_hash=digest, language=result.language,
                   chunks=[IndexedChunk(c, t.text, t.contextualized, t.prefix_quality,
                                        t.prefix_tokens)
                           for c, t in zip(result.chunks, index_texts(
                               text, entry.path, result.chunks, config))])
        for entry, text, digest, result in chunked])
    db = Path(tempfile.mkdtemp(prefix="stages-")) / "index.duckdb"
    store = DuckDBStore(db)

    def write_all() -> None:
        for at in range(0, len(records), WRITE_BATCH_FILES):
            with store.batch():
                store.write_files(records[at:at + WRITE_BATCH_FILES])

    try:
        stages.timed("store write", write_all)
    finally:
        store.close()
        shutil.rmtree(db.parent, ignore_errors=True)
    stages.timed("BM25 build", lambda: BM25Index.build(
        (f"{r.path}#{n}", code_tokens(c.index_text))
        for r in records for n, c in enumerate(r.chunks)))
    return stages, len(entries), lines


def bootstrap(root: Path) -> tuple[float, float, int, int, int, float, float, int]:
    """The real bootstrap without vectors into a fresh index: (wall s, CPU s of this process
    and its pool, files, lines, chunks, CPU s of this process, of the pool, busy workers)."""
    project = Project.open(root)
    shutil.rmtree(project.db_path.parent, ignore_errors=True)
    store = DuckDBStore(project.db_path)
    indexer = Indexer(project, store, embed=False)
    pool = DescendantsCpu()
    pool.start()
    wall, cpu = time.perf_counter(), time.process_time()
    report = indexer.ensure_indexed()
    wall = time.perf_counter() - wall
    cpu = time.process_time() - cpu
    pool_cpu = pool.stop()
    cpu -= pool.own_cpu  # the sampler's, not the bootstrap's
    store.close()
    return (wall, cpu + pool_cpu, report.files_indexed, report.lines_indexed,
            report.chunks_written, cpu, pool_cpu, len(pool.busy))


def rate(count: int, seconds: float) -> str:
    return f"{count / seconds:>10,.0f}" if seconds > 0 else f"{'-':>10}"


def print_table(name: str, stages: Stages, files: int, lines: int) -> None:
    print(f"\n{name}: {files:,} files, {lines:,} lines (stages alone, serial, one process)")
    print(f"{'stage':<30}{'wall s':>8}{'CPU s':>8}{'files/s':>10}{'lines/s':>10}"
          f"{'files/CPU-s':>12}{'lines/CPU-s':>12}")
    for stage, wall in stages.wall.items():
        cpu = stages.cpu[stage]
        print(f"{stage:<30}{wall:>8.2f}{cpu:>8.2f}{rate(files, wall)}{rate(lines, wall)}"
              f"{rate(files, cpu):>12}{rate(lines, cpu):>12}")
    total_wall = sum(w for s, w in stages.wall.items() if not s.startswith(" "))
    total_cpu = sum(c for s, c in stages.cpu.items() if not s.startswith(" "))
    print(f"{'all stages':<30}{total_wall:>8.2f}{total_cpu:>8.2f}{rate(files, total_wall)}"
          f"{rate(lines, total_wall)}{rate(files, total_cpu):>12}{rate(lines, total_cpu):>12}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("projects", nargs="+", type=Path, help="git checkouts to index")
    parser.add_argument("--runs", type=int, default=1,
                        help="bootstraps per project (the fastest is printed)")
    args = parser.parse_args()
    print(f"cores: {os.cpu_count()}; load: {os.getloadavg()[0]:.1f} "
          "(a shared machine: read wall times with the load)")
    with tempfile.TemporaryDirectory(prefix="bench-stages-") as scratch:
        for source in args.projects:
            root = copy_project(source.resolve(), Path(scratch))
            stages, files, lines = stage_by_stage(root)
            print_table(source.name, stages, files, lines)
            runs = [bootstrap(root) for _ in range(args.runs)]
            wall, cpu, indexed, indexed_lines, chunks, own, pool, busy = min(runs)
            print(f"{'bootstrap (pool, no vectors)':<30}{wall:>8.2f}{cpu:>8.2f}"
                  f"{rate(indexed, wall)}{rate(indexed_lines, wall)}{rate(indexed, cpu):>12}"
                  f"{rate(indexed_lines, cpu):>12}   {chunks:,} chunks; load "
                  f"{os.getloadavg()[0]:.1f}")
            print(f"{'':<30}CPU s: this process {own:.2f}, {busy} pool worker(s) {pool:.2f}; "
                  f"cores busy on average {cpu / wall:.2f}")
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
