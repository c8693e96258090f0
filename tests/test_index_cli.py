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


def test_forced_rebuild_with_vacuum_of_an_existing_index_completes(tmp_path):
    """The default rebuild vacuums: its checkpoint must not wait for ever on a read a cursor
    left half-read (DuckDB keeps such a result's transaction open)."""
    root = small_repo(tmp_path)
    first = contextd(root, "refresh")
    assert first.returncode == 0, first.stderr
    rebuilt = contextd(root, "--json", "rebuild", "--force")
    assert rebuilt.returncode == 0, rebuilt.stderr
    result = json.loads(rebuilt.stdout)
    assert result["status"] == "completed", result["message"]
    assert result["progress"]["filesProcessed"] == result["progress"]["filesTotal"] == 4
    again = contextd(root, "--json", "refresh")
    assert json.loads(again.stdout)["files_indexed"] == 0
