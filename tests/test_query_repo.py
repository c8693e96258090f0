"""``contextd query --repo`` (issue 39): a repository given by path or git URL is indexed into
the cache and answered from, and the repository itself is left as it was. Local only: the URL
is a ``file://`` one, so nothing reaches the network."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from test_mcp_server import REPO_FILES, make_repo, server_env


def contextd(env: dict, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "contextd", *args], capture_output=True,
                          text=True, timeout=300, env=env, cwd=str(cwd),
                          stdin=subprocess.DEVNULL)


def stop_background_owners(cache: Path) -> None:
    """SIGTERM to the background owners the queries handed their vectors to: each is named
    in the owner.log its command created (it writes its first line once started)."""
    for log in cache.glob("contextd/repos/*/index/owner.log"):
        deadline = time.monotonic() + 60
        while "background owner started" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        for pid in set(re.findall(r"pid (\d+) background owner started", log.read_text())):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGTERM)


@pytest.mark.slow
def test_query_answers_from_a_repository_by_path_and_by_url(tmp_path):
    dependency = make_repo(tmp_path / "dependency", REPO_FILES)
    here = tmp_path / "here"  # the project the command runs in: not the one searched
    here.mkdir()
    env = {**server_env(tmp_path / "run"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    try:
        for source in (str(dependency), f"file://{dependency}"):
            done = contextd(env, "--json", "query", "value added tax on an amount", "--repo",
                            source, "--k", "2", cwd=here)
            assert done.returncode == 0, done.stderr
            hits = json.loads(done.stdout)["hits"]
            assert hits[0]["file_path"] == "src/billing/tax.py", hits
    finally:
        stop_background_owners(tmp_path / "cache")
    folders = sorted(p.name for p in (tmp_path / "cache" / "contextd" / "repos").iterdir())
    assert len(folders) == 2 and all(name.startswith("dependency-") for name in folders)
    clone = next(p for p in (tmp_path / "cache" / "contextd" / "repos").iterdir()
                 if (p / "src").is_dir())
    assert (clone / "src" / "src" / "billing" / "tax.py").is_file()
    assert not (dependency / ".contextd").exists() and not (here / ".contextd").exists()
    status = subprocess.run(["git", "-C", str(dependency), "status", "--porcelain"],
                            capture_output=True, text=True, check=True).stdout
    assert status == ""  # nothing written into the repository


def test_a_repo_that_is_neither_a_folder_nor_a_url_is_refused(tmp_path):
    done = contextd(server_env(tmp_path / "run"), "query", "x", "--repo", "no/such/folder",
                    cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip() == ("contextd: error: --repo no/such/folder: neither a folder "
                                   "nor a git URL (https://..., ssh://..., git@host:owner/name)")
