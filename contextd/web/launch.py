"""Start an Index Manager as its own process (for the MCP tool ``open_index_manager``):
detached from the caller, so it outlives the agent's server (an agent's session may end
while the user still reads the page), with its log in
``.contextd/index-manager.log``; the caller waits until it is registered and listening."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

from contextd.errors import ContextdError
from contextd.config.project import Project
from contextd.runtime.background import contextd_command
from contextd.crypto import side_file
from contextd.web import registry

# How long a new manager may take to bind its port and register.
START_TIMEOUT_S = 30.0


def ensure_manager(project: Project, config_path: str | None = None,
                   timeout: float = START_TIMEOUT_S) -> tuple[registry.ManagerEntry, bool]:
    """The running manager of ``project``, started if there is none; and whether it was
    started now."""
    wid = registry.workspace_id(project.root)
    running = registry.find(wid)
    if running is not None:
        return running, False
    log_path = side_file(project, "index-manager.log")
    command = contextd_command(project.root, config_path)
    with log_path.open("ab") as log:
        process = subprocess.Popen(command + ["ui"], stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=log,
                                   start_new_session=True, close_fds=True,
                                   cwd=str(project.root),
                                   env={**os.environ, "PYTHONUNBUFFERED": "1"})
    # Reap it when it exits (stopped by stop_index_manager, say) while this process lives;
    # after this process, init does.
    threading.Thread(target=process.wait, name="contextd-ui-reaper", daemon=True).start()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        entry = registry.find(wid)
        if entry is not None:
            return entry, True
        if process.poll() is not None:
            raise ContextdError(f"the Index Manager exited at start ({process.returncode}): "
                                f"{_last_line(log_path)}")
        time.sleep(0.05)
    process.terminate()
    raise ContextdError(f"the Index Manager did not start within {timeout:.0f} s; see "
                        f"{log_path}")


def _last_line(path: Path) -> str:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return "no log"
    return lines[-1] if lines else "no output"
