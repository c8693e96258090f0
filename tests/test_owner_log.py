"""The owner's log (issue 39): a real background owner, started by a command that hands its
indexing off, writes one line when each job starts, progress lines, and one when it ends;
``contextd stats`` names the file."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from test_mcp_server import make_repo, server_env

from contextd.indexer.core import WINDOW_FLOOR_FILES

# More files than a command reads whatever its window (WINDOW_FLOOR_FILES): the rest is the
# background owner's job.
FILES = {f"src/module_{i}.py": "".join(
    f"def handler_{i}_{j}(request):\n    return request.get('value_{j}', {i * j})\n\n\n"
    for j in range(12)) for i in range(WINDOW_FLOOR_FILES + 8)}
# Every file and vector is handed to the background owner; a progress line every second.
CONFIG = ("[owner]\nanswer_within_seconds = 0.0\nindex_within_seconds = 0.001\n"
          "[bootstrap]\nprogress_interval_seconds = 1\n")


def contextd(root: Path, runtime: Path, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "contextd", "--root", str(root), *args],
                          capture_output=True, text=True, timeout=300,
                          env=server_env(runtime), stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.slow
def test_the_background_owner_logs_each_job_and_stats_names_the_file(tmp_path):
    root = make_repo(tmp_path / "repo", {**FILES, "context.toml": CONFIG})
    runtime = tmp_path / "run"
    contextd(root, runtime, "query", "handler request value")  # hands everything off
    log = root / ".contextd" / "owner.log"
    try:
        deadline = time.monotonic() + 240
        while "embedding ended" not in (log.read_text() if log.exists() else ""):
            assert time.monotonic() < deadline, log.read_text() if log.exists() else "no log"
            time.sleep(0.5)
        stats = json.loads(contextd(root, runtime, "--json", "stats"))
        human = contextd(root, runtime, "stats")
        logged = log.read_text()
        # A file changed under the owner: its watcher's batch is logged too (issue 37: what
        # a ``git checkout`` made the owner re-read, and how long it took).
        (root / "src/module_0.py").write_text(FILES["src/module_0.py"] + "EXTRA = 1\n")
        while "changed path(s)" not in log.read_text():
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.5)
        batch = next(line for line in log.read_text().splitlines() if "changed path(s)" in line)
    finally:
        contextd(root, runtime, "stop")
    stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d pid \d+ "
    assert re.fullmatch(stamp + r"1 changed path\(s\): refresh: 1 files indexed.* in [\d.]+ s",
                        batch), batch
    said = [re.sub(stamp, "", line) for line in logged.splitlines()
            if re.match(stamp, line)]  # warnings, if any, keep the CLI's format
    indexing = [line for line in said if not line.startswith(("embedding", "background"))]
    # The files: a start with their count, then the end with the indexer's summary.
    assert re.fullmatch(r"\w+ started: \d+ files", indexing[0]), said
    assert re.fullmatch(r"\w+ ended after \d+ s: \d+ files indexed.*", indexing[-1]), said
    vectors = [line for line in said if line.startswith("embedding")]
    assert re.fullmatch(r"embedding started: [\d,]+ chunks to embed", vectors[0]), said
    assert re.fullmatch(r"embedding ended after \d+ s: [\d,]+ chunks embedded", vectors[-1])
    progress = [line for line in said if re.match(r"\w+: ", line)]
    assert len(progress) == len(said) - 5, said  # the rest: one line each, at most a second apart
    assert stats["owner"]["log"] == str(log)
    assert f"owner log: {log}" in human
