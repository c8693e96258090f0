"""The file changes of ``contextd install`` / ``uninstall``: planned first (so ``--dry-run``
prints exactly what a real run writes), then applied.

Install keeps each file's previous content beside it (``<file>.contextd-backup``, once, the
first time it changes a file). Uninstall puts that content back byte for byte when the file
still holds exactly what install made of it, removes a file install created, and otherwise
takes out only contextd's entry and instruction block by structure. Several agents may share
a file (AGENTS.md): the plan reads each file as the changes before it left it.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from contextd.agents import instructions, json_files, toml_files
from contextd.agents.catalog import SERVER_NAME, Agent, entry
from contextd.errors import ContextdError

BACKUP_SUFFIX = ".contextd-backup"


@dataclass
class Change:
    """One file of one agent: its content before and after (None: no such file)."""

    agent: str
    role: str          # "config" or "instructions"
    path: Path
    before: str | None
    after: str | None
    action: str        # created, updated, unchanged, removed, restored, absent
    backup: str | None = None  # install: the content to keep aside

    def diff(self) -> str:
        return "".join(difflib.unified_diff(
            (self.before or "").splitlines(keepends=True),
            (self.after or "").splitlines(keepends=True),
            fromfile=f"{self.path} (before)", tofile=f"{self.path} (after)"))

    def to_dict(self) -> dict:
        return {"agent": self.agent, "role": self.role, "path": str(self.path),
                "action": self.action}


def backup_path(path: Path) -> Path:
    return path.with_name(path.name + BACKUP_SUFFIX)


class _Files:
    """The files as the planned changes so far leave them (a missing key: as on disk)."""

    def __init__(self) -> None:
        self._content: dict[Path, str | None] = {}

    def read(self, path: Path) -> str | None:
        if path not in self._content:
            try:
                self._content[path] = path.read_text(encoding="utf-8")
            except FileNotFoundError:
                self._content[path] = None
            except (OSError, UnicodeDecodeError) as exc:
                raise ContextdError(f"cannot read {path}: {exc}") from None
        return self._content[path]

    def write(self, path: Path, text: str | None) -> None:
        self._content[path] = text


Edit = Callable[[str | None], str | None]


def _edits(agent: Agent, role: str, path: Path, command: list[str]) -> tuple[Edit, Edit]:
    """(add, remove) for one file of an agent: each maps the file's text to its new text."""
    if role == "instructions":
        header = agent.instructions_header
        return (lambda text: instructions.with_block(text, header),
                lambda text: instructions.without_block(text or "", header))
    body = entry(agent.entry_style, command)
    if agent.format == "toml":
        return (lambda text: toml_files.with_entry(text, SERVER_NAME, body, path),
                lambda text: toml_files.without_entry(text, SERVER_NAME, path))
    keys = agent.servers_key
    return (lambda text: json_files.with_entry(text, keys, SERVER_NAME, body, path),
            lambda text: json_files.without_entry(text, keys, SERVER_NAME, path))


def _targets(agent: Agent, scope: str, root: Path, home: Path) -> list[tuple[str, Path]]:
    targets = [("config", agent.config_path(scope, root, home))]
    guide = agent.instructions_path(scope, root, home)
    if guide is not None:
        targets.append(("instructions", guide))
    return targets


def plan(agents: list[Agent], scope: str, root: Path, home: Path, command: list[str],
         install: bool) -> list[Change]:
    files, changes = _Files(), []
    for agent in agents:
        for role, path in _targets(agent, scope, root, home):
            add, remove = _edits(agent, role, path, command)
            change = (_install(files, add, path) if install
                      else _uninstall(files, add, remove, path))
            change.agent, change.role = agent.name, role
            files.write(path, change.after)
            if not install and change.action == "restored":
                files.write(backup_path(path), None)
            changes.append(change)
    return changes


def _install(files: _Files, add: Edit, path: Path) -> Change:
    before = files.read(path)
    after = add(before)
    if after == before:
        return Change("", "", path, before, after, "unchanged")
    keep = before if before is not None and files.read(backup_path(path)) is None else None
    if keep is not None:
        files.write(backup_path(path), keep)
    return Change("", "", path, before, after, "created" if before is None else "updated", keep)


def _uninstall(files: _Files, add: Edit, remove: Edit, path: Path) -> Change:
    before = files.read(path)
    if before is None:
        return Change("", "", path, None, None, "absent")
    kept = files.read(backup_path(path))
    if kept is not None and add(kept) == before:
        return Change("", "", path, before, kept, "restored")
    if kept is None and add(None) == before:
        return Change("", "", path, before, None, "removed")
    after = remove(before)
    action = "unchanged" if after == before else "removed" if after is None else "updated"
    return Change("", "", path, before, after, action)


def apply(changes: list[Change], bases: tuple[Path, ...] = ()) -> None:
    """Write the planned changes: backups first, each file replaced atomically. A file
    removed takes with it the folders it leaves empty, up to one of ``bases`` (the project,
    HOME)."""
    for change in changes:
        if change.action in ("unchanged", "absent"):
            continue
        if change.backup is not None:
            _write(backup_path(change.path), change.backup)
        if change.after is None:
            change.path.unlink(missing_ok=True)
            _prune(change.path.parent, bases)
        else:
            _write(change.path, change.after)
        if change.action == "restored":
            backup_path(change.path).unlink(missing_ok=True)


def _prune(folder: Path, bases: tuple[Path, ...]) -> None:
    while folder not in bases and any(base in folder.parents for base in bases):
        try:
            folder.rmdir()
        except OSError:  # not empty
            return
        folder = folder.parent


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.contextd-tmp")
    temporary.write_text(text, encoding="utf-8")
    if path.exists():  # ~/.claude.json and the like are often private (0600): stay so
        os.chmod(temporary, path.stat().st_mode & 0o7777)
    os.replace(temporary, path)
