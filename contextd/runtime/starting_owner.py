"""The "starting owner" marker: a background owner is on its way, so do not become a second one.

A command that owns the index starts a background owner (``contextd owner``) before it
answers, and lets go of the owner lock when it exits. The new process then needs a moment
(its imports, ~1 s of CPU, more on a loaded machine) before it takes the lock. A second
command started in that gap found the lock free, became the owner itself and read files
in-line for its whole reading window, while the background owner, which had come to do
exactly that, waited behind it (issue 37: "one reader at a time").

A command that owns the index now hands the lock itself to the background owner it starts
(:class:`contextd.runtime.election.OwnerLock`), so that gap is gone where a lock was held;
this marker covers the starts where none was (a PostgreSQL index, whose commands take no
lock). The command that starts the background owner writes ``owner.starting`` beside the
database: the new process's pid and the time it was started. Another process that finds the
lock free while the marker is live waits for that owner (at most :data:`WAIT_S`) instead of
taking the lock, and then talks to it. The background owner removes the marker once it
serves, or when it exits without serving. A marker whose process is gone (killed before it
could remove it) or older than :data:`STALE_S` (the time a background owner gives itself
to take over) is ignored, so a crash never blocks anyone for longer than that.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from contextd.indexer.lifeline import alive

MARKER = "owner.starting"
# How long a process that finds the lock free waits for a starting owner before it takes
# the lock itself (the fallback: it then reads in-line, as before).
WAIT_S = 2.0
# Past this age a marker is ignored: the background owner gives up taking over after the
# same time (contextd.runtime.background.TAKEOVER_WAIT_S).
STALE_S = 60.0


def marker_path(db_path: Path | str) -> Path:
    """The marker of a database: beside it, like the owner lock."""
    return Path(db_path).resolve().parent / MARKER


def mark(db_path: Path | str, pid: int) -> None:
    """Say that process ``pid``, just started, is about to own the database. Written whole
    (a temporary file renamed), so a reader never sees half a marker."""
    path = marker_path(db_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f"{MARKER}.{os.getpid()}")
    temporary.write_text(json.dumps({"pid": pid, "started": time.time()}))
    os.replace(temporary, path)


def starting_pid(db_path: Path | str) -> int | None:
    """The pid of another process on its way to own the database, or None: no marker, an
    unreadable one, this process's own, one whose process is gone, or one too old."""
    try:
        data = json.loads(marker_path(db_path).read_text())
        pid, started = int(data["pid"]), float(data["started"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if pid == os.getpid() or time.time() - started > STALE_S or not alive(pid):
        return None
    return pid


def clear(db_path: Path | str, pid: int) -> None:
    """Remove the marker if it names ``pid`` (the owner it announced serves now, or gave
    up); a marker naming a later background owner is left to it."""
    path = marker_path(db_path)
    try:
        if int(json.loads(path.read_text())["pid"]) == pid:
            path.unlink()
    except (OSError, ValueError, KeyError, TypeError):
        pass
