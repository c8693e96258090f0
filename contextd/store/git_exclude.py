"""Keep the index directory out of ``git status``.

The index lives in ``<root>/.contextd/`` by default. Rather than edit the user's
``.gitignore`` (a tracked file: the change would show up in their next commit), contextd adds
the directory to ``.git/info/exclude``, git's per-clone ignore file, once.
"""

from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger(__name__)


def git_dir(root: Path) -> Path | None:
    """The directory holding ``info/exclude`` for the repository at ``root``: ``.git``
    itself, or for a worktree (``.git`` is a file naming the gitdir) its common directory."""
    dot_git = root / ".git"
    if dot_git.is_dir():
        return dot_git
    if not dot_git.is_file():
        return None
    text = dot_git.read_text(encoding="utf-8", errors="replace").strip()
    if not text.startswith("gitdir:"):
        return None
    gitdir = Path(text[len("gitdir:"):].strip())
    gitdir = gitdir if gitdir.is_absolute() else (root / gitdir)
    common = gitdir / "commondir"
    if common.is_file():
        target = Path(common.read_text(encoding="utf-8").strip())
        gitdir = target if target.is_absolute() else gitdir / target
    return gitdir.resolve() if gitdir.is_dir() else None


def exclude_index_dir(root: Path, db_path: Path) -> bool:
    """Add the top directory of ``db_path`` (when it is inside ``root``, a git work tree) to
    ``info/exclude``; returns whether a line was added. Failures are logged, never raised:
    a read-only ``.git`` must not stop indexing."""
    try:
        relative = Path(db_path).resolve().relative_to(Path(root).resolve())
    except ValueError:
        return False  # the index lives outside the project: nothing to hide
    if len(relative.parts) < 2:
        return False  # a database file at the root itself: leave the user's tree alone
    entry = f"/{relative.parts[0]}/"
    directory = git_dir(Path(root))
    if directory is None:
        return False
    exclude = directory / "info" / "exclude"
    try:
        text = exclude.read_text(encoding="utf-8") if exclude.exists() else ""
        if any(line.strip().strip("/") == entry.strip("/") for line in text.splitlines()):
            return False
        exclude.parent.mkdir(parents=True, exist_ok=True)
        separator = "\n" if text and not text.endswith("\n") else ""
        with exclude.open("a", encoding="utf-8") as handle:
            handle.write(f"{separator}# contextd's index (added by contextd)\n{entry}\n")
        return True
    except OSError as exc:
        log.info("could not add %s to %s: %s", entry, exclude, exc)
        return False
