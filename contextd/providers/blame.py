"""Who last changed which lines, and what that change was: ``git blame`` and ``git show`` for
the git-history provider.

A hit's lines are blamed (``git blame --porcelain -L start,end``: cheap, git stops walking
history once every line of the range is accounted for) to name their last change (commit,
author, time, subject), and the file's diff in that commit is kept as a short snippet. The
commits a hit carries are only those that last changed its lines, never every commit that
touched the file. Answers are cached per HEAD, so a repeated query costs no subprocess.
"""

from __future__ import annotations

import collections
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contextd.scrub.scrubber import scrub_secrets

GIT_TIMEOUT_S = 10.0
CACHE_SIZE = 512
# Lines of a diff kept as a hit's "recent change" snippet.
DIFF_LINES = 40
_UNCOMMITTED = "0" * 40


@dataclass(frozen=True)
class LineChange:
    """The last change of a line: its commit, author, unix time and subject."""

    sha: str
    author: str
    timestamp: int
    subject: str

    def describe(self) -> dict[str, Any]:
        return {"sha": self.sha[:12], "author": self.author, "timestamp": self.timestamp,
                "subject": scrub_secrets(self.subject).text}


def parse_porcelain(text: str) -> list[LineChange]:
    """One LineChange per blamed line, from ``git blame --porcelain`` output (commit details
    are written once per commit, the first time it appears)."""
    details: dict[str, dict[str, str]] = {}
    lines: list[LineChange] = []
    sha = ""
    for row in text.split("\n"):
        if row.startswith("\t"):
            info = details.get(sha, {})
            lines.append(LineChange(sha, info.get("author", ""),
                                    int(info.get("author-time", "0") or 0),
                                    info.get("summary", "")))
            continue
        head, _, rest = row.partition(" ")
        if len(head) == 40 and all(c in "0123456789abcdef" for c in head):
            sha = head
            details.setdefault(sha, {})
        elif head in ("author", "author-time", "summary") and sha:
            details[sha][head] = rest
    return lines


class Blamer:
    """Blame and diff lookups in one repository, cached until HEAD moves."""

    def __init__(self, root: Path):
        self.root = root
        self._lock = threading.Lock()
        self._head = ""
        self._cache: collections.OrderedDict[tuple, Any] = collections.OrderedDict()

    def _git(self, *args: str, timeout_s: float = GIT_TIMEOUT_S) -> str:
        return subprocess.run(["git", "-C", str(self.root), *args], capture_output=True,
                              text=True, timeout=max(0.05, timeout_s), check=True).stdout

    def _cached(self, head: str, key: tuple, compute) -> Any:
        with self._lock:
            if head != self._head:
                self._cache.clear()
                self._head = head
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        value = compute()
        if value is None:  # cut off by its time limit: another query may have more time
            return None
        with self._lock:
            self._cache[key] = value
            while len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
        return value

    def lines(self, head: str, path: str, start: int, end: int,
              timeout_s: float = GIT_TIMEOUT_S) -> list[LineChange] | None:
        """The last change of each line ``start..end`` of ``path`` at HEAD (committed lines
        only; empty when git cannot blame the file, e.g. it is not committed yet; None when
        git took longer than ``timeout_s``: blaming a long-lived file of a large history can
        take seconds)."""
        def blame() -> list[LineChange] | None:
            try:
                out = self._git("blame", "--porcelain", "-L", f"{start},{end}", head, "--",
                                path, timeout_s=timeout_s)
            except subprocess.TimeoutExpired:
                return None
            except (subprocess.SubprocessError, OSError):
                return []
            return [c for c in parse_porcelain(out) if c.sha != _UNCOMMITTED]

        return self._cached(head, ("blame", path, start, end), blame)

    def diff(self, head: str, sha: str, path: str, timeout_s: float = GIT_TIMEOUT_S
             ) -> str | None:
        """The change ``sha`` made to ``path`` (at most DIFF_LINES lines, hunks only; None
        past ``timeout_s``)."""
        def show() -> str | None:
            try:
                out = self._git("show", "--format=", "--no-color", "-U1", sha, "--", path,
                                timeout_s=timeout_s)
            except subprocess.TimeoutExpired:
                return None
            except (subprocess.SubprocessError, OSError):
                return ""
            hunks = out[out.find("\n@@") + 1:] if "\n@@" in out else ""
            return "\n".join(hunks.split("\n")[:DIFF_LINES])

        return self._cached(head, ("diff", sha, path), show)


def summarize(changes: list[LineChange]) -> dict[str, Any] | None:
    """The blame of a hit: its latest change, and how many of its lines each commit last
    changed (most first)."""
    if not changes:
        return None
    latest = max(changes, key=lambda c: c.timestamp)
    counts = collections.Counter(c.sha for c in changes)
    return {"last_change": latest.describe(),
            "line_commits": [{"sha": sha[:12], "lines": n} for sha, n in counts.most_common()]}
