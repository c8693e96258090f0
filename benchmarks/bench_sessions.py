"""Search sessions and reports: latency over MCP (the SDK's stdio client).

Prints p50/p95 of
  * search_knowledge (query path at k=20 plus the session write),
  * get_search_results of one session (limit 5) and of three sessions at once,
  * create_rag_report with the basic and paper templates (5 citations checked against their
    files, rendered, written),
on the server that owns the index and on a second server that reaches the owner over its
socket (reports are written by the server that was asked, so they do not cross it).

The project is a git copy of this repository's ``contextd/`` package (see bench_mcp.py).
Usage:  .venv/bin/python benchmarks/bench_sessions.py [--calls 30]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path

import anyio

from bench_mcp import QUERIES, make_project, owner_and_client, report


async def _timed(session, tool: str, arguments: dict) -> tuple[float, dict]:
    started = time.perf_counter()
    result = await session.call_tool(tool, arguments)
    elapsed = (time.perf_counter() - started) * 1000
    assert not result.is_error, result.content[0].text
    return elapsed, result.structured_content


async def _measure(session, calls: int) -> dict[str, list[float]]:
    timings: dict[str, list[float]] = {name: [] for name in (
        "search_knowledge", "get_search_results (1 session)",
        "get_search_results (3 sessions)", "create_rag_report (basic)",
        "create_rag_report (paper)")}
    ids: list[str] = []
    for i in range(calls):
        elapsed, answer = await _timed(session, "search_knowledge",
                                       {"query": QUERIES[i % len(QUERIES)]})
        timings["search_knowledge"].append(elapsed)
        ids.append(answer["session"]["session_id"])
        elapsed, answer = await _timed(session, "get_search_results",
                                       {"session_id": ids[-1], "limit": 5})
        timings["get_search_results (1 session)"].append(elapsed)
        if len(ids) >= 3:
            elapsed, _ = await _timed(session, "get_search_results",
                                      {"session_ids": ids[-3:], "limit": 5})
            timings["get_search_results (3 sessions)"].append(elapsed)
        sections = [{"file": r["file_path"], "start_line": r["start_line"],
                     "end_line": r["end_line"], "summary": f"About {r['label']}."}
                    for r in answer["results"]]
        variables = {"query": QUERIES[i % len(QUERIES)], "title": "Bench", "abstract": "A.",
                     "overall_summary": "S.", "sections": sections}
        for template in ("basic", "paper"):
            elapsed, written = await _timed(session, "create_rag_report", {
                "variables": variables, "template": template})
            timings[f"create_rag_report ({template})"].append(elapsed)
            os.unlink(written["path"])
    return timings


async def run(root: Path, env: dict[str, str], calls: int) -> dict[str, dict]:
    async with AsyncExitStack() as stack:
        owner, client = await owner_and_client(root, env, stack)
        await _measure(owner, 3)  # warm caches (model, in-memory indexes, templates)
        await _measure(client, 3)
        return {"owner": await _measure(owner, calls), "client": await _measure(client, calls)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=30, help="Rounds per server.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        root = make_project(base)
        (base / "run").mkdir()
        (root / "context.toml").write_text("[sessions]\nmax_sessions = 50\n")
        env = {**os.environ, "XDG_RUNTIME_DIR": str(base / "run")}
        print(f"project: {sum(1 for _ in root.rglob('*.py'))} Python files (a copy of "
              f"contextd/); {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
        results = anyio.run(run, root, env, args.calls)
        for role, timings in results.items():
            for name, values in timings.items():
                report(f"{name}, {role} server", values, "ms")


if __name__ == "__main__":
    main()
