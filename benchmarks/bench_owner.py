"""The background owner on a large, messy repository (issue 26), from the CLI as a person
meets it.

A copy of the Python standard library (``--lines`` of it; the test suites left out), made a
git repository with a git-ignored ``.venv`` of ``--venv-dirs`` folders inside, no index, a
private socket directory. Prints:

* **first and second query**: wall time of the first ``contextd query`` (indexing included;
  it answers from the lexical and symbol indexes and hands the vectors to a background
  owner) and of the one right after it (it must not wait for vectors either);
* **knowledge add during the embedding**: wall time of ``contextd kb add`` of 4 small
  documents while the owner computes the project's vectors;
* **owner memory**: the owner's resident size, sampled every second while it embeds, its
  peak (VmHWM) and what ``contextd stats --json`` reports (``owner.rss_mb``);
* **embedding rate**: the owner's chunks/s against the embedder's own on the same texts in
  this process (the figure bench_embedders measures), target >= 90%;
* **idle CPU**: the owner's CPU over ``--idle`` seconds once its work is done, a write
  into the ignored ``.venv`` included (target ~0%);
* **cold CLI query**: wall and CPU time of whole ``contextd query`` processes served by the
  warm owner (target <= 300 ms wall on a quiet machine).

Every figure is one run on whatever else the machine is doing: say so when quoting them.

    .venv/bin/python benchmarks/bench_owner.py [--lines 200000] [--venv-dirs 20000] [--idle 60]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from bench_first_run import LATENCY_QUERIES, QUESTION, Cli, copy_stdlib, embedder_throughput
from bench_first_run import median_wall_and_cpu, owner_pid, stop

SECOND_QUESTION = "compress data with zlib"


def make_repository(root: Path, lines: int, venv_dirs: int) -> tuple[int, int]:
    """The standard-library copy as a git repository with a git-ignored .venv inside."""
    files, copied = copy_stdlib(root, lines)
    (root / ".gitignore").write_text(".venv/\n")
    for i in range(venv_dirs):
        folder = root / ".venv" / "lib" / f"pkg{i // 100}" / f"mod{i}"
        folder.mkdir(parents=True)
        (folder / "__init__.py").write_text("VALUE = 1\n")
    git = ["git", "-C", str(root), "-c", "user.name=bench", "-c", "user.email=b@b"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "import"], check=True)
    return files, copied


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of a process, in kB."""
    figures = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(("VmRSS:", "VmHWM:")):
                figures[line.split(":")[0]] = int(line.split()[1])
    return figures


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=200_000, help="Lines of source to copy.")
    parser.add_argument("--venv-dirs", type=int, default=20_000,
                        help="Folders of the git-ignored .venv.")
    parser.add_argument("--idle", type=int, default=60, help="Seconds of idle CPU measured.")
    parser.add_argument("--queries", type=int, default=5, help="Cold CLI queries timed.")
    parser.add_argument("--sample", type=int, default=1000,
                        help="Texts embedded for the embedder's own throughput.")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="contextd-owner-"))
    root = work / "repo"
    env = {**os.environ, "XDG_RUNTIME_DIR": str(work / "run"), "CONTEXTD_LOAD_PLUGINS": ""}
    (work / "run").mkdir()
    root.mkdir()
    files, lines = make_repository(root, args.lines, args.venv_dirs)
    (root / "context.toml").write_text("[owner]\nidle_exit_seconds = 3600\n")
    cli = Cli(root, env)
    print(f"tree: {files:,} files, {lines:,} lines of the standard library, a git-ignored .venv "
          f"of {args.venv_dirs:,} folders; figures from one run on a shared machine")
    pid = None
    try:
        started = time.perf_counter()
        first_s, first = cli.run("query", QUESTION)
        first_cpu = cli.cpu
        second_s, _ = cli.run("query", SECOND_QUESTION)
        pid = owner_pid(root)
        print(f"first query: {first_s:.2f} s wall ({first_cpu:.2f} s CPU); second query: "
              f"{second_s:.2f} s wall ({cli.cpu:.2f} s CPU); background owner "
              f"{'pid ' + str(pid) if pid else 'not started'}")
        for line in first.stderr.splitlines():
            if "semantic results" in line or "bootstrap:" in line or "timed out" in line:
                print(f"  {line}")
        docs = work / "docs"
        docs.mkdir()
        for name in ("alpha", "beta", "gamma", "delta"):
            (docs / f"{name}.md").write_text(f"# {name}\n\nHow the {name} release ships.\n")
        add_s, _ = cli.run("kb", "add", str(docs))
        print(f"kb add of 4 documents during the embedding: {add_s:.2f} s wall")
        peak_sampled, stats = 0, cli.stats()
        while stats["indexing"]["embeddings_pending"] != 0:
            if pid:
                peak_sampled = max(peak_sampled, proc_status(pid)["VmRSS"])
            time.sleep(1)
            stats = cli.stats()
        complete_s = time.perf_counter() - started
        chunks = stats["storage"]["total_chunks"]
        rate = (stats["indexing"].get("embedding") or {}).get("rate_per_s") or 0.0
        owner = stats.get("owner") or {}
        print(f"every vector computed {complete_s:.0f} s after the first query ({chunks:,} "
              f"chunks)")
        if pid:
            print(f"owner memory: peak {proc_status(pid)['VmHWM'] / 1024:.0f} MB (VmHWM), "
                  f"{peak_sampled / 1024:.0f} MB highest sampled RSS; stats: "
                  f"{owner.get('rss_mb')} MB now, peak {owner.get('peak_rss_mb')} MB "
                  f"(memory_limit_mb {owner.get('memory_limit_mb')}; target <= 600 MB at 60k "
                  "chunks)")
        if pid:
            before = cpu_seconds(pid)
            (root / ".venv" / "lib" / "pkg0" / "mod0" / "late.py").write_text("LATE = 2\n")
            time.sleep(args.idle)
            idle = cpu_seconds(pid) - before
            print(f"idle owner: {idle:.2f} s CPU in {args.idle} s = {100 * idle / args.idle:.2f}% "
                  "of a core (target <= 1%)")
        queries = (LATENCY_QUERIES * args.queries)[:args.queries]
        wall, cpu = median_wall_and_cpu(cli, queries)
        print(f"cold CLI query, owner serving: median {wall * 1000:.0f} ms wall, "
              f"{cpu * 1000:.0f} ms CPU of the client (of {len(queries)}; target <= 300 ms "
              "wall)")
        stop(pid)  # the embedder alone reads the index: the owner holds it
        pid = None
        throughput, sampled = embedder_throughput(root, args.sample)
        print(f"embedding: owner {rate:,.1f} chunks/s; the embedder alone {throughput:,.1f} "
              f"chunks/s on {sampled:,} of the same texts -> {100 * rate / throughput:.0f}% "
              "(target >= 90%)")
    finally:
        stop(pid or owner_pid(root))
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
