"""Files touched recently in git, so the first index (and its embedding) starts with them.

An agent's first questions are about the code being worked on: the files of the last few
hundred commits, the most often changed first (the module at the centre of the work, not the
one a single commit renamed). One ``git log`` (about 0.1 s on a large repository) names
them; without git, or when git fails, nothing is preferred and the usual priority order
applies.
"""

from __future__ import annotations

import logging
import subprocess
from collections import Counter
from pathlib import Path

log = logging.getLogger(__name__)

# Commits looked at, and how long git may take before it is ignored.
RECENT_COMMITS = 300
GIT_TIMEOUT_S = 3.0


def recently_touched(root: Path, commits: int = RECENT_COMMITS) -> Counter[str]:
    """How many of the last ``commits`` commits changed each root-relative POSIX path
    (empty without git)."""
    if not (Path(root) / ".git").exists():
        return Counter()
    try:
        proc = subprocess.run(
            ["git", "-C", str(root), "log", f"-n{commits}", "--name-only", "--format=",
             "--no-renames", "--relative"],
            capture_output=True, text=True, timeout=GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.info("git log for the indexing order failed: %s", exc)
        return Counter()
    if proc.returncode != 0:
        return Counter()
    return Counter(line.strip() for line in proc.stdout.splitlines() if line.strip())
