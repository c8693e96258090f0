"""MCP server and shared-access latency.

Prints:
  * time from spawning ``contextd serve`` to its answers to initialize, to the first
    tools/list and to the first query_context (raw stdio pipe, all sent at once as a client
    does), min/median/max over N starts, with the handshake answered early (the prelude,
    contextd.mcp.prelude) and by the SDK (``CONTEXTD_EARLY_INITIALIZE=0``);
  * query_context round-trip latency, p50/p95 over N calls, through the MCP SDK's stdio
    client, on the server that owns the index and on a second server that reaches the owner
    over its socket;
  * the same query through the CLI (``contextd query --json``, a cold process each time)
    with a server running (the CLI is a thin client) and without one (the CLI opens the
    index and loads the model itself).

The project is a git copy of this repository's ``contextd/`` package. Usage:
  .venv/bin/python benchmarks/bench_mcp.py [--calls 100] [--cli-runs 5] [--starts 5]
  .venv/bin/python benchmarks/bench_mcp.py --starts 10 --starts-only   # the start-up only
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

REPO = Path(__file__).resolve().parent.parent
QUERIES = ("how does a client take over when the owner dies", "refresh changed files",
           "token budget for snippets", "Unix socket path length", "MMR diversity selection")
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "bench", "version": "0"}}}


def make_project(base: Path) -> Path:
    root = base / "project"
    shutil.copytree(REPO / "contextd", root / "contextd",
                    ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def serve_command(root: Path) -> list[str]:
    return [sys.executable, "-m", "contextd", "serve", "--root", str(root)]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# The requests of a start, in the order a client sends them, and what each answer is named.
START_REQUESTS = (
    (INITIALIZE, "initialize"),
    ({"jsonrpc": "2.0", "method": "notifications/initialized"}, None),
    ({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, "tools/list"),
    ({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "query_context", "arguments": {"query": QUERIES[0]}}}, "first query_context"),
)


def start_timings(root: Path, env: dict[str, str]) -> dict[str, float]:
    """Milliseconds from spawning the server to each answer of :data:`START_REQUESTS`.
    initialize is sent first and answered before the rest is sent, as clients do."""
    started = time.perf_counter()
    proc = subprocess.Popen(serve_command(root), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env)
    names = {message["id"]: name for message, name in START_REQUESTS if name}
    timings: dict[str, float] = {}

    def send(message: dict) -> None:
        proc.stdin.write((json.dumps(message) + "\n").encode())
        proc.stdin.flush()

    def take_answer() -> None:
        answer = json.loads(proc.stdout.readline())
        timings[names[answer["id"]]] = (time.perf_counter() - started) * 1000

    send(INITIALIZE)
    take_answer()  # a client waits for the handshake's answer, then sends the rest at once
    for message, _ in START_REQUESTS[1:]:
        send(message)
    while len(timings) < len(names):
        take_answer()
    proc.stdin.close()
    proc.wait(60)
    return timings


def report_starts(label: str, root: Path, env: dict[str, str], starts: int) -> None:
    runs = [start_timings(root, env) for _ in range(starts)]
    print(f"{label} (load {os.getloadavg()[0]:.1f}):")
    for name in runs[0]:
        values = sorted(run[name] for run in runs)
        print(f"  spawn -> {name:<22} min {values[0]:7.0f}  median "
              f"{values[len(values) // 2]:7.0f}  max {values[-1]:7.0f} ms   (n={starts})")


async def _session(root: Path, env: dict[str, str], stack) -> ClientSession:
    command = serve_command(root)
    params = StdioServerParameters(command=command[0], args=command[1:], env=env)
    read, write = await stack.enter_async_context(stdio_client(params, errlog=open(os.devnull, "w")))
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()
    return session


async def _stats(session: ClientSession) -> dict:
    return (await session.call_tool("get_context_stats", {})).structured_content


async def _wait_ready(session: ClientSession) -> None:
    """Index built and the semantic provider loaded, so every call takes the full path."""
    await session.call_tool("refresh_context", {"paths": ["."], "async": False})
    for _ in range(600):
        stats = await _stats(session)
        semantic = [p for p in stats["providers"] if p["id"] == "semantic"]
        if semantic and semantic[0]["available"] and stats["indexing"]["state"] == "idle":
            return
        await anyio.sleep(0.2)
    raise RuntimeError(f"server never became ready: {stats['indexing']}")


async def _round_trips(session: ClientSession, calls: int) -> list[float]:
    latencies = []
    for i in range(calls):
        started = time.perf_counter()
        result = await session.call_tool("query_context", {"query": QUERIES[i % len(QUERIES)]})
        latencies.append((time.perf_counter() - started) * 1000)
        assert not result.is_error, result.content[0].text
    return latencies


async def owner_and_client(root: Path, env: dict[str, str], stack
                           ) -> tuple[ClientSession, ClientSession]:
    """A ready server that owns the index, and a second one that reaches it over the
    socket."""
    owner = await _session(root, env, stack)
    await _wait_ready(owner)
    client = await _session(root, env, stack)
    assert not (await _stats(client))["owner"]["this_process"]
    return owner, client


async def query_latencies(root: Path, env: dict[str, str], calls: int) -> dict[str, list]:
    """query_context round trips on the owner and on a second server (a socket client)."""
    from contextlib import AsyncExitStack

    async with AsyncExitStack() as stack:
        owner, client = await owner_and_client(root, env, stack)
        await _round_trips(owner, 5)  # warm caches
        await _round_trips(client, 5)
        return {"owner": await _round_trips(owner, calls),
                "client": await _round_trips(client, calls)}


def cli_query(root: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "contextd", "--root", str(root), "query", "--json",
                    QUERIES[0]], check=True, capture_output=True, env=env)
    return time.perf_counter() - started


def cli_with_owner(root: Path, env: dict[str, str], runs: int) -> list[float]:
    """CLI queries while a server owns the index (kept alive on an open stdin)."""
    server = subprocess.Popen(serve_command(root), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, env=env)
    try:
        for message in (INITIALIZE, {"jsonrpc": "2.0", "method": "notifications/initialized"},
                        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                            "name": "refresh_context",
                            "arguments": {"paths": ["."], "async": False}}}):
            server.stdin.write((json.dumps(message) + "\n").encode())
            server.stdin.flush()
        while json.loads(server.stdout.readline()).get("id") != 2:
            pass
        cli_query(root, env)  # the owner loads its model on the first query
        return [cli_query(root, env) for _ in range(runs)]
    finally:
        server.stdin.close()
        server.wait(60)


def sdk_import_floor() -> float:
    """Seconds a fresh interpreter takes just to import the MCP server SDK: the part of the
    start-up that contextd cannot shorten."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import mcp.server.mcpserver"], check=True)
    return time.perf_counter() - started


def report(label: str, values: list[float], unit: str) -> None:
    print(f"{label:<46} p50 {percentile(values, 0.5):8.1f} {unit}   "
          f"p95 {percentile(values, 0.95):8.1f} {unit}   (n={len(values)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100, help="query_context calls.")
    parser.add_argument("--cli-runs", type=int, default=5, help="CLI queries per setting.")
    parser.add_argument("--starts", type=int, default=5, help="Server starts timed.")
    parser.add_argument("--starts-only", action="store_true",
                        help="Time the server starts only.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        root = make_project(base)
        (base / "run").mkdir()
        env = {**os.environ, "XDG_RUNTIME_DIR": str(base / "run")}
        files = sum(1 for p in root.rglob("*.py"))
        print(f"project: {files} Python files (a copy of contextd/); "
              f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
        cold = [cli_query(root, env)]  # builds the index (not timed below)
        print(f"first CLI query (bootstraps the index):        {cold[0]:8.1f} s")
        report_starts("server starts, initialize answered early", root, env, args.starts)
        report_starts("server starts, initialize answered by the SDK", root,
                      {**env, "CONTEXTD_EARLY_INITIALIZE": "0"}, args.starts)
        if args.starts_only:
            return
        floor = [sdk_import_floor() * 1000 for _ in range(args.starts)]
        report("  of which the floor: python + import MCP SDK", floor, "ms")
        latencies = anyio.run(query_latencies, root, env, args.calls)
        report("query_context round trip, owner server", latencies["owner"], "ms")
        report("query_context round trip, client server", latencies["client"], "ms")
        with_owner = [t * 1000 for t in cli_with_owner(root, env, args.cli_runs)]
        report("CLI query, server running (thin client)", with_owner, "ms")
        embedded = [cli_query(root, env) * 1000 for _ in range(args.cli_runs)]
        report("CLI query, no server (embedded owner)", embedded, "ms")


if __name__ == "__main__":
    main()
