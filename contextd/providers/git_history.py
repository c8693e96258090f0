"""Git-history provider: what the project's history says about a query.

Three signals, read from ``git log`` through a subprocess (no library needed, works with any
git) and cached until HEAD moves:

1. commits whose messages share words with the query → the files they touched;
2. files the query names, or that define symbols it names → their recent commits;
3. co-change neighbours of those files: files that were changed in the same commits.

Each file is returned as its chunk that best matches the query words. The first
BLAMED_HITS hits are blamed (:mod:`contextd.providers.blame`): ``metadata["blame"]`` names
the last change of their lines and how many lines each commit last changed,
``metadata["recent_change"]`` holds that change's diff of the file, and ``metadata["commits"]``
keeps only the commits behind the hit that last changed those very lines. The commits that
made the file a hit without being checked against its lines are ``metadata["file_commits"]``.
Outside a git repository (or without git) the provider reports itself unavailable.
"""

from __future__ import annotations

import collections
import os
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contextd.providers.base import (
    ContextProvider, ProviderQuery, ScopeFilter, snippet_from_row,
)
from contextd.providers.blame import Blamer, summarize
from contextd.providers.fulltext import code_tokens
from contextd.providers.symbol import extract_candidates
from contextd.records import ContextScope, ContextSnippet, ProviderType, TokenBudget
from contextd.scrub.scrubber import scrub_secrets
from contextd.store.base import ChunkRow

# Signal strengths (scores in [0, 1]).
MESSAGE_WEIGHT = 1.0
NAMED_FILE_WEIGHT = 0.8
CO_CHANGE_WEIGHT = 0.6
# A commit message must share at least this share of the query's words to count.
MIN_MESSAGE_OVERLAP = 0.25
# Commits touching more files than this (imports, mass renames, reformatting) say nothing
# about which files belong together.
LARGE_COMMIT_FILES = 12
# Files must have changed together at least this often to be co-change neighbours.
MIN_SHARED_COMMITS = 2
COMMITS_IN_METADATA = 3
# Hits whose lines are blamed (a subprocess each, cached per HEAD).
BLAMED_HITS = 3
# The share of the provider's timeout_ms its blame lookups may use (git blame of a file with
# a long history takes seconds; the hits and their commits are the answer, blame enriches it).
BLAME_SHARE = 0.25
HEAD_CHECK_INTERVAL_S = 2.0
GIT_TIMEOUT_S = 10.0
_RECORD_SEP, _FIELD_SEP = "\x1e", "\x1f"


@dataclass(frozen=True)
class Commit:
    """One commit: id, author, unix time, subject, and files (relative to the project root)."""

    sha: str
    author: str
    timestamp: int
    subject: str
    files: tuple[str, ...]

    def describe(self) -> dict[str, Any]:
        # Commit subjects are not indexed text: scrubbed here, on their way to an answer.
        return {"sha": self.sha[:12], "author": self.author, "timestamp": self.timestamp,
                "subject": scrub_secrets(self.subject).text}


def _git(root: Path, *args: str) -> str:
    result = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                            timeout=GIT_TIMEOUT_S, check=True)
    return result.stdout


class GitHistoryProvider(ContextProvider):
    """Commits and co-changes of the project's git repository."""

    id = "git_history"
    name = "Git history (commits, co-changes)"
    type = ProviderType.GIT_HISTORY

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._prefix: str | None = None  # project root relative to the git top level
        self._available: bool | None = None
        self._head = ""
        self._checked_at = 0.0
        self._commits: list[Commit] = []
        self._blamer: Blamer | None = None

    def is_available(self) -> bool:
        if self.context is None:
            return False
        if self._available is None:
            self._available = self._find_repository()
        return self._available

    def _find_repository(self) -> bool:
        if shutil.which("git") is None:
            return False
        root = Path(self.context.project.root)
        try:
            top = Path(_git(root, "rev-parse", "--show-toplevel").strip()).resolve()
        except (subprocess.SubprocessError, OSError):
            return False
        rel = os.path.relpath(root.resolve(), top)
        self._prefix = "" if rel == "." else rel.replace(os.sep, "/") + "/"
        return True

    def commits(self) -> list[Commit]:
        """The last ``max_commits`` commits, re-read when HEAD has moved."""
        with self._lock:
            now = time.monotonic()
            if now - self._checked_at < HEAD_CHECK_INTERVAL_S and self._head:
                return self._commits
            self._checked_at = now
            root = Path(self.context.project.root)
            try:
                head = _git(root, "rev-parse", "HEAD").strip()
            except subprocess.CalledProcessError:
                return []  # a repository without commits yet
            if head != self._head:
                self._commits = self._read_log(root)
                self._head = head
            return self._commits

    def _read_log(self, root: Path) -> list[Commit]:
        out = _git(root, "log", f"-n{self.settings.max_commits}", "--no-merges",
                   "--name-only", f"--format={_RECORD_SEP}%H{_FIELD_SEP}%an{_FIELD_SEP}%at"
                   f"{_FIELD_SEP}%s")
        commits = []
        for record in out.split(_RECORD_SEP)[1:]:
            header, _, body = record.partition("\n")
            sha, author, stamp, subject = header.split(_FIELD_SEP, 3)
            files = tuple(f[len(self._prefix):] for f in body.split("\n")
                          if f and f.startswith(self._prefix))
            commits.append(Commit(sha, author, int(stamp), subject, files))
        return commits

    def catch_up(self, generation: int | None) -> None:
        """Read the git log and the catalog it looks named files up in."""
        if self.is_available():
            self.commits()
            self.context.catalog.sync(generation)

    def query(self, query: ProviderQuery | str, scope: ContextScope, budget: TokenBudget
              ) -> list[ContextSnippet]:
        query = ProviderQuery.of(query)
        if not self.is_available():
            return []
        blame_until = time.monotonic() + BLAME_SHARE * self.settings.timeout_ms / 1000
        commits = self.commits()
        words = set(code_tokens(query.text))
        if not commits or not words:
            return []
        found: dict[str, tuple[float, str, list[Commit]]] = {}
        self._by_message(commits, words, found)
        seeds = self._named_files(query.text, query.generation)
        for path in seeds:
            touching = [c for c in commits if path in c.files]
            if touching:
                _offer(found, path, NAMED_FILE_WEIGHT, "recent_commits", touching)
        self._co_changes(commits, set(found) | seeds, found)
        return self._snippets(found, words, scope, query, blame_until)

    def _by_message(self, commits: list[Commit], words: set[str],
                    found: dict[str, tuple[float, str, list[Commit]]]) -> None:
        for commit in commits:
            if len(commit.files) > LARGE_COMMIT_FILES:
                continue
            overlap = len(words & set(code_tokens(commit.subject))) / len(words)
            if overlap >= MIN_MESSAGE_OVERLAP:
                for path in commit.files:
                    _offer(found, path, MESSAGE_WEIGHT * overlap, "commit_message", [commit])

    def _named_files(self, text: str, generation: int | None) -> set[str]:
        """Indexed files the query names, or that define the symbols it names."""
        config = self.context.config
        extensions = frozenset(e.lower() for e in config.indexing.allowed_extensions)
        candidates, names = extract_candidates(text, extensions,
                                               config.ranking.max_symbol_candidates)
        catalog = self.context.catalog
        paths = set()
        for path in catalog.file_paths(generation):
            if any(path == n or path.endswith("/" + n) for n in names):
                paths.add(path)
        strong = [c.lower for c in candidates if c.weight >= 1.0]
        if strong:
            ids = [row[0] for row in catalog.find_symbols(strong, (), generation)]
            paths |= {r.file_path for r in self.context.catalog.rows_by_id(ids, generation).values()}
        return paths

    def _co_changes(self, commits: list[Commit], seeds: set[str],
                    found: dict[str, tuple[float, str, list[Commit]]]) -> None:
        focused = [c for c in commits if len(c.files) <= LARGE_COMMIT_FILES]
        for seed in seeds:
            touching = [c for c in focused if seed in c.files]
            shared = collections.Counter(p for c in touching for p in c.files if p != seed)
            for path, count in shared.items():
                if count >= MIN_SHARED_COMMITS:
                    together = [c for c in touching if path in c.files]
                    _offer(found, path, CO_CHANGE_WEIGHT * count / len(touching), "co_change",
                           together)

    def _snippets(self, found: dict[str, tuple[float, str, list[Commit]]], words: set[str],
                  scope: ContextScope, query: ProviderQuery, blame_until: float
                  ) -> list[ContextSnippet]:
        catalog = self.context.catalog
        paths = catalog.file_paths(query.generation)
        scope_filter = ScopeFilter(scope)
        ranked = sorted((p for p in found if p in paths and scope_filter.accepts_path(p)),
                        key=lambda p: (-found[p][0], p))[:query.limit]
        rows = catalog.chunks_for_files([paths[p] for p in ranked], query.generation)
        best = {}
        for row in rows:
            if scope_filter.accepts_row(row):
                current = best.get(row.file_path)
                if current is None or _overlap(row, words) > _overlap(current, words):
                    best[row.file_path] = row
        out = []
        for path in ranked:
            if path in best:
                score, reason, commits = found[path]
                meta = {"reason": reason}
                blamed = self._blame(best[path], commits, blame_until) \
                    if len(out) < BLAMED_HITS else None
                if blamed is not None:
                    meta.update(blamed)
                else:
                    meta["file_commits"] = [c.describe() for c in commits[:COMMITS_IN_METADATA]]
                if score >= query.min_score:
                    out.append(snippet_from_row(best[path], score, self.id, meta))
        return out

    def _blame(self, row: ChunkRow, commits: list[Commit], until: float
               ) -> dict[str, Any] | None:
        """Blame of a hit's lines, its last change's diff, and the commits behind the hit
        that last changed those lines (see the module docstring); None when git cannot
        blame them before ``until`` (a monotonic time)."""
        if time.monotonic() >= until:
            return None
        if self._blamer is None:
            self._blamer = Blamer(Path(self.context.project.root))
        changes = self._blamer.lines(self._head, row.file_path, row.start_line, row.end_line,
                                     until - time.monotonic())
        if changes is None:
            return None
        touched = {c.sha for c in changes}
        meta: dict[str, Any] = {
            "commits": [c.describe() for c in commits if c.sha in touched][:COMMITS_IN_METADATA]}
        blame = summarize(changes)
        if blame is not None:
            meta["blame"] = blame
            latest = max(changes, key=lambda c: c.timestamp)
            # An old version may hold a secret since removed: the diff is scrubbed too.
            diff = self._blamer.diff(self._head, latest.sha, row.file_path,
                                     until - time.monotonic())
            if diff is not None:
                meta["recent_change"] = {**latest.describe(),
                                         "diff": scrub_secrets(diff).text}
        return meta

    def stats(self) -> dict[str, Any]:
        return {"repository": bool(self._available), "commits_cached": len(self._commits)}


def _offer(found: dict[str, tuple[float, str, list[Commit]]], path: str, score: float,
           reason: str, commits: list[Commit]) -> None:
    """Keep the strongest reason for a file, collecting the commits behind it."""
    current = found.get(path)
    if current is None or score > current[0]:
        found[path] = (score, reason, commits + (current[2] if current else []))
    else:
        current[2].extend(c for c in commits if c not in current[2])


def _overlap(row: ChunkRow, words: set[str]) -> int:
    """How many of the query's words (stems, lower-cased) a chunk's label and text hold, as
    substrings: a hit's file is read chunk by chunk (hundreds in a large module) to show the
    chunk most about the query, and tokenising each took seconds on a large project."""
    text = f"{row.label}\n{row.text}".lower()
    return sum(1 for word in words if word in text)
