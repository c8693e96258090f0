"""State and output helpers shared by every CLI command module."""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import click

from contextd.config.project import Project
from contextd.records import to_dict



def _process_started() -> float:
    """The ``time.perf_counter()`` reading at this process's start (Linux: from
    /proc/self/stat, so the interpreter's start and the imports count too; elsewhere: now,
    the CLI's first import)."""
    try:
        with open("/proc/self/stat") as stat, open("/proc/uptime") as uptime:
            start_ticks = int(stat.read().rsplit(")", 1)[1].split()[19])  # field 22
            age = float(uptime.read().split()[0]) - start_ticks / os.sysconf("SC_CLK_TCK")
        return time.perf_counter() - max(0.0, age)
    except (OSError, ValueError, IndexError):
        return time.perf_counter()


# When this process began its command: a command reports its whole wait from here, the
# start of Python, the opening of the index and any catch-up included, not only the search.
COMMAND_STARTED = _process_started()
# The key of that wait in an answer's ``timings_ms`` (``total`` is the search's own time).
COMMAND_TIMING = "command"


def command_ms() -> float:
    """Milliseconds since the command began (COMMAND_STARTED)."""
    return round((time.perf_counter() - COMMAND_STARTED) * 1000, 2)


@dataclass
class CliState:
    """Global options, and the project resolved from them on first use."""

    root: str | None
    config_path: str | None
    as_json: bool
    verbose: int
    _project: Project | None = field(default=None, repr=False)

    def project(self) -> Project:
        if self._project is None:
            self._project = Project.open(self.root, self.config_path)
        return self._project


pass_state = click.make_pass_decorator(CliState)


def user_path(path: str, root: Path | str) -> str:
    """A path typed on the command line, made absolute: an absolute one as given; a relative
    one relative to the working directory when that is inside the project (``cd src &&
    contextd chunks app.py``), else relative to the project root (``contextd --root
    ~/starlette check-file starlette/background.py`` from any folder)."""
    path = os.path.expanduser(path)
    if os.path.isabs(path):
        return os.path.normpath(path)
    root = os.path.realpath(root)
    cwd = os.path.realpath(os.getcwd())
    base = cwd if cwd == root or cwd.startswith(root + os.sep) else root
    return os.path.normpath(os.path.join(base, path))


def _escaped(char: str) -> str:
    return char.encode("unicode_escape").decode("ascii")


def shown(name: object) -> str:
    """A file name as one line of human output: control characters (a newline in a name
    would split a listing into two lines, an escape sequence would recolour the terminal) are
    written as Python escapes (``\\n``, ``\\x1b``). JSON output keeps names exact."""
    text = str(name)
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else _escaped(char)
                   for char in text)


def emit(state: CliState, result: Any, human: Callable[[Any], None]) -> None:
    """Print a result: JSON when ``--json`` was given, else through ``human``."""
    if state.as_json:
        sys.stdout.write(json.dumps(to_dict(result), indent=2, ensure_ascii=False) + "\n")
    else:
        human(result)


def emit_rows(state: CliState, rows: list, empty: str, line: Callable[[Any], str]) -> None:
    """Print a listing: JSON rows with ``--json``, else ``line(row)`` per row, or ``empty``
    when there is none."""
    def human(items: list) -> None:
        if not items:
            click.echo(empty)
        for item in items:
            click.echo(line(item))

    emit(state, rows, human)


def open_engine(state: CliState, *, reads_only: bool = False):
    """The engine a command talks to: the running owner of the project's database when there
    is one (an MCP server, a watcher), so a query needs neither the model nor the database in
    this process; else this process becomes the owner for the duration of the command
    (serving other processes meanwhile). Same methods either way (:mod:`contextd.runtime.owner`).
    ``reads_only`` (query, stats): an index in a read-only folder, which nobody can own, is
    opened read-only to answer (:mod:`contextd.runtime.read_only`)."""
    from contextd.runtime.owner import connect
    from contextd.runtime.read_only import in_read_only_folder, open_read_only

    project = state.project()
    try:
        return connect(project)
    except OSError as exc:
        if not (reads_only and in_read_only_folder(exc, project)):
            raise
    return open_read_only(project)
