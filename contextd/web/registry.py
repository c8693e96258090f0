"""Which Index Managers run, across projects: one JSON file per workspace in the user's
private runtime directory (the owner sockets' directory, mode 0700), written by the manager
when it starts and removed when it stops. Entries of processes that died without cleaning up
are dropped when read, so the registry never lists a manager that is not there.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from contextd.errors import ContextdError
from contextd.indexer.lifeline import alive
from contextd.runtime.election import runtime_dir

# How long stop() waits for a manager to exit after SIGTERM. A manager that owns the index
# closes its engine first, and the owner lets a model load under way finish (up to 10 s) and
# gives up its embedding window: on a loaded machine that passed 10 s (a CI run, 2026-11-26).
STOP_WAIT_S = 30.0


def workspace_id(root: Path) -> str:
    """A project's stable id on this machine: the first 16 hex digits of the SHA-256 of its
    resolved root, the same from every process and every version that keeps this rule. Deliberately not the
    PostgreSQL workspace id (:mod:`contextd.store.postgres.workspace`), which makes clones of
    one repository share an index: two clones on one machine each have their own manager."""
    return hashlib.sha256(str(Path(root).resolve()).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class ManagerEntry:
    """A running manager: whose it is, where it listens (``url`` holds the token) and since
    when."""

    workspace_id: str
    root: str
    pid: int
    port: int
    url: str
    started_at: str


def registry_dir() -> Path:
    path = runtime_dir() / "managers"
    path.mkdir(mode=0o700, exist_ok=True)
    return path


def _entry_path(wid: str) -> Path:
    return registry_dir() / f"{wid}.json"


def register(entry: ManagerEntry) -> None:
    """Record a started manager (written whole, then renamed: readers never see half)."""
    path = _entry_path(entry.workspace_id)
    temp = path.with_suffix(f".{os.getpid()}.tmp")
    temp.write_text(json.dumps(asdict(entry)), encoding="utf-8")
    os.chmod(temp, 0o600)
    temp.replace(path)


def unregister(wid: str, pid: int) -> None:
    """Remove a manager's entry, if it is still this process's."""
    found = find(wid)
    if found is not None and found.pid == pid:
        _entry_path(wid).unlink(missing_ok=True)


def find(wid: str) -> ManagerEntry | None:
    """The live manager of a workspace, if any (a dead one's entry is removed)."""
    path = _entry_path(wid)
    try:
        entry = ManagerEntry(**json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None
    if not alive(entry.pid):
        path.unlink(missing_ok=True)
        return None
    return entry


def list_managers() -> list[ManagerEntry]:
    """Every live manager, oldest first."""
    entries = [find(path.stem) for path in registry_dir().glob("*.json")]
    return sorted((e for e in entries if e is not None), key=lambda e: e.started_at)


def stop(wid: str, timeout: float = STOP_WAIT_S) -> ManagerEntry:
    """SIGTERM the manager of a workspace and wait until it is gone."""
    entry = find(wid)
    if entry is None:
        known = ", ".join(e.workspace_id for e in list_managers()) or "none"
        raise ContextdError(f"no Index Manager runs for workspace {wid!r} (running: {known})")
    os.kill(entry.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while alive(entry.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if alive(entry.pid):
        raise ContextdError(f"the Index Manager of {entry.root} (pid {entry.pid}) did not stop "
                            f"within {timeout:.0f} s")
    _entry_path(wid).unlink(missing_ok=True)
    return entry
