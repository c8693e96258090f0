"""Remote embedding: bootstrap throughput through an OpenAI-compatible server, against the
in-process embedder, and the overhead of one request.

The server is tests/embedding_server.py in its own process, serving the same ONNX int8 model
the in-process backend runs, one model call at a time (a queue, as TEI and Ollama run one
model), so concurrent requests overlap the HTTP and JSON work with the server's compute. On
one machine the two compete for the same cores, so this
measures the client's machinery (batching, concurrency, keep-alive, JSON) rather than what a
GPU server would add; with a remote GPU the embedding time moves off the machine.

    .venv/bin/python benchmarks/bench_remote_embed.py               # 20 stdlib files
    .venv/bin/python benchmarks/bench_remote_embed.py --files 60 --json

Prints, per configuration: files, chunks, seconds, chunks/s of a full bootstrap (fresh
database, nothing cached) in-process and remote with 1, 4 and 16 concurrent requests; then
the round trip of a one-text request against a server that runs no model (pure protocol
overhead) and against the real one, next to the in-process query embedding.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

from contextd.config.sections import EmbeddingConfig
from contextd.embedders.registry import get_embedder
from contextd.indexer import Indexer
from contextd.config.project import Project
from contextd.store.duckdb import DuckDBStore

REPO = Path(__file__).resolve().parent.parent
SERVER = REPO / "tests" / "embedding_server.py"
MODEL = "all-MiniLM-L6-v2"
CONCURRENCY = (1, 4, 16)
ROUND_TRIPS = 50


def start_server(*flags: str) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen([sys.executable, str(SERVER), *flags], stdout=subprocess.PIPE,
                               text=True)
    return process, process.stdout.readline().strip()


def make_corpus(target: Path, files: int) -> Path:
    """The first ``files`` modules of the standard library, as a git project."""
    target.mkdir(parents=True)
    sources = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))[:files]
    for source in sources:
        shutil.copy(source, target / source.name)
    subprocess.run(["git", "init", "-q", str(target)], check=True)
    return target


def bootstrap(corpus: Path, embedding: EmbeddingConfig) -> dict:
    """A full bootstrap of ``corpus`` into a fresh database with ``embedding``."""
    project = Project.open(corpus)
    db = corpus.parent / f"bench-{time.monotonic_ns()}.duckdb"
    config = dataclasses.replace(project.config, embedding=embedding)
    indexer = Indexer(Project(corpus, config), DuckDBStore(db))
    try:
        report = indexer.ensure_indexed()
    finally:
        indexer.store.close()
        db.unlink(missing_ok=True)
    if report.embedding_error:
        raise SystemExit(f"embedding failed: {report.embedding_error}")
    print(f"  {report.summary}", file=sys.stderr)
    return {"files": report.files_indexed, "chunks": report.chunks_embedded,
            "seconds": round(report.seconds, 2),
            "chunks_per_s": round(report.chunks_embedded / report.seconds, 1),
            "retries": report.embedding.get("retries", 0),
            "requests": report.embedding.get("requests", 0)}


def round_trip_ms(embed_query, rounds: int = ROUND_TRIPS) -> float:
    embed_query("warm up the connection")
    times = []
    for i in range(rounds):
        started = time.perf_counter()
        embed_query(f"where is retry number {i} handled")
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 2)


def remote_config(base_url: str, concurrency: int) -> EmbeddingConfig:
    return dataclasses.replace(EmbeddingConfig(), backend="openai", model=MODEL,
                               base_url=base_url + "/v1", concurrency=concurrency)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=20, help="stdlib modules to index")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    results: dict = {"bootstrap": {}, "round_trip_ms": {}}
    with tempfile.TemporaryDirectory() as tmp:
        corpus = make_corpus(Path(tmp) / "corpus", args.files)
        local = EmbeddingConfig()
        get_embedder(local).embed(["load the model before timing"])
        results["bootstrap"]["in-process onnx-int8"] = bootstrap(corpus, local)
        server, url = start_server()
        try:
            for n in CONCURRENCY:
                results["bootstrap"][f"remote, {n} concurrent"] = \
                    bootstrap(corpus, remote_config(url, n))
            results["round_trip_ms"]["remote, real model"] = \
                round_trip_ms(get_embedder(remote_config(url, 1)).embed_query)
        finally:
            server.kill()
            server.wait()
        fake, fake_url = start_server("--fake")
        try:
            results["round_trip_ms"]["remote, no model (protocol overhead)"] = \
                round_trip_ms(get_embedder(remote_config(fake_url, 2)).embed_query)
        finally:
            fake.kill()
            fake.wait()
        results["round_trip_ms"]["in-process onnx-int8"] = \
            round_trip_ms(get_embedder(local).embed_query)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"bootstrap of {args.files} stdlib modules (fresh database, nothing cached):")
    for name, row in results["bootstrap"].items():
        print(f"  {name:<24} {row['files']:>4} files {row['chunks']:>6} chunks "
              f"{row['seconds']:>7.2f} s {row['chunks_per_s']:>8.1f} chunks/s "
              f"({row['requests']} requests, {row['retries']} retries)")
    print("one-text request, median of", ROUND_TRIPS)
    for name, ms in results["round_trip_ms"].items():
        print(f"  {name:<40} {ms:>8.2f} ms")
    print("(server and client share this machine's cores: a GPU server moves the model's "
          "time off it)")


if __name__ == "__main__":
    main()
