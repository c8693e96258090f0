"""Does a watching browser slow indexing down? The Index Manager's cost, measured.

For each round, a fresh copy of part of the Python standard library is indexed from scratch
by a real ``contextd ui`` process (it becomes the owner and bootstraps), once with nobody
watching and once with a headless Chromium (Debian's package) showing the live progress page
(Server-Sent Events twice a second, the progress poller, the JSON-lines log). The figures are
the bootstrap job's own lines/s as the engine records it, and the time from start until every
vector is computed (the harness polls the manager's JSON endpoint four times a second). Rounds alternate to spread machine noise.

    .venv/bin/python benchmarks/bench_ui.py [--lines 20000] [--rounds 3]
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
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_indexer import make_corpus  # noqa: E402

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-dev-shm-usage"]


def get_json(url: str, path: str, cookie: str):
    request = urllib.request.Request(url + path, headers={"Cookie": cookie})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


def one_run(corpus: Path, with_browser: bool, runtime: Path) -> dict:
    shutil.rmtree(corpus / ".contextd", ignore_errors=True)
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime)}
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "contextd", "--root", str(corpus), "ui"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    url = proc.stdout.readline().decode().strip()
    base, token = url.split("/?token=")
    cookie = f"contextd_manager={token}"
    playwright = browser = None
    try:
        if with_browser:
            from playwright.sync_api import sync_playwright

            playwright = sync_playwright().start()
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page()
            page.goto(url)
            page.goto(base + "/live")
        complete = None
        while complete is None:  # indexed, every vector computed, nothing running
            now = get_json(base, "/api/progress", cookie)
            if (now.get("ready") and now["state"] == "idle" and not now["jobs"]
                    and now["generation"] > 0 and now.get("embeddings_pending") == 0):
                complete = time.monotonic() - started
            time.sleep(0.25)
    finally:
        if browser is not None:
            browser.close()
        if playwright is not None:
            playwright.stop()
        proc.terminate()
        proc.wait(60)
    from contextd.config.project import Project
    from contextd.store.duckdb import DuckDBStore

    store = DuckDBStore(Project.open(str(corpus)).db_path)
    try:
        job = [j for j in store.list_jobs(limit=20) if j.job_type == "bootstrap"][0]
    finally:
        store.close()
    metrics = job.metrics
    return {"seconds": metrics["seconds"], "lines": metrics["lines_indexed"],
            "chunks": metrics["chunks_written"], "complete": complete}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=20000, help="Corpus size in lines.")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    corpus, lines = make_corpus("ui-corpus", args.lines)
    print(f"corpus: {lines:,} lines of the standard library; model cache warm")
    results: dict[bool, list[dict]] = {False: [], True: []}
    with tempfile.TemporaryDirectory() as runtime:
        for round_no in range(args.rounds):
            for with_browser in ((False, True) if round_no % 2 == 0 else (True, False)):
                run = one_run(corpus, with_browser, Path(runtime))
                results[with_browser].append(run)
                print(f"round {round_no + 1} {'browser' if with_browser else 'no browser':>10}: "
                      f"bootstrap {run['seconds']:.1f} s ({run['lines'] / run['seconds']:,.0f} "
                      f"lines/s, {run['chunks']:,} chunks); every vector computed "
                      f"{run['complete']:.1f} s after start", flush=True)
    for with_browser, runs in results.items():
        rates = [r["lines"] / r["seconds"] for r in runs]
        complete = [r["complete"] for r in runs]
        print(f"{'with a browser' if with_browser else 'nobody watching':>16}: bootstrap "
              f"median {statistics.median(rates):,.0f} lines/s; index complete (vectors "
              f"included) median {statistics.median(complete):.1f} s "
              f"({min(complete):.1f}-{max(complete):.1f})")


if __name__ == "__main__":
    main()
