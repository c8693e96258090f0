"""Embedding backends compared on the same real code chunks (functions of the Python stdlib).

Prints, in one run: throughput (chunks/s, lines/s) of torch fp32, ONNX fp32 and ONNX int8;
warm query-embedding latency p50/p95; cold-process time to the first query vector (a fresh
interpreter per backend, so torch's import cost shows); and how well the vectors agree.

    .venv/bin/python benchmarks/bench_embedders.py            # 1000 chunks, 3 rounds
    .venv/bin/python benchmarks/bench_embedders.py --limit 500 --json

The ONNX models are prepared (exported) before timing (`contextd embedders prepare` times that).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import statistics
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import numpy as np

from contextd.config.sections import EmbeddingConfig
from contextd.embedders.common import require_extra
from contextd.embedders.registry import get_embedder
from contextd.errors import ContextdError

BACKENDS = {"torch-fp32": ("torch", "none"), "onnx-fp32": ("onnx", "none"),
            "onnx-int8": ("onnx", "int8")}
QUERIES = ["parse a date string with a timezone", "retry a network request with backoff",
           "read a zip archive member", "escape html entities", "compare two version numbers",
           "thread pool that runs tasks", "temporary directory cleanup", "hash a file in chunks"]


def stdlib_chunks(limit: int) -> list[str]:
    """Source of the first ``limit`` functions (and methods) of the stdlib, in a fixed order:
    real code of realistic chunk sizes, present on every machine with Python."""
    chunks: list[str] = []
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        source = path.read_text(encoding="utf-8", errors="replace")
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                chunks.append(ast.get_source_segment(source, node) or "")
                if len(chunks) == limit:
                    return chunks
    return chunks


def config_for(name: str) -> EmbeddingConfig:
    backend, quantize = BACKENDS[name]
    return dataclasses.replace(EmbeddingConfig(), backend=backend, quantize=quantize)


def cold_start_seconds(name: str, repeats: int) -> float:
    """Median wall time of a fresh interpreter that imports contextd and embeds one query."""
    backend, quantize = BACKENDS[name]
    code = ("import dataclasses; from contextd.config.sections import EmbeddingConfig; "
            "from contextd.embedders.registry import get_embedder; "
            f"get_embedder(dataclasses.replace(EmbeddingConfig(), backend={backend!r}, "
            f"quantize={quantize!r})).embed_query('open a file')")
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def top_k_agreement(a: np.ndarray, b: np.ndarray, k: int = 10) -> float:
    """Mean share of each chunk's k nearest neighbours (itself excluded) that both sets of
    vectors agree on: what ranking would notice of the difference."""
    def neighbours(v: np.ndarray) -> np.ndarray:
        sims = v @ v.T
        np.fill_diagonal(sims, -np.inf)
        return np.argsort(-sims, axis=1)[:, :k]

    na, nb = neighbours(a), neighbours(b)
    return float(np.mean([len(set(x) & set(y)) / k for x, y in zip(na, nb)]))


def throughput(chunks: list[str], rounds: int) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """Median seconds to embed all chunks per backend, the backends taking turns each round
    so that load from other processes on a shared machine hits them alike."""
    seconds: dict[str, list[float]] = {name: [] for name in BACKENDS}
    vectors = {}
    for _ in range(rounds):
        for name in BACKENDS:
            started = time.perf_counter()
            vectors[name] = get_embedder(config_for(name)).embed(chunks)
            seconds[name].append(time.perf_counter() - started)
    return {name: statistics.median(s) for name, s in seconds.items()}, vectors


def measure(name: str, chunks: list[str], lines: int, elapsed: float) -> dict:
    """One backend's row: throughput from ``elapsed`` and warm single-query latencies."""
    embedder = get_embedder(config_for(name))
    latencies = []
    for query in QUERIES * 8:
        t0 = time.perf_counter()
        embedder.embed_query(query)
        latencies.append((time.perf_counter() - t0) * 1000)
    row = {"backend": name, "identity": embedder.identity,
           "chunks_per_s": round(len(chunks) / elapsed, 1), "lines_per_s": round(lines / elapsed),
           "query_p50_ms": round(float(np.percentile(latencies, 50)), 2),
           "query_p95_ms": round(float(np.percentile(latencies, 95)), 2)}
    return row


def agreement(vectors: dict[str, np.ndarray]) -> list[dict]:
    pairs = [("onnx-fp32", "torch-fp32"), ("onnx-int8", "onnx-fp32"), ("onnx-int8", "torch-fp32")]
    out = []
    for a, b in pairs:
        cos = np.sum(vectors[a] * vectors[b], axis=1)
        out.append({"pair": f"{a} vs {b}", "cosine_mean": round(float(cos.mean()), 5),
                    "cosine_min": round(float(cos.min()), 5),
                    "top10_agreement": round(top_k_agreement(vectors[a], vectors[b]), 3)})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=1000, help="chunks to embed")
    parser.add_argument("--rounds", type=int, default=3, help="throughput runs per backend")
    parser.add_argument("--cold-repeats", type=int, default=3, help="cold starts per backend")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args()
    try:  # torch fp32 is the reference every figure is compared with
        require_extra("the torch-fp32 reference", "torch", "torch", "sentence_transformers")
    except ContextdError as exc:
        parser.exit(1, f"{exc}\n")
    chunks = stdlib_chunks(args.limit)
    lines = sum(c.count("\n") + 1 for c in chunks)
    for name in BACKENDS:  # export/load and warm up outside the timings
        embedder = get_embedder(config_for(name))
        getattr(embedder, "prepare", lambda: None)()
        embedder.embed(chunks[:32])
    elapsed, vectors = throughput(chunks, args.rounds)
    rows = []
    for name in BACKENDS:
        row = measure(name, chunks, lines, elapsed[name])
        row["cold_first_query_s"] = round(cold_start_seconds(name, args.cold_repeats), 2)
        rows.append(row)
        print(f"measured {name}", file=sys.stderr)
    torch_rate = rows[0]["chunks_per_s"]
    for row in rows:
        row["speedup_vs_torch"] = round(row["chunks_per_s"] / torch_rate, 2)
    report = {"chunks": len(chunks), "lines": lines, "backends": rows,
              "agreement": agreement(vectors)}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{len(chunks)} stdlib functions, {lines} lines")
    header = ("backend", "chunks/s", "lines/s", "x torch", "q p50 ms", "q p95 ms", "cold s")
    print("{:<11} {:>9} {:>9} {:>8} {:>9} {:>9} {:>7}".format(*header))
    for r in rows:
        print(f"{r['backend']:<11} {r['chunks_per_s']:>9} {r['lines_per_s']:>9} "
              f"{r['speedup_vs_torch']:>8} {r['query_p50_ms']:>9} {r['query_p95_ms']:>9} "
              f"{r['cold_first_query_s']:>7}")
    for a in report["agreement"]:
        print(f"{a['pair']:<26} cosine mean {a['cosine_mean']}  min {a['cosine_min']}  "
              f"top-10 agreement {a['top10_agreement']}")


if __name__ == "__main__":
    main()
