"""The command an agent runs to start contextd's MCP server."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def serve_command(root: Path | None) -> list[str]:
    """``contextd serve`` by absolute path: the console script beside this interpreter when
    there is one, else ``python -m contextd``. An agent starts servers with its own PATH, which
    rarely holds a virtual environment's bin folder. ``root`` pins the project (project
    scope); without it the server finds the project from the folder the agent starts it in."""
    python = os.path.abspath(sys.executable)  # not resolved: a venv's python is a symlink
    script = Path(python).parent / ("contextd.exe" if os.name == "nt" else "contextd")
    command = [str(script)] if script.is_file() else [python, "-m", "contextd"]
    if root is not None:
        command += ["--root", str(root)]
    return command + ["serve"]
