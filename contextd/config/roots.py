"""Directories contextd never indexes, and the watch-path record every check is made on.

Kept apart from :mod:`contextd.config.checks` because :class:`contextd.config.project.Project`
refuses a dangerous root before it exists, while the checks need a Project.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# Refused together with everything below them: system state, never project files.
SENSITIVE_ROOTS = ("/etc", "/proc", "/sys", "/dev", "/boot")
# Refused themselves (far too broad) but a project may live below them (/var/www/site).
BROAD_ROOTS = ("/", "/usr", "/var", "/home")


@dataclass(frozen=True)
class WatchPath:
    """One configured watch path: ``raw`` as written, ``path`` absolute and resolved, ``key``
    the dotted config key that names it (for messages)."""

    raw: str
    path: Path
    key: str
    explicit: bool


def dangerous_root(watch: WatchPath) -> str | None:
    """Why a watch path must be refused, or None.

    The home directory is refused unless it is named explicitly as an absolute path: "auto"
    landing in ``$HOME`` or a stray ``~``/``.`` must never index a whole home directory.
    """
    text = str(watch.path)
    for root in SENSITIVE_ROOTS:
        if text == root or text.startswith(root + "/"):
            return f"{text} is a system directory ({root}); refusing to index it"
    if text in BROAD_ROOTS:
        return f"{text} is far too broad a root; name the project's directories instead"
    if watch.path == Path.home().resolve() and not (
            watch.explicit and Path(watch.raw).is_absolute()):
        return (f"{text} is your home directory; refusing to index it unless it is named "
                "explicitly as an absolute watch path")
    return None
