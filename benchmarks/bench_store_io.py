"""The DuckDB store's bulk I/O: how fast rows go in and vectors come out, and what it costs
in memory.

Five paths, each timed in a fresh process of its own (so one phase's peak cannot hide
another's) on one index file built by the earlier phases:

* contents: ``write_files`` of N chunks (20 a file, 4000 chunks a transaction, as the
  indexer's write batches), with their symbols and links: chunks/s.
* file_stats: ``update_file_stats`` of every stored file (a new size and modification time,
  the same bytes, as a git checkout leaves the files it rewrote with their old contents):
  rows/s. One statement over the rows, 0.02 s for 409 of 3,000 files where DuckDB's
  executemany took 0.6-0.85 s (load 5-6).
* put_embeddings: one random unit vector per distinct chunk text, written in windows of
  ``--window`` rows (the embedding stage's window: batch size x 8): rows/s.
* chunk_vectors: the semantic index's load at owner start, every chunk's vector as one
  float32 matrix: seconds (best of ``--repeat``).
* segments: ``put_segments`` of ``--segments`` stashed segments, ``segments()`` and
  ``segment_vectors`` read back.

Each phase prints its process's peak RSS above what it held before the phase started (the
kernel's high-water mark is reset first, /proc/self/clear_refs), so the figure is what the
store's I/O itself needed: the input rows, DuckDB's buffers and the conversion copies.

    .venv/bin/python benchmarks/bench_store_io.py                  # 60,000 chunks x 384
    .venv/bin/python benchmarks/bench_store_io.py --chunks 10000 --json out.json
    .venv/bin/python benchmarks/bench_store_io.py --dir /dev/shm   # CPU only, no fsync
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

MODEL = "bench-model"
CHUNKS_PER_FILE = 20
WRITE_BATCH_CHUNKS = 4000


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


class Peak:
    """Peak RSS of this process above its RSS when entered, in MB."""

    def __enter__(self) -> "Peak":
        try:  # resets VmHWM to the current RSS (Linux >= 4.0)
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            self.reset = True
        except OSError:
            self.reset = False
        self.before = _status_kb("VmRSS")
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.start
        hwm = _status_kb("VmHWM") if self.reset else \
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        self.mb = max(0, hwm - self.before) / 1024


def _records(n: int):
    from contextd.records import Chunk, ChunkKind, SymbolDef
    from contextd.store.base import FileRecord, IndexedChunk
    files = []
    for f in range(0, n, CHUNKS_PER_FILE):
        chunks = []
        for i in range(f, min(n, f + CHUNKS_PER_FILE)):
            text = (f"def function_{i}(value):\n    # chunk {i} of the benchmark\n"
                    f"    return helper_{i % 97}(value) + {i}\n") * 6
            chunk = Chunk(text=text, kind=ChunkKind.CODE_FUNCTION, label=f"function_{i}",
                          language="python", start_line=1, end_line=18, start_byte=0,
                          end_byte=len(text), tokens=len(text) // 4,
                          defines=(SymbolDef(f"function_{i}", "function", 1),),
                          references=(f"helper_{i % 97}",), parent="")
            chunks.append(IndexedChunk(chunk, f"# file_{f}.py\n{text}"))
        files.append(FileRecord(path=f"src/pkg_{f // 2000}/file_{f}.py", size_bytes=4096,
                                mtime_ns=f, content_hash=f"{f:032x}", language="python",
                                chunks=chunks))
    return files


def _unit(rows: int, dims: int, seed: int) -> np.ndarray:
    vectors = np.random.default_rng(seed).standard_normal((rows, dims), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors


def phase_contents(store, args) -> dict:
    records = _records(args.chunks)
    batches, batch, size = [], [], 0
    for rec in records:
        batch.append(rec)
        size += len(rec.chunks)
        if size >= WRITE_BATCH_CHUNKS:
            batches.append(batch)
            batch, size = [], 0
    if batch:
        batches.append(batch)
    with Peak() as peak:
        for batch in batches:
            store.write_files(batch)
    return {"chunks_per_s": args.chunks / peak.seconds, "seconds": peak.seconds,
            "peak_rss_delta_mb": peak.mb}


def phase_file_stats(store, args) -> dict:
    rows = [(path, state.size_bytes + 1, state.mtime_ns + 1)
            for path, state in store.file_states().items()]
    with Peak() as peak:
        store.update_file_stats(rows)
    return {"rows": len(rows), "rows_per_s": len(rows) / peak.seconds,
            "seconds": peak.seconds, "peak_rss_delta_mb": peak.mb}


def phase_put_embeddings(store, args) -> dict:
    hashes = [h for (h,) in store._cursor().execute(
        "SELECT DISTINCT embed_hash FROM chunks ORDER BY embed_hash").fetchall()]
    vectors = _unit(len(hashes), args.dims, 1)
    with Peak() as peak:
        for start in range(0, len(hashes), args.window):
            store.put_embeddings(MODEL, hashes[start:start + args.window],
                                 vectors[start:start + args.window])
    return {"rows": len(hashes), "rows_per_s": len(hashes) / peak.seconds,
            "seconds": peak.seconds, "peak_rss_delta_mb": peak.mb}


def phase_chunk_vectors(store, args) -> dict:
    with Peak() as peak:
        ids, matrix = store.chunk_vectors(MODEL)
    first, mb = peak.seconds, peak.mb
    assert matrix.dtype == np.float32 and matrix.shape == (args.chunks, args.dims), matrix.shape
    assert len(ids) == args.chunks
    matrix_mb = matrix.nbytes / 2**20
    del ids, matrix
    times = [first]
    for _ in range(args.repeat - 1):
        start = time.perf_counter()
        ids, matrix = store.chunk_vectors(MODEL)
        times.append(time.perf_counter() - start)
        del ids, matrix
    # A few files' vectors, as a catch-up after an edit reads them.
    file_ids = [r[0] for r in store._cursor().execute(
        "SELECT file_id FROM file_state ORDER BY file_id LIMIT 10").fetchall()]
    start = time.perf_counter()
    ids, _ = store.chunk_vectors(MODEL, file_ids)
    few = time.perf_counter() - start
    assert len(ids) == min(args.chunks, 10 * CHUNKS_PER_FILE)
    return {"seconds_first": first, "seconds_best": min(times), "matrix_mb": matrix_mb,
            "peak_rss_delta_mb": mb, "ten_files_ms": few * 1000}


def phase_segments(store, args) -> dict:
    from contextd.store.base import SegmentRow
    from contextd.store.rows import text_hash
    now = datetime(2026, 1, 1)
    rows = []
    for i in range(args.segments):
        text = f"segment {i}: the build failed on step {i % 13} with exit code {i % 7}"
        rows.append(SegmentRow(f"seg-{i:06d}", f"s{i % 50}", text, "message",
                               now - timedelta(minutes=i), now - timedelta(minutes=i), 20,
                               "topic" if i % 2 else None, None,
                               tuple(f"seg-{j:06d}" for j in range(max(0, i - 2), i)),
                               text_hash(text), MODEL,
                               now + timedelta(days=30) if i % 3 else None, bool(i % 5 == 0)))
    vectors = _unit(len(rows), args.dims, 2)
    with Peak() as put:
        for start in range(0, len(rows), 500):
            part = rows[start:start + 500]
            with store.batch():
                store.put_embeddings(MODEL, [r.text_hash for r in part],
                                     vectors[start:start + 500])
                store.put_segments(part)
    with Peak() as read:
        back = store.segments()
    assert len(back) == len(rows)
    assert {r.segment_id: r for r in back}[rows[5].segment_id] == rows[5]
    with Peak() as vec:
        ids, matrix = store.segment_vectors(MODEL)
    assert matrix.shape == (len(rows), args.dims)
    return {"put_rows_per_s": len(rows) / put.seconds, "segments_seconds": read.seconds,
            "segment_vectors_seconds": vec.seconds, "put_peak_mb": put.mb,
            "segments_peak_mb": read.mb, "segment_vectors_peak_mb": vec.mb}


PHASES = {"contents": phase_contents, "file_stats": phase_file_stats,
          "put_embeddings": phase_put_embeddings,
          "chunk_vectors": phase_chunk_vectors, "segments": phase_segments}


def run_phase(args) -> None:
    from contextd.store.duckdb.store import DuckDBStore
    store = DuckDBStore(args.db)
    try:
        result = PHASES[args.phase](store, args)
    finally:
        store.close()
    result["pyarrow_loaded"] = "pyarrow" in sys.modules
    print(json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=60_000)
    parser.add_argument("--dims", type=int, default=384)
    parser.add_argument("--window", type=int, default=1024,
                        help="rows per put_embeddings call (bootstrap batch 128 x 8)")
    parser.add_argument("--segments", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", type=Path, help="where the index file goes (default: the "
                        "system's temporary folder; /dev/shm leaves the disk's fsyncs out)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--phase", choices=sorted(PHASES), help=argparse.SUPPRESS)
    parser.add_argument("--db", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        run_phase(args)
        return
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench-store-io-", dir=args.dir) as tmp:
        db = str(Path(tmp) / "index.duckdb")
        for phase in PHASES:
            cmd = [sys.executable, __file__, "--phase", phase, "--db", db,
                   "--chunks", str(args.chunks), "--dims", str(args.dims),
                   "--window", str(args.window), "--segments", str(args.segments),
                   "--repeat", str(args.repeat)]
            out = subprocess.run(cmd, capture_output=True, text=True,
                                 env={**os.environ, "PYTHONPATH": os.pathsep.join(
                                     filter(None, [os.environ.get("PYTHONPATH", ""),
                                                   str(Path(__file__).resolve().parents[1])]))})
            if out.returncode:
                sys.exit(f"phase {phase} failed:\n{out.stderr}")
            results[phase] = json.loads(out.stdout.strip().splitlines()[-1])
    n = args.chunks
    c, f, p, v, s = (results[k] for k in ("contents", "file_stats", "put_embeddings",
                                            "chunk_vectors", "segments"))
    print(f"{n:,} chunks x {args.dims} dims, put_embeddings windows of {args.window}")
    print(f"  contents insert   {c['chunks_per_s']:>10,.0f} chunks/s  ({c['seconds']:.2f} s)"
          f"  peak RSS +{c['peak_rss_delta_mb']:.0f} MB")
    print(f"  file_stats        {f['rows_per_s']:>10,.0f} rows/s    ({f['seconds']:.3f} s for"
          f" {f['rows']:,} files)  peak RSS +{f['peak_rss_delta_mb']:.0f} MB")
    print(f"  put_embeddings    {p['rows_per_s']:>10,.0f} rows/s    ({p['seconds']:.2f} s)"
          f"  peak RSS +{p['peak_rss_delta_mb']:.0f} MB")
    print(f"  chunk_vectors     {v['seconds_best']:>10.3f} s best   (first {v['seconds_first']:.3f}"
          f" s)  peak RSS +{v['peak_rss_delta_mb']:.0f} MB (matrix {v['matrix_mb']:.0f} MB);"
          f" 10 files {v['ten_files_ms']:.1f} ms")
    print(f"  segments ({args.segments:,})  put {s['put_rows_per_s']:,.0f} rows/s"
          f" (+{s['put_peak_mb']:.0f} MB), read {s['segments_seconds']:.3f} s"
          f" (+{s['segments_peak_mb']:.0f} MB), vectors {s['segment_vectors_seconds']:.3f} s"
          f" (+{s['segment_vectors_peak_mb']:.0f} MB)")
    print(f"  pyarrow imported: {any(r['pyarrow_loaded'] for r in results.values())}")
    if args.json:
        args.json.write_text(json.dumps({"chunks": n, "dims": args.dims, **results}, indent=2))


if __name__ == "__main__":
    main()
