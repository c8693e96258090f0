"""Commit-message localisation tasks, generated at benchmark time from real git histories.

Query = a commit's message, gold = the source files it changed, index = a snapshot taken
before the commit. Nothing copied out of those repositories is committed here: the tasks are
read from the bare git mirrors on this machine (``/work/.mirror/<owner>+<name>/repo``, or the
directory in ``CONTEXTD_EVAL_MIRRORS``) each run, and the snapshot is unpacked under
benchmarks/.cache/ (git-ignored). Where a mirror is absent its tasks are skipped with a note.

Indexing a parent per commit would cost one full embedding run per query (~150 chunks/s
here), so each repository is indexed once, at the parent of the oldest of its sampled
commits, and the sample is the latest ``COMMITS_PER_REPO`` commits after it that changed
1..MAX_GOLD_FILES source files which already existed in the snapshot. The snapshot holds none
of those changes, so the answer cannot leak from the index; the files may have changed in
between, which only makes the task harder.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from benchmarks.eval.corpora import CACHE

MIRRORS = Path(os.environ.get("CONTEXTD_EVAL_MIRRORS", "/work/.mirror"))
SNAPSHOTS = CACHE / "eval" / "history"
COMMITS_PER_REPO = 40
MAX_GOLD_FILES = 4
MAX_QUERY_CHARS = 600
# Trailers ("Co-authored-by: ...") and bot lines say nothing about the change.
_TRAILER_RE = re.compile(r"^[A-Za-z-]+: .*$|^\* .*dependabot.*$", re.M)


@dataclass(frozen=True)
class HistoryRepo:
    """A public repository whose history is mined: its mirror and its source directories."""

    name: str
    mirror: str              # owner+name under MIRRORS
    source_dirs: tuple[str, ...]

    @property
    def git_dir(self) -> Path:
        return MIRRORS / self.mirror / "repo"


HISTORY_REPOS = (
    HistoryRepo("click", "pallets+click", ("src/click/",)),
    HistoryRepo("requests", "psf+requests", ("src/requests/", "requests/")),
    HistoryRepo("httpx", "encode+httpx", ("httpx/",)),
)


@dataclass(frozen=True)
class CommitTask:
    """One commit: its message as the query and the source files it changed as the gold."""

    id: str
    query: str
    gold_files: tuple[str, ...]


def _git(repo: HistoryRepo, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", str(repo.git_dir), *args], check=True,
                          capture_output=True, text=True).stdout


def _message(raw: str) -> str:
    text = _TRAILER_RE.sub("", raw)
    return " ".join(text.split())[:MAX_QUERY_CHARS]


def _source(repo: HistoryRepo, path: str) -> bool:
    return path.endswith(".py") and path.startswith(repo.source_dirs)


def sample(repo: HistoryRepo) -> tuple[str, list[CommitTask]]:
    """(snapshot commit, tasks): see the module docstring."""
    log = _git(repo, "log", "--first-parent", "--no-merges", "-n", "2000", "--name-only",
               "--format=\x1e%H\x1f%P\x1f%B\x1f")
    picked: list[tuple[str, str, str, tuple[str, ...]]] = []
    for record in log.split("\x1e")[1:]:
        sha, parents, message, names = record.split("\x1f", 3)
        files = tuple(f for f in names.split("\n") if f.strip())
        gold = tuple(f for f in files if _source(repo, f))
        if gold and len(gold) <= MAX_GOLD_FILES and len(parents.split()) == 1 \
                and _message(message):
            picked.append((sha, parents.strip(), _message(message), gold))
        if len(picked) >= COMMITS_PER_REPO:
            break
    snapshot = picked[-1][1]
    present = set(_git(repo, "ls-tree", "-r", "--name-only", snapshot).split("\n"))
    tasks = []
    for sha, _parent, message, gold in picked:
        kept = tuple(f for f in gold if f in present)
        if kept:
            tasks.append(CommitTask(f"commit-{repo.name}-{sha[:10]}", message, kept))
    return snapshot, tasks


def snapshot_dir(repo: HistoryRepo, commit: str) -> Path:
    """The repository's tree at ``commit``, unpacked once under the cache."""
    target = SNAPSHOTS / f"{repo.name}-{commit[:12]}"
    if not target.exists():
        archive = subprocess.run(["git", "--git-dir", str(repo.git_dir), "archive", commit],
                                 check=True, capture_output=True).stdout
        scratch = target.with_name(target.name + ".part")
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(scratch, filter="data")
        scratch.rename(target)
    return target


def available(repo: HistoryRepo) -> bool:
    return (repo.git_dir / "HEAD").exists()
