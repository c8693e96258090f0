"""Backups: scheduled and on demand while a server owns the index, pruned to backup_keep;
restore refused while the index is owned, then backup → delete the database → restore →
the same answers; a damaged backup is refused before anything is replaced."""

from __future__ import annotations

import pytest

import json
import time

import httpx2

from contextd.config.project import Project
from service_helpers import Server, cli, env_for, make_project


def _answer(root, env) -> list[tuple[str, int]]:
    done = cli(root, env, "--json", "query", "refresh an expired JWT token", "--k", "3")
    assert done.returncode == 0, done.stderr
    return [(h["file_path"], h["start_line"]) for h in json.loads(done.stdout)["hits"]]


@pytest.mark.slow
def test_backup_delete_restore_answers_the_same(tmp_path) -> None:
    root = make_project(tmp_path / "proj", "[storage]\nbackup_enabled = true\nbackup_keep = 2\n"
                                           "[engine]\nrate_limit_per_s = 0\n")
    env = env_for(tmp_path / "run")
    db = Project.open(str(root)).db_path
    backups = db.parent / "backups"
    server = Server(root, env).start().wait_indexed()
    try:
        # backup_enabled: the owner takes one at start (none was ever taken).
        deadline = time.monotonic() + 60
        while not list(backups.glob("context-*.duckdb")) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert list(backups.glob("context-*.duckdb"))
        before = _answer(root, env)  # through the server's owner socket
        # On demand, through the owner, while it serves: the CLI and the HTTP endpoint.
        taken = json.loads(cli(root, env, "--json", "backup").stdout)
        over_http = httpx2.post(server.url + "/backup", json={}, timeout=60).json()
        assert taken["size_bytes"] > 0 and over_http["path"] != taken["path"]
        assert len(list(backups.glob("context-*.duckdb"))) == 2  # pruned to backup_keep
        refused = cli(root, env, "restore", over_http["path"])
        assert refused.returncode == 1 and "in use by pid" in refused.stderr
    finally:
        assert server.stop() == 0
    db.unlink()
    assert not db.exists()
    restored = cli(root, env, "--json", "restore", over_http["path"])
    assert restored.returncode == 0, restored.stderr
    assert json.loads(restored.stdout)["files"] == 4
    assert _answer(root, env) == before


def test_restore_refuses_a_file_that_is_not_an_index(tmp_path) -> None:
    root = make_project(tmp_path / "proj")
    env = env_for(tmp_path / "run")
    bogus = root / ".contextd" / "backups" / "bogus.duckdb"
    bogus.parent.mkdir(parents=True)
    bogus.write_bytes(b"not a database" * 100)
    done = cli(root, env, "restore", str(bogus))
    assert done.returncode == 1 and "not a usable contextd index" in done.stderr
    assert not Project.open(str(root)).db_path.exists()
