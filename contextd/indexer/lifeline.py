"""Chunking workers die with the process that started them.

A pool worker is forked by multiprocessing's forkserver, not by the indexing process, and it
waits on a queue whose writing end it holds itself: when the indexing process is SIGKILLed,
nothing tells the worker, which then lives on (with the resource tracker, whose pipe it keeps
open) holding the killed command's stdout and stderr, so a caller waiting for their end
waits for ever. Two lines of defence, set up first thing in every worker:

* ``prctl(PR_SET_PDEATHSIG, SIGKILL)``: the kernel kills the worker when its parent, the
  forkserver, ends (the forkserver itself ends when the indexing process does: its "alive"
  pipe reaches end of file);
* a daemon thread that checks every :data:`CHECK_S` whether the indexing process still
  exists, and ends the worker when it does not (any platform, and a forkserver kept alive by
  an inherited descriptor).
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading
from pathlib import Path

PR_SET_PDEATHSIG = 1  # linux/prctl.h
CHECK_S = 1.0


def die_with(owner_pid: int) -> None:
    """Make this worker end when ``owner_pid`` (the indexing process) does."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the watch below still works
        pass
    if not alive(owner_pid):  # it died before the signal was armed
        os._exit(1)
    threading.Thread(target=_watch, args=(owner_pid,), name="contextd-lifeline",
                     daemon=True).start()


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, exited but not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc: trust the signal
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def _watch(owner_pid: int) -> None:
    while alive(owner_pid):
        threading.Event().wait(CHECK_S)
    os._exit(1)
