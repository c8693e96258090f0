"""What installing contextd costs a user: a clean virtualenv from a local wheel (issue 29).

Prints: the installed size of the venv and its largest packages, the number of packages, whether
torch (or transformers, sentence-transformers, scipy, scikit-learn, sympy) came along, the
install time, the cold ``contextd --version`` and the first query on a small fresh project (a
fresh model cache, so the one-off ONNX build is in it) and the second (a new process, caches
warm); then ``contextd serve`` answers an MCP client (the SDK's stdio client, from this
interpreter) with its tool list and a ``query_context`` hit.

    .venv/bin/python -m build --wheel --outdir /tmp/wheels .
    .venv/bin/python benchmarks/bench_install.py /tmp/wheels/contextd-*.whl
    # an older wheel that needs the CPU torch installed first, as its README said:
    .venv/bin/python benchmarks/bench_install.py old.whl --first torch==2.13.0

The install uses pip's own cache: run it twice and read the second install time for "from the
local pip cache" (the first also fills the cache).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEAVY = ("torch", "transformers", "sentence-transformers", "scipy", "scikit-learn", "sympy")
QUERY = "where is the shipping price of a parcel computed"


def _run(cmd: list[str], **kw) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, check=True, **kw)
    return time.perf_counter() - started


def _size_mb(path: Path) -> float:
    total = sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())
    return total / 1e6


def _largest(site: Path, n: int) -> list[tuple[str, float]]:
    sizes = [(p.name, _size_mb(p) if p.is_dir() else p.stat().st_size / 1e6)
             for p in site.iterdir() if not p.name.endswith((".dist-info", "__pycache__"))]
    return sorted(sizes, key=lambda x: -x[1])[:n]


def _project(root: Path) -> Path:
    """A small git project with a few real files, so the first query indexes and embeds."""
    (root / "src").mkdir(parents=True)
    (root / "src/rates.py").write_text(
        'def shipping_rate(weight_kg: float) -> float:\n'
        '    """Price of shipping a parcel of the given weight."""\n'
        '    return 4.5 + 1.2 * weight_kg\n')
    (root / "src/users.py").write_text(
        'class UserStore:\n    """Keeps users by id."""\n\n'
        '    def __init__(self):\n        self.users = {}\n\n'
        '    def add(self, user_id: int, name: str) -> None:\n        self.users[user_id] = name\n')
    (root / "README.md").write_text("# shop\n\nPrices and users of a small shop.\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def mcp_answer(contextd: str, root: Path, env: dict[str, str]) -> tuple[int, str, float]:
    """How many tools ``contextd serve`` lists to an MCP client, the file of the first hit
    ``query_context`` answers, and the seconds from the server's start to that answer."""
    import anyio
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    async def ask() -> tuple[int, str]:
        params = StdioServerParameters(command=contextd, args=["serve", "--root", str(root)],
                                        env=env, cwd=str(root))
        with open(os.devnull, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    tools = (await session.list_tools()).tools
                    # The first answers may come while the server still loads the model
                    # ("semantic results pending"): ask again, for at most a minute.
                    deadline = time.perf_counter() + 60
                    while True:
                        answer = await session.call_tool("query_context",
                                                         {"query": QUERY, "k": 3})
                        if answer.is_error:  # the one line the tool answered
                            return len(tools), f"error: {answer.content[0].text}"
                        hits = answer.structured_content["hits"]
                        if hits or time.perf_counter() > deadline:
                            return len(tools), hits[0]["filePath"] if hits else "no hit"
                        await anyio.sleep(0.5)

    started = time.perf_counter()
    count, top = anyio.run(ask)
    return count, top, time.perf_counter() - started


def measure(wheel: Path, first: list[str], work: Path) -> dict:
    venv = work / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    pip = [str(venv / "bin/python"), "-m", "pip", "install", "-q"]
    started = time.perf_counter()
    if first:
        subprocess.run(pip + first, check=True)
    subprocess.run(pip + [str(wheel)], check=True)
    install_s = time.perf_counter() - started
    listed = json.loads(subprocess.run([str(venv / "bin/python"), "-m", "pip", "list",
                                        "--format", "json"], check=True, capture_output=True,
                                       text=True).stdout)
    names = {p["name"].lower() for p in listed}
    site = next((venv / "lib").glob("python3*/site-packages"))
    contextd = str(venv / "bin/contextd")
    env = {**os.environ, "CONTEXTD_CACHE_DIR": str(work / "cache"),
           "XDG_RUNTIME_DIR": str(work / "run"), "HOME": str(work / "home")}
    version_s = statistics.median(_run([contextd, "--version"], capture_output=True, env=env)
                                  for _ in range(3))
    root = _project(work / "project")
    query = [contextd, "--root", str(root), "--json", "query", QUERY]
    first_query_s = _run(query, capture_output=True, env=env)
    second_query_s = _run(query, capture_output=True, env=env)
    tools, top_hit, mcp_s = mcp_answer(contextd, root, env)
    # The first query handed its vectors to a background owner: stop it before the folder
    # goes (it would otherwise idle for [owner] idle_exit_seconds, writing into it).
    subprocess.run([contextd, "--root", str(root), "stop"], capture_output=True, env=env)
    return {"wheel": wheel.name, "installed_mb": round(_size_mb(venv)),
            "packages": len(listed), "heavy_present": sorted(n for n in HEAVY if n in names),
            "install_s": round(install_s, 1), "version_cold_s": round(version_s, 2),
            "first_query_s": round(first_query_s, 1), "second_query_s": round(second_query_s, 2),
            "mcp_tools": tools, "mcp_top_hit": top_hit, "mcp_answer_s": round(mcp_s, 2),
            "largest_mb": [(name, round(mb)) for name, mb in _largest(site, 12)]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheel", type=Path, help="the contextd wheel to install")
    parser.add_argument("--first", nargs="*", default=[],
                        help="packages to install before the wheel (e.g. torch==2.13.0)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="contextd-install-"))
    try:
        result = measure(args.wheel.resolve(), args.first, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps(result))
        return
    print(f"wheel                 {result['wheel']}")
    print(f"installed size        {result['installed_mb']} MB in {result['packages']} packages")
    print(f"heavy packages        {', '.join(result['heavy_present']) or 'none'}")
    print(f"install time          {result['install_s']} s")
    print(f"contextd --version    {result['version_cold_s']} s (cold process, median of 3)")
    print(f"first query           {result['first_query_s']} s (a fresh index and model cache)")
    print(f"second query          {result['second_query_s']} s (new process, caches warm)")
    print(f"contextd serve (MCP)  {result['mcp_tools']} tools; query_context's top hit "
          f"{result['mcp_top_hit']} in {result['mcp_answer_s']} s from start")
    print("largest               " + ", ".join(f"{n} {mb}" for n, mb in result["largest_mb"]))


if __name__ == "__main__":
    main()
