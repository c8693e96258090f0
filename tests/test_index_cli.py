"""``contextd rebuild`` and ``refresh`` as a user runs them: a real process, a real repo."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from test_indexer import small_repo


def contextd(root, *args):
    env = dict(os.environ, CONTEXTD_LOAD_PLUGINS="")
    return subprocess.run([sys.executable, "-m", "contextd", "--root", str(root), *args],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, env=env, cwd=root,
                          timeout=120)


def test_rebuild_without_force_and_terminal_is_refused(tmp_path):
    done = contextd(small_repo(tmp_path), "rebuild")
    assert done.returncode == 1 and "--force" in done.stderr and done.stdout == ""


def test_dry_run_and_refresh_as_json(tmp_path):
    root = small_repo(tmp_path)
    (root / "context.toml").write_text("[embedding]\nbatch_size = 16\n")
    dry = contextd(root, "--json", "rebuild", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    result = json.loads(dry.stdout)
    assert result["estimated_files"] == 5 and result["details"]["byLanguage"]["python"] == 2
    refreshed = contextd(root, "--json", "refresh", "src")
    assert refreshed.returncode == 0, refreshed.stderr
    report = json.loads(refreshed.stdout)
    assert report["files_indexed"] == 2 and report["chunks_embedded"] >= 1
