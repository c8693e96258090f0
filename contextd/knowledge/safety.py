"""Which files may be read into the knowledge base, and from where.

Two rules. Everywhere (CLI, Python, MCP): nothing under ``knowledge.refused_paths``
(credentials and system configuration: ``~/.ssh``, ``/etc``, ...), checked on the resolved
path so a symlink cannot smuggle one in. Over MCP, an agent may add only files under
``knowledge.allowed_roots`` (the project root when empty): an agent must not be able to read
a user's private files into a searchable index just by naming them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from contextd.config.sections import KnowledgeConfig
from contextd.errors import KnowledgeError


def _expand(entry: str, root: Path) -> Path:
    path = Path(os.path.expanduser(entry))
    return (path if path.is_absolute() else root / path).resolve()


def _under(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def refused_reason(path: Path, config: KnowledgeConfig, root: Path) -> str | None:
    """Why ``path`` (resolved) may never be read, or None."""
    for entry in config.refused_paths:
        folder = _expand(entry, root)
        if _under(path, folder):
            return f"{entry} is never read into the knowledge base (knowledge.refused_paths)"
    return None


def allowed_roots(config: KnowledgeConfig, root: Path) -> list[Path]:
    """The folders an MCP client may add from."""
    return [_expand(entry, root) for entry in config.allowed_roots] or [root.resolve()]


def check_source(path: Path, config: KnowledgeConfig, root: Path, via_mcp: bool) -> Path:
    """The resolved path of a file or folder to add, or a KnowledgeError saying why not."""
    resolved = path.resolve()
    reason = refused_reason(resolved, config, root)
    if reason:
        raise KnowledgeError(f"{path}: refused: {reason}")
    if via_mcp:
        roots = allowed_roots(config, root)
        if not any(_under(resolved, r) for r in roots):
            raise KnowledgeError(
                f"{path}: outside the folders an agent may add from "
                f"({', '.join(map(str, roots))}); add it with the CLI, or list its folder in "
                "knowledge.allowed_roots")
    return resolved


def check_all(paths: Iterable[Path], config: KnowledgeConfig, root: Path,
              via_mcp: bool) -> list[Path]:
    """:func:`check_source` for each path, all checked before anything is read."""
    return [check_source(p, config, root, via_mcp) for p in paths]
