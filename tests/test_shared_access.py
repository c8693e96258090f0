"""Three MCP servers and a CLI on one project at once, with edits in between and the owner
killed with SIGKILL midway: every query is answered, and the final index matches a fresh
index of the same files (file hashes and chunk texts).

This is the situation of several agent sessions in one repository: each spawns its own
``contextd serve``, and a person runs ``contextd query`` beside them.
"""

from __future__ import annotations

import pytest

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from contextlib import ExitStack, suppress
from pathlib import Path

from contextd.indexer import Indexer
from contextd.config.project import Project
from contextd.store import open_store
from test_mcp_server import REPO_FILES, make_repo, mcp_session, server_env, structured

# How long the index may take to settle after the last edit (watcher debounce + indexing).
SETTLE_S = 60


def _edit(root: Path, round_no: int) -> None:
    """One round of edits: change a file, add one, and every other round delete one."""
    with open(root / "src/billing/tax.py", "a") as fh:
        fh.write(f"\n\ndef surcharge_{round_no}(amount: float) -> float:\n"
                 f"    return amount * 1.0{round_no}\n")
    (root / f"src/gen/step_{round_no}.py").parent.mkdir(parents=True, exist_ok=True)
    (root / f"src/gen/step_{round_no}.py").write_text(
        f"def step_{round_no}():\n    return 'step {round_no} of the pipeline'\n")
    if round_no % 2 == 1:
        (root / f"src/gen/step_{round_no - 1}.py").unlink()


def _ask_all(servers, round_no: int) -> None:
    """Every live server answers a query (the answer may predate the last edit)."""
    for server in servers:
        answer = structured(server.call("query_context",
                                        {"query": f"surcharge step {round_no}", "k": 5}))
        assert answer["query"] == f"surcharge step {round_no}"


def _cli_query(root: Path, env: dict[str, str]) -> dict:
    """``contextd query --json`` as a person would run it, beside the servers."""
    proc = subprocess.run([sys.executable, "-m", "contextd", "--root", str(root), "query",
                           "--json", "invoice total", "--k", "3"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _owner_pid(server) -> int:
    return structured(server.call("get_context_stats", {}))["owner"]["pid"]


def _settle(server, root: Path) -> None:
    """Wait until the index holds exactly the files on disk and indexing is idle."""
    on_disk = len([p for p in root.rglob("*") if p.is_file() and ".git" not in p.parts
                   and ".contextd" not in p.parts])
    deadline = time.monotonic() + SETTLE_S
    while time.monotonic() < deadline:
        stats = structured(server.call("get_context_stats", {}))
        if stats["storage"]["totalFiles"] == on_disk and stats["indexing"]["state"] != "indexing":
            return
        time.sleep(0.5)
    raise AssertionError(f"index did not settle: {stats['storage']} {stats['indexing']}")


def _index_snapshot(root: Path, embed: bool = True) -> tuple[dict, list]:
    """File hashes and chunk texts of the index under ``root`` (indexing it first when it
    is a fresh copy)."""
    project = Project.open(str(root))
    store = open_store(project)
    try:
        if not embed:
            Indexer(project, store, embed=False).ensure_indexed()
        hashes = {path: state.content_hash for path, state in store.file_states().items()}
        chunks = sorted((row.file_path, row.start_line, row.text)
                        for row in store.chunks_for_files())
        return hashes, chunks
    finally:
        store.close()


@pytest.mark.slow
def test_three_servers_and_a_cli_share_one_index(tmp_path):
    root = make_repo(tmp_path / "repo", REPO_FILES)
    env = server_env(tmp_path / "run")
    with ExitStack() as stack:
        servers = [stack.enter_context(mcp_session(root, env, tmp_path / f"server{i}.log"))
                   for i in range(3)]
        owners = {_owner_pid(server) for server in servers}
        assert len(owners) == 1, owners
        first_owner = owners.pop()
        assert _cli_query(root, env)["hits"]

        for round_no in range(3):
            _edit(root, round_no)
            _ask_all(servers, round_no)

        # A forced refresh in flight through a client server while the owner dies.
        killed = next(s for s in servers
                      if structured(s.call("get_context_stats", {}))["owner"]["this_process"])
        client = next(s for s in servers if s is not killed)
        refreshed: list = []
        refresher = threading.Thread(target=lambda: refreshed.append(client.call(
            "refresh_context", {"paths": ["."], "force": True, "async": False})))
        refresher.start()
        time.sleep(0.1)
        os.kill(first_owner, signal.SIGKILL)
        killed_at = time.monotonic()
        servers.remove(killed)
        _edit(root, 3)  # an edit while nobody owns the index
        new_owner = _owner_pid(servers[0])
        takeover_s = time.monotonic() - killed_at
        assert new_owner != first_owner and takeover_s < 10, takeover_s
        print(f"takeover answered after {takeover_s:.2f} s")
        refresher.join(60)
        assert structured(refreshed[0])["status"] == "completed"

        for round_no in range(4, 6):
            _edit(root, round_no)
            _ask_all(servers, round_no)
        assert _cli_query(root, env)["hits"]
        _settle(servers[0], root)
        with suppress(Exception):  # its pipe died with it
            stack.close()

    final = _index_snapshot(root)
    fresh_copy = tmp_path / "fresh"
    shutil.copytree(root, fresh_copy, ignore=shutil.ignore_patterns(".contextd"))
    assert final == _index_snapshot(fresh_copy, embed=False)
