"""Which directory is the project, which config applies, where its index lives.

A Project is resolved once per command/process and passed down; nothing else guesses roots.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from contextd.config.loading import find_config, load_config
from contextd.config.sections import ContextConfig
from contextd.config.roots import WatchPath, dangerous_root
from contextd.errors import BoundaryError

# Package-manager markers: what makes a folder a project root when no git root is above it.
PROJECT_MARKERS = ("package.json", "pom.xml", "build.gradle", "build.gradle.kts", "Cargo.toml",
                   "pyproject.toml", "setup.py", "go.mod")


def detect_project_root(start: Path) -> Path:
    """The git root above ``start``, else the nearest directory with a package marker, else
    ``start`` itself."""
    start = start.resolve()
    chain = [start, *start.parents]
    for directory in chain:
        if (directory / ".git").exists():
            return directory
    for directory in chain:
        if any((directory / marker).exists() for marker in PROJECT_MARKERS):
            return directory
    return start


@dataclass(frozen=True)
class Project:
    """A resolved project: its root, its configuration and its database path."""

    root: Path
    config: ContextConfig

    @property
    def db_path(self) -> Path:
        path = Path(self.config.storage.db_path).expanduser()
        return path if path.is_absolute() else self.root / path

    @classmethod
    def open(cls, root: str | Path | None = None, config_path: str | Path | None = None
             ) -> "Project":
        """Resolve the root (explicit, else detected from the working directory) and load its
        config (explicit file, else ``<root>/context.toml``, else defaults), with remote
        embedding settings taken from the environment and ``<root>/.env`` where the file is
        silent (:mod:`contextd.config.env`)."""
        from contextd.config.env import with_environment

        resolved = Path(root).resolve() if root else detect_project_root(Path.cwd())
        check_root(resolved, str(root) if root else None)
        cfg_file = Path(config_path) if config_path else find_config(resolved)
        return cls(root=resolved, config=with_environment(load_config(cfg_file), resolved))


def check_root(root: Path, raw: str | None) -> None:
    """Refuse a root that does not exist, is not a directory, or is one contextd never
    indexes (``/``, a system directory, the home directory found by detection), before
    anything is created in it: a mistyped ``--root`` must not leave a ``.contextd/`` behind.
    ``raw`` is the root as the user gave it (None: detected from the working directory)."""
    named = raw if raw is not None else str(root)
    if not root.exists():
        raise BoundaryError(f"project root {named} does not exist")
    if not root.is_dir():
        raise BoundaryError(f"project root {named} is not a directory")
    danger = dangerous_root(WatchPath(named, root, "--root", explicit=raw is not None))
    if danger:
        raise BoundaryError(danger)
