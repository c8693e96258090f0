"""MCP server and shared-access latency.

Prints:
  * time from starting ``contextd serve`` to the first tools/list answer (raw stdio pipe);
  * query_context round-trip latency, p50/p95 over N calls, through the MCP SDK's stdio
    client, on the server that owns the index and on a second server that reaches the owner
    over its socket;
  * the same query through the CLI (``contextd query --json``, a cold process each time)
    with a server running (the CLI is a thin client) and without one (the CLI opens the
    index and loads the model itself).

The project is a git copy of this repository's ``contextd/`` package. Usage:
  .venv/bin/python benchmarks/bench_mcp.py [--calls 100] [--cli-runs 5] [--starts 5]
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


def time_to_tools_list(root: Path, env: dict[str, str]) -> float:
    """Seconds from spawning the server to the answer of tools/list."""
    started = time.perf_counter()
    proc = subprocess.Popen(serve_command(root), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env)
    for message in (INITIALIZE, {"jsonrpc": "2.0", "method": "notifications/initialized"},
                    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}):
        proc.stdin.write((json.dumps(message) + "\n").encode())
        proc.stdin.flush()
    while json.loads(proc.stdout.readline()).get("id") != 2:
        pass
    elapsed = time.perf_counter() - started
    proc.stdin.close()
    proc.wait(60)
    return elapsed


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
        starts = [time_to_tools_list(root, env) * 1000 for _ in range(args.starts)]
        report("server start -> first tools/list answer", starts, "ms")
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
