"""Standalone service: query latency (p50/p95) and throughput over HTTP at 10k and 100k
chunks for 1, 8 and 32 concurrent clients, how long a backup holds writers, and what
encryption at rest costs (seal/unseal, start, query).

The store is filled as in bench_query.py: real chunks of the standard library and
site-packages, cut by the real chunkers, with random unit vectors instead of embeddings (the
query is embedded by the real model; the matrix product costs the same). They are inserted
directly, then marked as pushed documents so the service's catch-up keeps them. The load
comes from threads of this process on loopback (bounded: each client sends its queries one
after another, every query text new so that no cached query embedding answers), so on a two-core machine the clients compete with the service for the CPU.

    .venv/bin/python benchmarks/bench_service.py [--sizes 10000 100000] [--clients 1 8 32]
        [--queries 20] [--backup] [--encryption]
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import duckdb
import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_query import QUERIES, build_store  # noqa: E402

from contextd.query.calibration import NO_MATCH_NOTE  # noqa: E402
from contextd.config.sections import ContextConfig  # noqa: E402
from contextd.crypto.sealed_file import seal, unseal  # noqa: E402
from contextd.embedders.registry import get_embedder  # noqa: E402
from contextd.indexer.plan import PUSHED_MTIME_NS  # noqa: E402

READY_TIMEOUT_S = 600
NO_MATCH_PREFIX = NO_MATCH_NOTE.split(":")[0]


def prepare(size: int, workdir: Path) -> Path:
    """A project directory whose index holds ``size`` synthetic chunks."""
    root = workdir / f"proj_{size}"
    db = root / ".contextd" / "context.duckdb"
    db.parent.mkdir(parents=True)
    (root / "context.toml").write_text("[watcher]\nenabled = false\n"
                                       "[engine]\nrate_limit_per_s = 0\n")
    config = ContextConfig()
    embedder = get_embedder(config.embedding)
    build_store(db, size, config, embedder.identity, embedder.dimension)
    with duckdb.connect(str(db)) as con:
        con.execute("UPDATE file_state SET mtime_ns = ?", [PUSHED_MTIME_NS])
    return root


def start_server(root: Path, port: int, env: dict[str, str]) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "contextd", "--root", str(root), "server",
                             "--port", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            # Ready when every provider answers: the model loaded and the BM25 and symbol
            # indexes built (a provider still warming up times out with a note). The vectors
            # are random, so "no strong match" is expected and not a warm-up note.
            answer = httpx2.post(url + "/query_context", json={"q": QUERIES[0]}, timeout=120)
            if answer.status_code == 200 and answer.json()["q_embed_model"] and not [
                    n for n in answer.json()["notes"] if not n.startswith(NO_MATCH_PREFIX)]:
                return proc
        except httpx2.HTTPError:
            pass
        time.sleep(0.5)
    proc.kill()
    raise SystemExit("service did not become ready")


def load(url: str, clients: int, queries: int) -> tuple[list[float], float, list[float]]:
    """``clients`` threads, each sending ``queries`` queries in turn; latencies in ms, the
    wall time of the whole run, and the engine's own time per query (``timings_ms.total``:
    without HTTP and without waiting for a query slot)."""
    latencies: list[float] = []
    engine: list[float] = []
    guard = threading.Lock()
    serial = itertools.count(int(time.time() * 1000))

    def client(offset: int) -> None:
        # The standard library's client on one kept-alive connection: the load generator
        # shares the two cores with the service, and httpx spends ~3 ms of CPU per request
        # here against ~0.4 ms for http.client, which would be measured as service time.
        address = httpx2.URL(url)
        connection = http.client.HTTPConnection(address.host, address.port, timeout=120)
        try:
            for i in range(queries):
                # Every text is new (a numbered variant of a query), so the service's cache
                # of query embeddings never answers: each query is embedded.
                base = QUERIES[(offset + i) % len(QUERIES)]
                body = json.dumps({"q": f"{base} {next(serial)}", "k": 12})
                begin = time.perf_counter()
                connection.request("POST", "/query_context", body,
                                   {"content-type": "application/json"})
                response = connection.getresponse()
                answer = json.loads(response.read())
                elapsed = (time.perf_counter() - begin) * 1000
                if response.status != 200:
                    raise SystemExit(f"query failed: {response.status} {answer}")
                with guard:
                    latencies.append(elapsed)
                    engine.append(answer["timings_ms"]["total"])
        finally:
            connection.close()

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sorted(latencies), time.perf_counter() - started, sorted(engine)


def percentile(values: list[float], share: float) -> float:
    return values[max(0, int(round(share * len(values))) - 1)]


def backup_hold(url: str) -> str:
    """Write latency (add_context of a small file) alone, and while a backup runs."""
    def write(i: int) -> float:
        begin = time.perf_counter()
        httpx2.post(url + "/add_context", json={"file_path": f"bench/w{i}.md",
                                                "content": f"# note {i}\n\nwrite {i}\n"},
                    timeout=120).raise_for_status()
        return (time.perf_counter() - begin) * 1000

    alone = [write(i) for i in range(10)]
    result: dict = {}
    backup = threading.Thread(target=lambda: result.update(
        httpx2.post(url + "/backup", json={}, timeout=600).json()))
    backup.start()
    during = []
    i = 100
    while backup.is_alive():
        during.append(write(i))
        i += 1
    backup.join()
    return (f"backup {result.get('seconds', 0):.2f} s ({result.get('size_bytes', 0) / 2**20:.0f}"
            f" MiB); writes alone p50 {statistics.median(alone):.0f} ms max {max(alone):.0f} ms;"
            f" during the backup {len(during)} writes, p50 "
            f"{statistics.median(during) if during else 0:.0f} ms max "
            f"{max(during) if during else 0:.0f} ms")


def encryption_cost(root: Path, port: int, env: dict[str, str], queries: int) -> str:
    """Seal and unseal times of the store, and service start and query latency with
    ``security.encrypt_db`` on (the open index lives decrypted in /dev/shm)."""
    db = root / ".contextd" / "context.duckdb"
    secret = b"benchmark key of enough length"
    plain = root / "plain.duckdb"
    shutil.copyfile(db, plain)
    begin = time.perf_counter()
    seal(plain, db, secret)
    sealed_s = time.perf_counter() - begin
    begin = time.perf_counter()
    unseal(db, plain, secret)
    unsealed_s = time.perf_counter() - begin
    plain.unlink()
    (root / "context.toml").write_text((root / "context.toml").read_text()
                                       + "[security]\nencrypt_db = true\n")
    begin = time.perf_counter()
    proc = start_server(root, port, {**env, "CONTEXTD_DB_KEY": secret.decode()})
    ready_s = time.perf_counter() - begin
    try:
        latencies, _, _ = load(f"http://127.0.0.1:{port}", 1, queries)
    finally:
        proc.terminate()
        proc.wait(timeout=120)
    return (f"encrypted: seal {sealed_s:.2f} s, unseal {unsealed_s:.2f} s "
            f"({db.stat().st_size / 2**20:.0f} MiB); service ready in {ready_s:.1f} s; "
            f"1 client p50 {statistics.median(latencies):.1f} ms, "
            f"p95 {percentile(latencies, 0.95):.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--queries", type=int, default=20, help="queries per client")
    parser.add_argument("--backup", action="store_true", help="also measure a backup's hold "
                                                              "on writers")
    parser.add_argument("--encryption", action="store_true",
                        help="also measure encrypt_db: seal/unseal, start, query")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "XDG_RUNTIME_DIR": tmp}
        for size in args.sizes:
            started = time.perf_counter()
            root = prepare(size, Path(tmp))
            port = 20000 + size % 20000
            proc = start_server(root, port, env)
            url = f"http://127.0.0.1:{port}"
            print(f"{size:>7} chunks (store built + service ready in "
                  f"{time.perf_counter() - started:.0f} s)", flush=True)
            try:
                load(url, 1, 5)  # warm
                for clients in args.clients:
                    latencies, wall, engine = load(url, clients, args.queries)
                    print(f"  {clients:>2} clients: p50 {statistics.median(latencies):6.1f} ms, "
                          f"p95 {percentile(latencies, 0.95):6.1f} ms, "
                          f"{len(latencies) / wall:5.1f} queries/s "
                          f"({len(latencies)} queries; engine alone p50 "
                          f"{statistics.median(engine):.1f} ms)", flush=True)
                if args.backup:
                    print(f"  {backup_hold(url)}", flush=True)
            finally:
                proc.terminate()
                proc.wait(timeout=120)
            if args.encryption:
                print(f"  {encryption_cost(root, port, env, args.queries)}", flush=True)
                shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
